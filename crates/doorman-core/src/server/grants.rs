//! A queue of the grants one side of a link still has live: kept by a
//! server per downstream server (what that one may have handed out) and by
//! an intermediate server for its own grants from its parent (what its
//! sub-leases may be backed by).
//!
//! Must not: read a clock (callers pass `now`).

use doorman_lease::Time;

/// Most entries kept; past it the two oldest merge into one that is at
/// least as large and lasts at least as long ([`Grants::note`]), or the
/// largest, soonest to end, goes ([`Grants::note_own`]).
const GRANTS_KEPT: usize = 8;

/// Grants whose leases have not expired, as (capacity, expiry) with
/// capacities falling. Expiries rise too, except after [`Grants::note`]
/// of a smaller grant that ends sooner (a reload shortened leases), so
/// the latest expiry is looked for over all of them. Every entry is at
/// least one real grant, for at least as long ([`Grants::note`]) or a
/// real grant exactly ([`Grants::note_own`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants(Vec<(f64, Time)>);

impl Grants {
    /// `capacity` was granted until `expiry`. An entry no larger than it is
    /// replaced, keeping the later of the two expiries (a reload may
    /// shorten leases: what was handed out of the earlier grant still lasts
    /// as long as it did); past `GRANTS_KEPT` the two oldest merge into the
    /// larger capacity until the later expiry.
    pub fn note(&mut self, capacity: f64, expiry: Time) {
        let mut until = expiry;
        while let Some(&(c, e)) = self.0.last() {
            if c > capacity {
                break;
            }
            until = until.max(e);
            self.0.pop();
        }
        self.0.push((capacity, until));
        if self.0.len() > GRANTS_KEPT {
            let (_, later) = self.0.remove(1);
            self.0[0].1 = self.0[0].1.max(later);
        }
    }

    /// This server itself was granted `capacity` until `expiry` by its
    /// parent. Kept exact or smaller, never larger: entries it makes
    /// redundant (no larger and no longer) go, it is not kept if one makes
    /// it redundant, and past `GRANTS_KEPT` the largest (the soonest to
    /// end) goes. So every
    /// entry is a real grant for as long as it says.
    pub fn note_own(&mut self, capacity: f64, expiry: Time) {
        let v = &mut self.0;
        if v.iter().any(|&(c, e)| c >= capacity && e >= expiry) {
            return;
        }
        v.retain(|&(c, e)| !(c <= capacity && e <= expiry));
        let at = v.iter().take_while(|g| g.0 > capacity).count();
        v.insert(at, (capacity, expiry));
        if v.len() > GRANTS_KEPT {
            v.remove(0);
        }
    }

    /// Drops the grants expired at `now`.
    fn drop_expired(&mut self, now: Time) {
        let expired = self.0.iter().take_while(|g| g.1 <= now).count();
        self.0.drain(..expired);
    }

    /// The largest grant whose lease has not expired at `now` (0 if none).
    pub fn largest_unexpired(&mut self, now: Time) -> f64 {
        self.drop_expired(now);
        self.0.first().map_or(0.0, |g| g.0)
    }

    /// Until when some unexpired grant of at least `amount` lasts: the
    /// latest expiry among them, `None` if there is none.
    pub fn covering(&mut self, amount: f64, now: Time) -> Option<Time> {
        self.drop_expired(now);
        self.0
            .iter()
            .take_while(|g| g.0 >= amount)
            .map(|g| g.1)
            .filter(|&e| e > now)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::Grants;
    use doorman_lease::Time;

    #[test]
    fn the_latest_grant_at_least_as_large_covers() {
        let mut g = Grants::default();
        g.note(176.0, Time::from_secs(990));
        g.note(173.0, Time::from_secs(1021));
        g.note(170.0, Time::from_secs(1048));
        let now = Time::from_secs(980);
        assert_eq!(g.covering(172.0, now), Some(Time::from_secs(1021)));
        assert_eq!(g.covering(170.0, now), Some(Time::from_secs(1048)));
        assert_eq!(g.covering(177.0, now), None);
        // Once the 176 has expired, nothing covers 175.
        assert_eq!(g.covering(175.0, Time::from_secs(995)), None);
        assert_eq!(g.largest_unexpired(Time::from_secs(995)), 173.0);
    }

    /// Found in review: a smaller grant that ends sooner (a reload
    /// shortened leases) is queued after the larger one; the larger one's
    /// end still covers (that its holder is not forgotten before it is
    /// `Record::held_until`'s: tests/expiry.rs).
    #[test]
    fn the_latest_expiry_covers_after_a_shorter_smaller_grant() {
        let mut g = Grants::default();
        g.note(100.0, Time::from_secs(100));
        g.note(50.0, Time::from_secs(50));
        assert_eq!(g.covering(50.0, Time::ZERO), Some(Time::from_secs(100)));
    }

    #[test]
    fn own_grants_never_claim_more_than_was_granted() {
        let mut g = Grants::default();
        g.note_own(100.0, Time::from_secs(50));
        // A larger grant that ends sooner (a reload shortened it) does not
        // make the 100 last less, nor itself last longer.
        g.note_own(120.0, Time::from_secs(40));
        assert_eq!(g.covering(110.0, Time::ZERO), Some(Time::from_secs(40)));
        assert_eq!(g.covering(100.0, Time::ZERO), Some(Time::from_secs(50)));
        for i in 0..20 {
            g.note_own(90.0 - f64::from(i), Time::from_secs(60 + i64::from(i)));
        }
        // The oldest went first: nothing above 90 is claimed any more.
        assert_eq!(g.covering(95.0, Time::ZERO), None);
        assert_eq!(g.covering(71.0, Time::ZERO), Some(Time::from_secs(79)));
    }
}
