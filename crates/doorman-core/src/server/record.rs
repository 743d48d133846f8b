//! The lease record: what a server keeps per requester of a resource
//! besides its demand and grant (those live in `Shares`).
//!
//! Must not: hold demands or grants (`Shares` does).

use doorman_algorithms::Time;

use super::request::Who;

/// What the server keeps per requester besides its demand and grant.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub who: Who,
    pub expiry: Time,
    pub last_request: Time,
    pub refresh_interval: u32,
    /// The lease it claimed when first answered by this master in
    /// learning mode has been counted (`UpstreamState::learning_bound`).
    pub claim_counted: bool,
    /// Until when a downstream server that stops claiming `has` may
    /// inherit its lease: the expiry of the lease granted to its last
    /// request that claimed one (`Time::ZERO`: never).
    pub inherit_until: Time,
    /// What a downstream server reports having handed out (extension);
    /// NaN when not reported (keeps the record small).
    pub outstanding: f64,
    /// A downstream server's grants whose leases have not expired, as a
    /// queue of (capacity, expiry) with capacities falling and expiries
    /// rising: it may still have sub-leases out of any of them, never of
    /// more than the largest (empty for end clients).
    pub grants: Vec<(f64, Time)>,
}

/// Most entries of `Record::grants`; past it the two oldest merge into one
/// that is at least as large and lasts at least as long.
const GRANTS_KEPT: usize = 8;

impl Record {
    /// A downstream server was granted `capacity` until `expiry`. An entry
    /// no larger than it is replaced, keeping the later of the two
    /// expiries (a reload may shorten leases: the sub-leases of the earlier
    /// grant still last as long as it did); past `GRANTS_KEPT` the two
    /// oldest merge into the larger capacity until the later expiry. Every
    /// entry is thus at least one real grant, for at least as long.
    pub fn note_grant(&mut self, capacity: f64, expiry: Time) {
        let mut until = expiry;
        while let Some(&(c, e)) = self.grants.last() {
            if c > capacity {
                break;
            }
            until = until.max(e);
            self.grants.pop();
        }
        self.grants.push((capacity, until));
        if self.grants.len() > GRANTS_KEPT {
            let (_, later) = self.grants.remove(1);
            self.grants[0].1 = self.grants[0].1.max(later);
        }
    }

    /// The most a downstream server can have handed out at `now`: the
    /// largest of its grants whose lease has not expired.
    pub fn largest_unexpired(&mut self, now: Time) -> f64 {
        let expired = self.grants.iter().take_while(|g| g.1 <= now).count();
        self.grants.drain(..expired);
        self.grants.first().map_or(0.0, |g| g.0)
    }

    /// When the requester may be forgotten: its lease's expiry, or for a
    /// downstream server the end of the longest grant it may still have
    /// sub-leases of (a reload may have shortened its latest lease). The
    /// expiry index is keyed by this.
    pub fn forget_at(&self) -> Time {
        self.grants.iter().map(|g| g.1).fold(self.expiry, Time::max)
    }
    /// What a downstream server reported having handed out.
    pub fn outstanding(&self) -> Option<f64> {
        (!self.outstanding.is_nan()).then_some(self.outstanding)
    }
}
