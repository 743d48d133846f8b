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

use doorman_algorithms::RequesterId;
use doorman_lease::{scaled_refresh_interval, Demand, Span, Time};

use super::deadlines::{for_due, refile};
use super::record::{Record, LEGACY_REFRESH};
use super::resource::{Context, Resource};

impl Resource {
    /// The regular refresh interval this resource hands out, seconds.
    fn regular_interval(&self) -> i64 {
        let terms = self.template.algorithm.terms();
        scaled_refresh_interval(terms.refresh_interval, terms.decay_factor, self.level())
    }

    /// After a request was decided: the requester keeps a key in the
    /// absence index at or before its new deadline (`deadlines::refile`).
    pub(super) fn reindex_absent(&mut self, id: RequesterId, cx: &Context) {
        let regular = self.regular_interval();
        let Some(rec) = self.shares.get_mut(id) else {
            return;
        };
        let at = absent_deadline(rec, regular, cx.min_request_interval);
        refile(&mut self.absent, &mut rec.absent_at, id, at, cx.now);
    }

    /// Caps the demand of every requester absent at `now` at what it holds,
    /// in the order of their deadlines (`deadlines::for_due`: a requester
    /// that asked again since is re-filed at its new deadline). At most
    /// `KEYS_PER_CALL` keys per call (see [`Resource::expire`]).
    pub(super) fn mark_absent(&mut self, now: Time, min_request_interval: Span) {
        let regular = self.regular_interval();
        let deadline = |r: &Record| absent_deadline(r, regular, min_request_interval);
        let key_of: fn(&mut Record) -> &mut Time = |r| &mut r.absent_at;
        for_due(
            &mut self.absent,
            &mut self.shares,
            now,
            key_of,
            deadline,
            |shares, id| {
                let capped = capped_demands(&shares.demands(id), shares.has(id));
                shares.set_demands(id, &capped);
                if let Some(rec) = shares.get_mut(id) {
                    rec.absent_at = Time::ZERO;
                }
                None
            },
        );
    }
}

/// When the requester counts as absent if it has not asked again since
/// its last decided request. Its refresh is due one interval after that
/// request, and it gets as long again. The interval is the longer of the
/// one it was given and the resource's `regular` one (a waiting requester
/// told to come back sooner is not absent for coming back at its regular
/// time), and for an original Doorman client at least [`LEGACY_REFRESH`]
/// (it asks every 5 s whatever it is told: with a 1 s interval it counted
/// as absent between any two requests, its demand was capped at what it
/// held, and of two such clients one kept the whole capacity and the
/// other got 0 for good, measured with the fault harness), plus the
/// minimum request interval (a repeat inside it does not count as a
/// request).
fn absent_deadline(rec: &Record, regular: i64, min_request_interval: Span) -> Time {
    let mut interval = Span::secs(i64::from(rec.refresh_interval).max(regular));
    if rec.legacy {
        interval = interval.max(LEGACY_REFRESH);
    }
    rec.last_request + interval + interval + min_request_interval
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
