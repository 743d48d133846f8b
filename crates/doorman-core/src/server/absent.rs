//! Absent requesters: one that has not come back a whole refresh interval
//! (its regular one at least) after its refresh was due (cut off, crashed, or its master lost) counts
//! as wanting no more than it holds, until it asks again. Its lease stays
//! counted as taken, so no capacity is handed out twice; only its demand
//! stops raising the others' targets above what they can get, and this
//! server's demand upstream above what its requesters can take (issue 17:
//! a region that kept asking its parent for a cut-off datacenter's wants
//! held capacity that none of its present requesters could take).
//!
//! Must not: touch a requester's grant or expiry.

use doorman_algorithms::{scaled_refresh_interval, Demand, RequesterId, Time};

use super::record::Record;
use super::resource::{take_due, Context, Resource, KEYS_PER_CALL};

impl Resource {
    /// When the requester counts as absent if it has not asked again since
    /// its last decided request. Its refresh is due one interval after that
    /// request, and it gets as long again. The interval is the longer of
    /// the one it was given and this resource's regular one (a waiting
    /// requester told to come back sooner is not absent for coming back
    /// at its regular time), plus the minimum request interval (a repeat
    /// inside it does not count as a request).
    fn absent_deadline(&self, rec: &Record, min_request_interval: Time) -> Time {
        let terms = self.template.algorithm.terms();
        let regular =
            scaled_refresh_interval(terms.refresh_interval, terms.decay_factor, self.level());
        let interval = Time::secs(i64::from(rec.refresh_interval).max(regular));
        rec.last_request + interval + interval + min_request_interval
    }

    /// After a request was decided: the requester has a key in the absence
    /// index at or before its new deadline. A key it has that is not yet
    /// due is left where it was when that holds (deadlines move on at every
    /// request, and a remove at a random place in the index is a cache
    /// miss or more); `mark_absent` re-files it when it comes up.
    pub(super) fn reindex_absent(&mut self, id: RequesterId, cx: &Context) {
        let Some(rec) = self.shares.get(id) else {
            return;
        };
        let at = self.absent_deadline(rec, cx.min_request_interval);
        let key = rec.absent_at;
        // A key that is due (in learning mode nothing re-files keys) is
        // re-filed here, so that they do not all come up when it ends.
        if key != Time::ZERO && key <= at && key > cx.now {
            return;
        }
        if key != Time::ZERO {
            self.absent.remove(&(key, id));
        }
        self.absent.insert((at, id));
        if let Some(rec) = self.shares.get_mut(id) {
            rec.absent_at = at;
        }
    }

    /// Caps the demand of every requester absent at `now` at what it holds,
    /// in the order of their deadlines. A key whose requester asked again
    /// since is re-filed at its new deadline (and comes up again in order
    /// if that has passed too); one that is not its record's (a new
    /// requester took the slot) is dropped. At most [`KEYS_PER_CALL`] keys
    /// per call (see [`Resource::expire`]).
    pub(super) fn mark_absent(&mut self, now: Time, min_request_interval: Time) {
        for _ in 0..KEYS_PER_CALL {
            let Some((key, id)) = take_due(&mut self.absent, now) else {
                break;
            };
            let Some(rec) = self.shares.get(id).filter(|r| r.absent_at == key) else {
                continue;
            };
            let at = self.absent_deadline(rec, min_request_interval);
            let rec_key = if at > key {
                self.absent.insert((at, id));
                at
            } else {
                let capped = capped_demands(&self.shares.demands(id), self.shares.has(id));
                self.shares.set_demands(id, &capped);
                Time::ZERO
            };
            if let Some(rec) = self.shares.get_mut(id) {
                rec.absent_at = rec_key;
            }
        }
    }
}

/// `demands` (highest band first, as (priority, subclients, wants)) with
/// Σ wants cut to `most`, from the lowest band up.
fn capped_demands(demands: &[(i64, f64, f64)], most: f64) -> Vec<Demand> {
    let mut left = most.max(0.0);
    demands
        .iter()
        .filter_map(|&(priority, subclients, wants)| {
            let w = wants.min(left);
            left -= w;
            Demand::new(priority, subclients as i64, w).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::capped_demands;

    #[test]
    fn demands_are_cut_from_the_lowest_band_up() {
        let capped = capped_demands(&[(2, 3.0, 10.0), (1, 1.0, 8.0)], 12.0);
        let got: Vec<_> = capped
            .iter()
            .map(|d| (d.priority(), d.subclients(), d.wants()))
            .collect();
        assert_eq!(got, vec![(2, 3, 10.0), (1, 1, 2.0)]);
    }
}
