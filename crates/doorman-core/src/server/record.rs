//! The lease record: what a server keeps per requester of a resource
//! besides its demand and grant (those live in `Shares`).
//!
//! Must not: hold demands or grants (`Shares` does).

use doorman_algorithms::{RequesterId, Shares};
use doorman_lease::{Amount, Span, Time};

use super::grants::Grants;
use super::request::Who;

/// What the server keeps per requester besides its demand and grant.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub who: Who,
    /// The end of the lease last granted.
    pub expiry: Time,
    /// The latest end of any lease granted to it (at least `expiry`): a
    /// later grant may end sooner (a reload shortened leases; an
    /// intermediate's own lease from its parent, measured from a slower
    /// answer, ends sooner), and if that answer is lost the requester
    /// holds the earlier lease to its end, so the record is not forgotten
    /// before it.
    pub held_until: Time,
    pub last_request: Time,
    pub refresh_interval: u32,
    /// The lease it claimed when first answered by this master in
    /// learning mode has been counted (`UpstreamState::learning_bound`).
    pub claim_counted: bool,
    /// Its last claim carried no remaining length: an original Doorman
    /// client, which refreshes at most every [`LEGACY_REFRESH`] whatever
    /// interval it is given (`absent.rs`).
    pub legacy: bool,
    /// What only a downstream server has, once it has been answered. Boxed:
    /// end clients, most of the leases, carry 8 bytes for it instead of 40.
    pub server: Option<Box<ServerPart>>,
    /// Its key in the resource's absence index, at or before the time it
    /// counts as absent if it does not ask again; `Time::ZERO` while it
    /// has none (`absent.rs`).
    pub absent_at: Time,
    /// Its key in the resource's expiry index, at or before
    /// [`Record::due`] (`Resource::expire`).
    pub expiry_key: Time,
    /// For an end client whose last grant lowered what it may hold: until
    /// when the higher lease it may still hold lasts, and with it the
    /// difference counted as taken (`lowered.rs`); `Time::ZERO` when
    /// nothing lowered is pending.
    pub lowered_until: Time,
    /// For a downstream server: the subclients it claims, up to
    /// `max_clients_per_server`, before the open-server bound
    /// (`open_share.rs`).
    pub claimed: u32,
}

/// The original Doorman client's slowest regular refresh: it never asks
/// more often than this (its `MinimumRefreshInterval`), however short the
/// refresh interval it is given.
pub(crate) const LEGACY_REFRESH: Span = Span::secs(5);

/// What a server keeps only for a downstream server.
#[derive(Debug, Clone)]
pub(crate) struct ServerPart {
    /// Until when a downstream server that stops claiming `has` may
    /// inherit its lease: the expiry of the lease granted to its last
    /// request that claimed one (`Time::ZERO`: never).
    pub inherit_until: Time,
    /// What it reports having handed out (extension); NaN when not
    /// reported.
    pub outstanding: f64,
    /// Its grants whose leases have not expired: it may still have
    /// sub-leases out of any of them, never of more than the largest.
    pub grants: Grants,
}

impl Default for ServerPart {
    fn default() -> Self {
        ServerPart {
            inherit_until: Time::ZERO,
            outstanding: f64::NAN,
            grants: Grants::default(),
        }
    }
}

impl Record {
    /// When the requester may be forgotten: the latest end of any lease
    /// granted to it (`held_until`), which for a downstream server is
    /// also the end of the longest grant it may still have sub-leases of.
    /// The expiry index is keyed by this.
    pub fn forget_at(&self) -> Time {
        self.held_until
    }

    /// When the expiry index must next look at it: when a lowered grant's
    /// higher predecessor ends (`lowered.rs`), or when it may be forgotten.
    pub fn due(&self) -> Time {
        if self.lowered_until > Time::ZERO {
            self.lowered_until.min(self.held_until)
        } else {
            self.held_until
        }
    }

    /// What a downstream server reported having handed out.
    pub fn outstanding(&self) -> Option<f64> {
        let out = self.server.as_ref().map_or(f64::NAN, |s| s.outstanding);
        (!out.is_nan()).then_some(out)
    }

    /// Until when a downstream server may inherit its lease
    /// ([`ServerPart::inherit_until`]; `Time::ZERO` for an end client).
    pub fn inherit_until(&self) -> Time {
        self.server.as_ref().map_or(Time::ZERO, |s| s.inherit_until)
    }

    /// The largest of a downstream server's grants unexpired at `now` (0
    /// for an end client).
    pub fn largest_unexpired(&mut self, now: Time) -> f64 {
        self.server
            .as_mut()
            .map_or(0.0, |s| s.grants.largest_unexpired(now))
    }
}

/// At a record's deadline in the expiry index: if the higher lease of a
/// lowered grant has ended before the record may be forgotten, it stops
/// counting, and the record's next deadline is returned; else `None`.
pub(super) fn lowered_ended(
    shares: &mut Shares<Record>,
    id: RequesterId,
    now: Time,
) -> Option<Time> {
    let rec = shares.get(id)?;
    let pending = rec.lowered_until > Time::ZERO && rec.lowered_until < rec.held_until;
    if !pending || rec.lowered_until > now {
        return None;
    }
    let next = rec.held_until;
    shares.set_outstanding(id, None::<Amount>);
    if let Some(rec) = shares.get_mut(id) {
        rec.lowered_until = Time::ZERO;
    }
    Some(next)
}
