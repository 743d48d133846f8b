//! What a new master or a new node takes over on the request path: a
//! downstream server's inherited lease while it does not claim it yet
//! (`inherited`, `inherit`), the sub-leases a predecessor may still hold
//! (`predecessor_out`), a first claim counted towards the learning bound
//! (`count_first_claim`), and claims answered before the parent's first
//! answer (`decide_pending`). `decide.rs` calls these in its order.
//!
//! Must not: read a clock or know about protobufs.

use doorman_algorithms::RequesterId;
use doorman_lease::{Amount, Time};

use super::record::Record;
use super::request::{Decision, ResourceAsk, Who};
use super::resource::Resource;

impl Resource {
    /// A downstream server that claims no lease although it holds an
    /// unexpired one here, and used to claim it (or is one of ours, which
    /// always claim what they hold: they report `outstanding`), is a newly
    /// elected master of that node (replicas share the node id). Its predecessor's
    /// sub-leases stay out until that lease expires, so the new master
    /// inherits at least it, within what the others leave free (the
    /// capacity may have shrunk since). It keeps inheriting if its first
    /// answer was lost and it asks again without a claim, but never past
    /// the expiry of the lease it inherits (a server that claimed `has`
    /// once and then stopped does not keep its grant forever); from its
    /// next request on it claims the lease, and the algorithm rules.
    pub(super) fn inherited(
        &self,
        existing: Option<RequesterId>,
        who: &Who,
        ask: &ResourceAsk,
        now: Time,
    ) -> Option<f64> {
        match (existing, who, ask.claimed_has()) {
            (Some(id), Who::Server(_), None) => self
                .shares
                .get(id)
                .filter(|rec| now < rec.inherit_until())
                .map(|_| self.shares.has(id))
                .filter(|&h| h > 0.0),
            _ => None,
        }
    }

    /// For a downstream server asking without a claim (a newly elected
    /// master, or a new node) while this server is past learning mode and
    /// so knows every lease it has out: what it counts as taken by that
    /// node, the most its predecessors' sub-leases can still hold (they
    /// never outlive the grants they came from, and a shrunk node's are
    /// counted through `outstanding`), and until when (the end of the
    /// latest grant it counts them from: `now` if none).
    pub(super) fn predecessor_out(
        &self,
        existing: Option<RequesterId>,
        who: &Who,
        ask: &ResourceAsk,
        (learning, now): (bool, Time),
    ) -> Option<(f64, Time)> {
        if learning || ask.claim.is_some() || !matches!(who, Who::Server(_)) {
            return None;
        }
        let Some(id) = existing else {
            return Some((0.0, now));
        };
        let until = self.shares.get(id).map_or(now, Record::forget_at);
        Some((self.shares.taken(id), until.max(now)))
    }

    /// While learning, the lease a requester claims when this master first
    /// answers it counts towards `UpstreamState::learning_bound`: the
    /// answer replaces that lease with this master's grant. A claim left
    /// unanswered (`Decision::Pending`: no lease from the parent and no
    /// local template) is still held and counts only once answered.
    pub(super) fn count_first_claim(&mut self, id: RequesterId, ask: &ResourceAsk, now: Time) {
        let answered = |u: &&mut super::upstream::UpstreamState| {
            u.valid_lease(now).is_some() || u.local.is_some()
        };
        let Some(u) = self.upstream.as_mut().filter(answered) else {
            return;
        };
        if let Some(rec) = self.shares.get_mut(id) {
            if !std::mem::replace(&mut rec.claim_counted, true) {
                u.note_first_claim(ask.claimed_has());
            }
        }
    }

    /// Learning before the parent's first answer: the capacity is not known
    /// yet, so claims are honoured only within the local template's
    /// capacity (the most this server may ever hand out), their sum
    /// included; without a local template a claim is not honoured at all
    /// (see [`Decision::Pending`]). The echoed lease ends with learning.
    pub(super) fn decide_pending(&mut self, id: RequesterId, claimed: Amount) -> (f64, Decision) {
        let bound = self.upstream.as_ref().and_then(|u| u.local.as_ref());
        match bound.map(|t| t.capacity) {
            Some(b) => (self.shares.echo_within(id, claimed, b), Decision::Learning),
            None => {
                self.shares.set_has(id, Amount::ZERO);
                let d = if claimed.get() > 0.0 {
                    Decision::Pending
                } else {
                    Decision::Learning
                };
                (0.0, d)
            }
        }
    }

    /// A new master keeps at least its inherited lease (see
    /// [`Resource::inherited`]), within what the others leave free.
    pub(super) fn inherit(
        &mut self,
        id: RequesterId,
        capacity: f64,
        inherited: Option<f64>,
    ) -> f64 {
        match inherited {
            Some(h) if h > capacity => {
                let kept = Amount::new("has", h).unwrap_or(Amount::ZERO);
                // min(h, free) ≥ the decision, which was capped by free too.
                self.shares.decide_learning_within(id, kept).max(capacity)
            }
            _ => capacity,
        }
    }
}
