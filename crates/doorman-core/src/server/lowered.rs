//! A lowered grant counts at its old amount until its holder shows it got
//! the lower one or the old lease ends (Chubby's rule: a lease is a
//! promise until it ends). An answer that lowers an end client's grant may
//! be lost (one-way loss, a client cut off just after its request
//! arrived); the client then uses the higher lease it holds to that
//! lease's end, and a server that handed the difference to others at once
//! would have more out than its capacity.
//!
//! So before an end client's request is decided, the lease it claims
//! (`has`: the latest answer it got) counts as taken beside its grant, no
//! more than this server counts it for already (a claim above that is a
//! lie, or a predecessor's lease that learning mode counts). A decision
//! that lowers it leaves the difference counted until the claimed lease
//! ends ([`Record::lowered_until`], a deadline of the expiry index) or a
//! later request claims less. The lowered client is told to come back at
//! the minimum request interval, so an answer that arrives frees the
//! difference within that interval and a round trip; a lost one frees it
//! at the old lease's end. A downstream server reports what it holds and
//! has handed out itself (`outstanding`: `decide.rs`).
//!
//! Must not: count more than this server already counts for a requester,
//! or touch a downstream server's `outstanding`.

use doorman_algorithms::{RequesterId, Shares};
use doorman_lease::{Lease, Span, Time};

use super::deadlines::refile;
use super::record::Record;
use super::request::ResourceAsk;
use super::resource::Resource;

/// A grant counts as lowered when it is below what its holder may hold by
/// more than this fraction (rounding lowers nobody).
const LOWERED_SLACK: f64 = 1e-9;

impl Resource {
    /// Before an end client's request is decided: the lease it claims
    /// (unless it says it has ended) counts as taken beside the coming
    /// grant, no more than this server counts for it, until that lease
    /// ends: `remaining` after now if the client said, and never past the
    /// lease it can be. A claim up to its latest grant is a lease granted
    /// before this request (all end by `held_until` as it is now); a claim
    /// above it is the higher lease of a grant lowered before, whose end
    /// was fixed then (`lowered_until`), so a client that keeps claiming
    /// it (its answers lost, or a liar) holds it no longer.
    pub(super) fn note_held(&mut self, id: RequesterId, ask: &ResourceAsk, now: Time) {
        let (has, taken) = (self.shares.has(id), self.shares.taken(id));
        let held = ask
            .claim
            .filter(|c| c.remaining.is_none_or(|r| r > Span::ZERO));
        let Some(rec) = self.shares.get_mut(id) else {
            return;
        };
        rec.lowered_until = held.map_or(Time::ZERO, |c| {
            let lease_end = if c.has.get().min(taken) <= has {
                rec.held_until
            } else {
                rec.lowered_until
            };
            match c.remaining {
                Some(_) => c.end(now).min(lease_end),
                None => lease_end,
            }
        });
        self.shares.set_outstanding(id, held.map(|c| c.has));
    }

    /// Whether the grant just decided for `id` lowered what it may hold.
    pub(super) fn is_lowered(&self, id: RequesterId) -> bool {
        is_lowered(&self.shares, id)
    }

    /// After an end client's grant is decided: unless it lowered what the
    /// client may hold, nothing beyond the grant stays counted.
    pub(super) fn settle_lowered(&mut self, id: RequesterId) {
        if self.is_lowered(id) {
            return;
        }
        self.shares.set_outstanding(id, None);
        if let Some(rec) = self.shares.get_mut(id) {
            rec.lowered_until = Time::ZERO;
        }
    }

    /// A repeat inside the minimum interval still tells what the client
    /// holds: a lowered client that got its answer frees the difference.
    pub(super) fn repeat_held(&mut self, id: RequesterId, ask: &ResourceAsk, now: Time) {
        self.note_held(id, ask, now);
        self.settle_lowered(id);
        if let Some(rec) = self.shares.get_mut(id) {
            let due = rec.due();
            refile(&mut self.expiries, &mut rec.expiry_key, id, due, now);
        }
    }
}

fn is_lowered(shares: &Shares<Record>, id: RequesterId) -> bool {
    let has = shares.has(id);
    shares.outstanding(id) > has + LOWERED_SLACK * has.max(1.0)
}

/// Brings `lease`'s holder back once the minimum request interval has
/// passed (rounded up to whole seconds, at least one), if that is sooner
/// than its refresh: a client whose grant was lowered, to show it got the
/// lower one; a repeat whose demand moved, to have it decided.
pub(super) fn back_after_interval(lease: &mut Lease, min_request_interval: Span) {
    let ms = min_request_interval.as_millis();
    let soon = ((ms + 999) / 1000).max(1);
    lease.refresh_interval = lease.refresh_interval.min(soon);
}
