//! Learning mode: how a new master answers while it rebuilds its state
//! (claims echoed, within a capacity or a bound). The rest of the
//! allocation is `mod.rs`.
//!
//! Must not: hand out more than the capacity, or the bound given, leaves
//! free, except by echoing a claim.

use super::{RequesterId, Shares};
use crate::kind::Kind;
use doorman_lease::Amount;

impl<T> Shares<T> {
    /// Learning mode (a new master rebuilding its state): grants and records
    /// what the requester claims to hold (0 for a newcomer), but never more
    /// than the algorithm could ever grant it: the capacity for FAIR_SHARE,
    /// PROPORTIONAL_SHARE and NO_ALGORITHM, the capacity × its subclients
    /// for STATIC. For the share algorithms a claim is also honoured only
    /// within what the others' grants leave free: claims are honoured first
    /// come, first served, and Σ has stays within the capacity however
    /// much the requesters claim.
    pub fn decide_learning(&mut self, id: RequesterId, claimed_has: Amount) -> f64 {
        if self.slot(id).is_none() {
            return 0.0;
        }
        let claimed = claimed_has.get();
        let grant = match self.kind {
            Kind::FairShare | Kind::ProportionalShare => claimed.min(self.free_for(id)),
            Kind::Static => {
                let subclients: f64 = self.demands(id).iter().map(|d| d.1).sum();
                claimed.min(self.capacity * subclients)
            }
            Kind::NoAlgorithm => claimed.min(self.capacity),
        };
        self.put_has(id, grant);
        grant
    }

    /// Learning mode where the capacity may be smaller than what was handed
    /// out before (an intermediate server whose parent's grant changed):
    /// echoes the claim only within what the others' grants leave free, so
    /// the sum of grants never exceeds the capacity.
    pub fn decide_learning_within(&mut self, id: RequesterId, claimed_has: Amount) -> f64 {
        self.echo_within(id, claimed_has, self.capacity)
    }

    /// Learning mode where the most this server may hand out in all is
    /// `bound` (see doorman-core `UpstreamState::learning_bound`): echoes
    /// the claim, or grants up to the requester's target within its wants
    /// if that is more, within `bound` less what the others hold. Below
    /// the plain echo when the capacity is smaller than what the
    /// predecessors may still have out: the bound then holds claims back
    /// (plain learning mode would echo them within the capacity and, with
    /// the predecessors' other leases still out, hand out more than it).
    pub fn decide_learning_grow(
        &mut self,
        id: RequesterId,
        claimed_has: Amount,
        bound: f64,
    ) -> f64 {
        if self.slot(id).is_none() {
            return 0.0;
        }
        let owed = self.target(id).min(self.wants(id));
        let grant = claimed_has.get().max(owed).min(self.free_within(id, bound));
        self.put_has(id, grant);
        grant
    }

    /// Echoes the claim within `bound` less what the others hold, for a
    /// server that knows only an upper bound of its capacity (an
    /// intermediate server whose parent has not answered yet, bounded by
    /// its local template).
    pub fn echo_within(&mut self, id: RequesterId, claimed_has: Amount, bound: f64) -> f64 {
        if self.slot(id).is_none() {
            return 0.0;
        }
        let grant = claimed_has.get().min(self.free_within(id, bound));
        self.put_has(id, grant);
        grant
    }
}
