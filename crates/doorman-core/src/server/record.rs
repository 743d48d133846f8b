//! The lease record: what a server keeps per requester of a resource
//! besides its demand and grant (those live in `Shares`).
//!
//! Must not: hold demands or grants (`Shares` does).

use doorman_algorithms::Time;

use super::grants::Grants;
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
    /// A downstream server's grants whose leases have not expired: it
    /// may still have sub-leases out of any of them, never of more than the
    /// largest (empty for end clients).
    pub grants: Grants,
    /// Its key in the resource's absence index, at or before the time it
    /// counts as absent if it does not ask again; `Time::ZERO` while it
    /// has none (`absent.rs`).
    pub absent_at: Time,
    /// Its key in the resource's expiry index, at or before
    /// [`Record::forget_at`] (`Resource::expire`).
    pub expiry_key: Time,
}

impl Record {
    /// When the requester may be forgotten: its lease's expiry, or for a
    /// downstream server the end of the longest grant it may still have
    /// sub-leases of (a reload may have shortened its latest lease). The
    /// expiry index is keyed by this.
    pub fn forget_at(&self) -> Time {
        self.grants
            .last_expiry()
            .map_or(self.expiry, |e| e.max(self.expiry))
    }
    /// What a downstream server reported having handed out.
    pub fn outstanding(&self) -> Option<f64> {
        (!self.outstanding.is_nan()).then_some(self.outstanding)
    }
}
