//! The lease horizon: how long a new master stays in learning mode, and the
//! bound a master keeps on the expiry of every lease it hands out.
//!
//! Learning mode exists because a new master does not know which leases
//! its predecessors handed out. The design doc makes it last a lease
//! length; but if the node's masters keep a record of "no lease of mine
//! expires after H" (an etcd key written before any lease beyond it is
//! handed out, `doorman-server` `election/etcd.rs`), a new master needs to
//! learn only until the latest such H: after a master that was gone longer
//! than a lease, or at the very first start of a node (no record: nothing
//! was ever handed out), it serves at once.
//!
//! Rules:
//! * [`Predecessors::Unknown`] (a standalone server, or no readable
//!   record): learning lasts each resource's `learning_mode_duration`;
//! * [`Predecessors::LeasesEndBy`]`(h)`: learning ends at `h` (plus
//!   [`HORIZON_CLOCK_MARGIN`] for clocks) or after `learning_mode_duration`,
//!   whichever comes first;
//! * with a lease bound (the record this master keeps), no lease outlives
//!   it; [`Node::horizon_due`] says when to move the record on, well
//!   before any lease would be cut short by it. A root's leases reach at
//!   most its longest `lease_length` ahead; an intermediate's never outlive
//!   its parent's, so its record follows its latest upstream expiry too:
//!   when the parent stops answering, the record stops moving, and a
//!   successor learns only until the subtree's leases have run out.
//!
//! Must not: move a learning end later than `learning_mode_duration`, or
//! let a lease outlive the recorded bound.

use doorman_lease::{Span, Time};

use super::upstream::PENDING_LEARNING;
use super::{Node, ResourceShard, Role};

/// A root moves its bound on when it is less than this beyond the longest
/// lease it may hand out now.
pub const HORIZON_RENEW_BEFORE: Span = Span::secs(5);

/// How far beyond the longest lease a root puts a new bound (so it writes
/// a record about every `HORIZON_AHEAD − HORIZON_RENEW_BEFORE`).
pub const HORIZON_AHEAD: Span = Span::secs(10);

/// An intermediate's leases never outlive its parent's, which it renews
/// every refresh interval: its record follows its latest upstream expiry
/// this closely (written about every renewal), so a successor learns only
/// until its predecessor's leases have really ended. With a root's lead a
/// successor learned for the whole learning period after every failover
/// of an intermediate (the record was always 10 s ahead of a lease of
/// 10 s): its clients, whose leases had ended with the hung master's,
/// got 0 for 10 s (measured with the fault harness).
pub const INTERMEDIATE_LEAD: HorizonLead = HorizonLead {
    ahead: Span::secs(2),
    renew_before: Span::secs(1),
};

/// How far ahead of what its leases need a master records its horizon,
/// and how close the record may come before it is moved on (and, if it
/// cannot be, the master steps down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HorizonLead {
    /// A new bound is put this far beyond what is needed.
    pub ahead: Span,
    /// The bound is moved on when it is less than this beyond it.
    pub renew_before: Span,
}

/// A root's lead.
pub const ROOT_LEAD: HorizonLead = HorizonLead {
    ahead: HORIZON_AHEAD,
    renew_before: HORIZON_RENEW_BEFORE,
};

/// A new master trusting a record ends learning this much after the
/// recorded time (the record is an etcd lease's remaining TTL, already
/// rounded up by the shell; this covers the hosts' clock rates).
pub const HORIZON_CLOCK_MARGIN: Span = Span::secs(1);

/// What a new master knows about the leases handed out before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Predecessors {
    /// Nothing: learning mode lasts each resource's full
    /// `learning_mode_duration`.
    #[default]
    Unknown,
    /// No lease a previous master handed out is valid after this instant
    /// (`Time::ZERO` when none was ever handed out).
    LeasesEndBy(Time),
}

/// When a resource's learning mode ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LearningClock {
    /// When this server became master.
    pub since: Time,
    /// What it knows about its predecessors.
    pub predecessors: Predecessors,
}

impl LearningClock {
    /// The end of learning for a resource learning for `duration`.
    pub fn end(self, duration: Span) -> Time {
        let full = self.since + duration;
        match self.predecessors {
            Predecessors::Unknown => full,
            Predecessors::LeasesEndBy(h) => full.min((h + HORIZON_CLOCK_MARGIN).max(self.since)),
        }
    }
}

/// What an intermediate's shards have seen of their parent, folded over
/// every shard: the horizon depends on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpstreamReach {
    /// The longest `lease_length` a parent has sent, seconds.
    pub longest_parent_lease: i64,
    /// The latest expiry of a lease from the parent, or end of a claim
    /// echoed without one (an intermediate in learning mode).
    pub backed: Time,
}

impl UpstreamReach {
    /// The reach of two shards together.
    pub fn max(self, other: UpstreamReach) -> UpstreamReach {
        UpstreamReach {
            longest_parent_lease: self.longest_parent_lease.max(other.longest_parent_lease),
            backed: self.backed.max(other.backed),
        }
    }
}

impl Node {
    /// The horizon to record now, if the recorded one (the lease bound) is
    /// getting close to what the longest lease could reach: the shell
    /// writes it, then calls [`Node::set_lease_bound`] with it. `None`
    /// without a bound, when not master, or while the bound is far enough.
    /// `reach`: what the shards have seen of the parent.
    pub fn horizon_due(&self, now: Time, reach: UpstreamReach) -> Option<Time> {
        let bound = self.lease_bound?;
        if !self.is_master {
            return None;
        }
        let mut needed = now + self.longest_lease(reach);
        if self.opts.role == Role::Intermediate {
            needed = needed.min(reach.backed);
        }
        let lead = self.horizon_lead();
        (bound < needed + lead.renew_before).then(|| needed + lead.ahead)
    }

    /// This master's lead on its horizon: [`ROOT_LEAD`] or
    /// [`INTERMEDIATE_LEAD`].
    pub fn horizon_lead(&self) -> HorizonLead {
        match self.opts.role {
            Role::Root => ROOT_LEAD,
            Role::Intermediate => INTERMEDIATE_LEAD,
        }
    }

    /// The horizon a master records when it takes office (before its first
    /// grant): beyond any lease it may hand out before its first
    /// [`Node::horizon_due`] check. A root's leases reach its longest
    /// lease ahead; an intermediate's never outlive its parent's, and it
    /// holds none yet, so it records [`HORIZON_AHEAD`] and moves the
    /// record on as the parent's leases (and the claims it echoes) need.
    /// The shell records the later of this and the predecessors' record (a
    /// record never moves back).
    pub fn fresh_horizon(&self, now: Time, reach: UpstreamReach) -> Time {
        match self.opts.role {
            Role::Root => now + self.longest_lease(reach) + ROOT_LEAD.ahead,
            Role::Intermediate => now + INTERMEDIATE_LEAD.ahead,
        }
    }

    /// The longest lease this server may hand out: its config's longest;
    /// on an intermediate server also its parent's longest seen so far and
    /// the pending default (before the parent's first answer).
    fn longest_lease(&self, reach: UpstreamReach) -> Span {
        let mut secs = self.config.longest_lease();
        if self.opts.role == Role::Intermediate {
            secs = secs
                .max(reach.longest_parent_lease)
                .max(PENDING_LEARNING.whole_secs());
        }
        Span::secs(secs)
    }
}

impl ResourceShard {
    /// An intermediate echoed, in learning mode, a claim that ends at
    /// `end`: the horizon may have to cover it (see
    /// `Resource::lease_cap`).
    pub(crate) fn note_echo(&mut self, end: Time) {
        self.latest_echo_end = self.latest_echo_end.max(end);
    }

    /// What this shard has seen of the parent.
    pub fn upstream_reach(&self) -> UpstreamReach {
        UpstreamReach {
            longest_parent_lease: self.longest_parent_lease,
            backed: self.latest_upstream_expiry.max(self.latest_echo_end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_ends_with_the_predecessors_leases_or_its_duration() {
        let since = Time::from_secs(1000);
        let end = |p| {
            LearningClock {
                since,
                predecessors: p,
            }
            .end(Span::secs(90))
        };
        assert_eq!(end(Predecessors::Unknown), Time::from_secs(1090));
        // Every lease ended long ago: no learning at all.
        assert_eq!(end(Predecessors::LeasesEndBy(Time::ZERO)), since);
        // The last lease ends 20 s after the new master starts; learning
        // ends the clock margin later.
        assert_eq!(
            end(Predecessors::LeasesEndBy(Time::from_secs(1020))),
            Time::from_secs(1021)
        );
        // A record further out than the duration does not lengthen learning.
        assert_eq!(
            end(Predecessors::LeasesEndBy(Time::from_secs(5000))),
            Time::from_secs(1090)
        );
    }
}
