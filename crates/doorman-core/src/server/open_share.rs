//! How many clients a downstream server counts for: what it claims, up to
//! the template's `max_clients_per_server`, and on an open server (no
//! access rules vouch for who may serve) bounded by `open_server_share`.
//! Anyone may claim to be a downstream server there, with any client
//! count, and under as many server ids as it likes; so the bound holds
//! for every unvouched downstream server of a resource together:
//!
//! * together they take at most `share` of the resource from its end
//!   clients when everyone wants more than they get (`share / (1 −
//!   share)` times the end clients' count), split in proportion to their
//!   claims, and never beyond what the others leave of it: fake ids do not
//!   raise each other's bound round by round;
//! * each takes at most `share` from all the other requesters (a liar next
//!   to real downstream servers and no end clients);
//! * each counts at least one client per band, as any client id does;
//!   alone, a server takes nothing from anyone and its count stands.
//!
//! The bounded count is also what this server reports to its parent. The
//! running sums (`counts.rs`) keep each decision O(1) in the number of
//! requesters.
//!
//! Must not: bound end clients' demands, or a vouched server's beyond
//! `max_clients_per_server`.

use std::borrow::Cow;

use doorman_algorithms::RequesterId;
use doorman_lease::Demand;

use super::counts::counted;
use super::resource::Resource;

impl Resource {
    /// A downstream server's demands as they count: its claimed
    /// subclients bounded (module doc); records what it claims.
    pub(super) fn server_demands<'a>(
        &mut self,
        existing: Option<RequesterId>,
        demands: &'a [Demand],
        vouched: bool,
    ) -> (Cow<'a, [Demand]>, u32) {
        let max = self.template.max_clients_per_server;
        let raw: u64 = demands.iter().map(|d| u64::from(d.subclients())).sum();
        let claimed = raw.min(u64::from(max)) as u32;
        let bound = self.subclient_bound(existing, claimed, vouched);
        (bound_subclients(demands, bound), claimed)
    }

    /// After a downstream server's demands were recorded: the sums follow
    /// (`before`: what it claimed and counted for until now).
    pub(super) fn count_server(&mut self, id: RequesterId, claimed: u32, before: (u64, u64)) {
        let now = counted(&self.shares, id);
        self.servers.replace(before, (u64::from(claimed), now));
        if let Some(rec) = self.shares.get_mut(id) {
            rec.claimed = claimed;
        }
    }

    /// What requester `id` claims and counts for now (zeros if new).
    pub(super) fn server_before(&self, existing: Option<RequesterId>) -> (u64, u64) {
        existing.map_or((0, 0), |id| {
            let claimed = self.shares.get(id).map_or(0, |r| u64::from(r.claimed));
            (claimed, counted(&self.shares, id))
        })
    }

    /// The most subclients a downstream server claiming `claimed` may
    /// count for (module doc).
    fn subclient_bound(&self, existing: Option<RequesterId>, claimed: u32, vouched: bool) -> u32 {
        let max = self.template.max_clients_per_server;
        let share = self.template.open_server_share;
        if vouched || share >= 1.0 {
            return max;
        }
        let k = share / (1.0 - share);
        let (own_claimed, own) = self.server_before(existing);
        let total = self.shares.totals().subclients;
        let others = (total - own as f64).max(0.0);
        let mut bound = if others == 0.0 {
            f64::from(max)
        } else {
            (k * others).floor()
        };
        let (all_claimed, all_counted) = self.servers.sums();
        let clients = (total - all_counted as f64).max(0.0);
        if clients > 0.0 {
            let group = (k * clients).floor();
            let claims = (all_claimed - own_claimed.min(all_claimed)) as f64 + f64::from(claimed);
            let mine = (f64::from(claimed) * group / claims.max(1.0)).floor();
            let left = group - (all_counted - own.min(all_counted)) as f64;
            bound = bound.min(mine).min(left);
        }
        bound.min(f64::from(max)).max(1.0) as u32
    }
}

/// A downstream server's bands with at most `max` subclients in all: the
/// highest priorities keep theirs first, and each band keeps at least
/// one, so a server that claims more clients than it may weighs `max` (or
/// its band count, if larger) and no more.
pub(super) fn bound_subclients(demands: &[Demand], max: u32) -> Cow<'_, [Demand]> {
    let total: u64 = demands.iter().map(|d| u64::from(d.subclients())).sum();
    if total <= u64::from(max) {
        return Cow::Borrowed(demands);
    }
    let mut sorted = demands.to_vec();
    sorted.sort_by_key(|d| std::cmp::Reverse(d.priority()));
    let mut left = i64::from(max);
    let bounded = sorted
        .iter()
        .map(|d| {
            let n = i64::from(d.subclients()).min(left).max(1);
            left = (left - n).max(0);
            Demand::new(d.priority(), n, d.wants()).unwrap_or(*d)
        })
        .collect();
    Cow::Owned(bounded)
}
