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
    /// Until when a downstream server that stops claiming `has` may
    /// inherit its lease: the expiry of the lease granted to its last
    /// request that claimed one (`Time::ZERO`: never).
    pub inherit_until: Time,
    /// What a downstream server reports having handed out (extension);
    /// NaN when not reported (keeps the record small).
    pub outstanding: f64,
}

impl Record {
    /// What a downstream server reported having handed out.
    pub fn outstanding(&self) -> Option<f64> {
        (!self.outstanding.is_nan()).then_some(self.outstanding)
    }
}
