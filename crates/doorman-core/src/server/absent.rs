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

use super::resource::{Context, Resource};

impl Resource {
    /// After a request was decided: when the requester counts as absent if
    /// it has not asked again. Its refresh is due one interval after this
    /// request, and it gets as long again. The interval is the longer of
    /// the one it was given and this resource's regular one (a waiting
    /// requester told to come back sooner is not absent for coming back
    /// at its regular time), plus the minimum request interval (a repeat
    /// inside it does not count as a request).
    pub(super) fn reindex_absent(&mut self, id: RequesterId, cx: &Context) {
        let terms = self.template.algorithm.terms();
        let regular =
            scaled_refresh_interval(terms.refresh_interval, terms.decay_factor, self.level());
        let Some(rec) = self.shares.get_mut(id) else {
            return;
        };
        let interval = Time::secs(i64::from(rec.refresh_interval).max(regular));
        let at = rec.last_request + interval + interval + cx.min_request_interval;
        rec.absent_at = at;
        // Filed no later than the new deadline: left for `mark_absent` to
        // re-file when its key comes up (deadlines move on at every
        // request; a remove at a random place in the index is a cache
        // miss or more). Filed later, or not at all: filed now.
        match rec.absent_key {
            Some(key) if key <= at => {}
            key => {
                if let Some(key) = key {
                    self.absent.remove(&(key, id));
                }
                self.absent.insert((at, id));
                rec.absent_key = Some(at);
            }
        }
    }

    /// Caps the demand of every requester absent at `now` at what it holds,
    /// in the order of their deadlines. A key whose requester asked again
    /// since is re-filed at its new deadline (and comes up again in order
    /// if that has passed too); one whose record has gone (a new requester
    /// took its slot) is dropped. Cost: O(keys due · log n).
    pub(super) fn mark_absent(&mut self, now: Time) {
        while let Some(&(key, id)) = self.absent.first() {
            if key > now {
                break;
            }
            self.absent.pop_first();
            let Some(rec) = self
                .shares
                .get_mut(id)
                .filter(|r| r.absent_key == Some(key))
            else {
                continue;
            };
            if rec.absent_at > key {
                rec.absent_key = Some(rec.absent_at);
                self.absent.insert((rec.absent_at, id));
                continue;
            }
            rec.absent_key = None;
            let capped = capped_demands(&self.shares.demands(id), self.shares.has(id));
            self.shares.set_demands(id, &capped);
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
