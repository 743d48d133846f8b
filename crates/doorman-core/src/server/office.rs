//! Taking office: what a new master may conclude from the lease horizon
//! record it read (see `horizon.rs`), once, for every shell that elects:
//! `doorman-server`'s etcd election and the simulator.
//!
//! The record says how long its writer's leases may last from the read
//! (measured by the store that keeps it, not on a wall clock) and who
//! wrote it. A new master trusts it only if it is plausible (not more
//! than [`PLAUSIBLE_AHEAD`] beyond the horizon this master would write
//! now) and its writer is the last leader this master saw take office: a
//! leader that kept no record (an older version) may have served since.
//! Whatever it concludes, the horizon it writes never moves a plausible
//! record back.
//!
//! Must not: trust a record that is missing, unreadable, implausible or
//! written by anyone but the last leader seen.

use doorman_lease::{Span, Time};

use super::Predecessors;

/// Records more than this beyond a fresh one are taken for garbage.
pub const PLAUSIBLE_AHEAD: Span = Span::secs(3600);

/// A lease horizon record as a new master read it.
#[derive(Debug, Clone, PartialEq)]
pub enum HorizonRecord {
    /// No lease of its writer's outlives this long from the read (`None`:
    /// the record has ended, and so have they all).
    Within {
        /// What is left, by the store's word (rounded up).
        left: Option<Span>,
        /// Who wrote it (the writer's leader key).
        writer: Vec<u8>,
    },
    /// A record of an older version, or not a record.
    Unreadable,
}

/// What a new master concluded on taking office.
#[derive(Debug, Clone, PartialEq)]
pub struct Office {
    /// When its predecessors' leases end, if it can know.
    pub predecessors: Predecessors,
    /// The horizon to record before serving (its lease bound).
    pub bound: Time,
    /// Why, for the log.
    pub why: &'static str,
}

/// What a new master may conclude at `now` from `record` (`None`: there
/// is none yet), the last leader it saw take office, and `fresh`, the
/// horizon it would write now ([`super::Sharded::fresh_horizon`]).
pub fn take_office(
    record: Option<&HorizonRecord>,
    last_leader: Option<&[u8]>,
    fresh: Time,
    now: Time,
) -> Office {
    let unknown = |bound, why| Office {
        predecessors: Predecessors::Unknown,
        bound,
        why,
    };
    let (left, writer) = match record {
        None => return unknown(fresh, "no lease horizon record yet"),
        Some(HorizonRecord::Unreadable) => {
            let why = "the lease horizon record is in an older format or unreadable";
            return unknown(fresh, why);
        }
        Some(HorizonRecord::Within { left, writer }) => (left, writer),
    };
    // Ended: every lease of the writer's has (long ago, as far as the
    // learning clock's margin is concerned).
    let until = left.map_or(Time::ZERO, |l| now + l);
    if until > fresh + PLAUSIBLE_AHEAD {
        return unknown(fresh, "the lease horizon record is implausible");
    }
    let bound = fresh.max(until);
    if last_leader != Some(writer.as_slice()) {
        let why = "the lease horizon record was not written by the last leader seen";
        return unknown(bound, why);
    }
    Office {
        predecessors: Predecessors::LeasesEndBy(until),
        bound,
        why: "the lease horizon record",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(left: Option<i64>, writer: &[u8]) -> HorizonRecord {
        HorizonRecord::Within {
            left: left.map(Span::secs),
            writer: writer.to_vec(),
        }
    }

    fn office(
        r: Option<&HorizonRecord>,
        seen: Option<&[u8]>,
        fresh: Time,
        now: Time,
    ) -> (Predecessors, Time) {
        let o = take_office(r, seen, fresh, now);
        (o.predecessors, o.bound)
    }

    #[test]
    fn a_record_is_trusted_only_when_plausible_and_written_by_the_last_leader() {
        let now = Time::from_secs(1_800_000_000);
        let fresh = now + Span::secs(20);
        let me = Some(&b"/k/1"[..]);
        let r = within(Some(15), b"/k/1");
        let ends = Predecessors::LeasesEndBy(now + Span::secs(15));
        assert_eq!(office(Some(&r), me, fresh, now), (ends, fresh));
        // The record has ended: every lease of the writer's has.
        let r = within(None, b"/k/1");
        let ended = Predecessors::LeasesEndBy(Time::ZERO);
        assert_eq!(office(Some(&r), me, fresh, now).0, ended);
        // Another writer (an older master kept no record since), or none seen.
        for seen in [Some(&b"/k/2"[..]), None] {
            assert_eq!(office(Some(&r), seen, fresh, now).0, Predecessors::Unknown);
        }
        // Far in the future, an old format: not trusted.
        for r in [within(Some(7200), b"/k/1"), HorizonRecord::Unreadable] {
            assert_eq!(
                office(Some(&r), me, fresh, now),
                (Predecessors::Unknown, fresh)
            );
        }
        // A record beyond a fresh one is kept (it never moves back).
        let later = within(Some(80), b"/k/1");
        assert_eq!(office(Some(&later), me, fresh, now).1, now + Span::secs(80));
        assert_eq!(office(None, None, fresh, now).0, Predecessors::Unknown);
    }
}
