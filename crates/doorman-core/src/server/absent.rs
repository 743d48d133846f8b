//! Absent requesters: one that has not come back a whole refresh interval
//! after its refresh was due (cut off, crashed, or its master lost) counts
//! as wanting no more than it holds, until it asks again. Its lease stays
//! counted as taken, so no capacity is handed out twice; only its demand
//! stops raising the others' targets above what they can get, and this
//! server's demand upstream above what its requesters can take (issue 17:
//! a region that kept asking its parent for a cut-off datacenter's wants
//! held capacity that none of its present requesters could take).
//!
//! Must not: touch a requester's grant or expiry.

use doorman_algorithms::{Demand, RequesterId, Time};

use super::record::Record;
use super::resource::Resource;

impl Record {
    /// When the requester counts as absent if it has not asked again: its
    /// refresh is due `refresh_interval` after its last request, and it
    /// gets as long again (a new record, never answered, has none).
    pub fn absent_at(&self) -> Time {
        let interval = Time::secs(i64::from(self.refresh_interval));
        self.last_request + interval + interval
    }
}

impl Resource {
    /// Moves a requester's entry in the absence index after its record
    /// changed (`was` is its `absent_at` before the change).
    pub(super) fn reindex_absent(&mut self, id: RequesterId, was: Time) {
        let Some(rec) = self.shares.get(id) else {
            return;
        };
        let now_at = rec.absent_at();
        if now_at != was {
            self.absent.remove(&(was, id));
        }
        if rec.refresh_interval > 0 {
            self.absent.insert((now_at, id));
        }
    }

    /// Caps the demand of every requester absent at `now` at what it holds.
    /// An entry whose record has moved on (it asked again, or a new
    /// requester took its slot) is dropped. Cost: O(absent · log n).
    pub(super) fn mark_absent(&mut self, now: Time) {
        while let Some(&(at, id)) = self.absent.first() {
            if at > now {
                break;
            }
            self.absent.pop_first();
            if self.shares.get(id).is_some_and(|r| r.absent_at() == at) {
                let capped = capped_demands(&self.shares.demands(id), self.shares.has(id));
                self.shares.set_demands(id, &capped);
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
