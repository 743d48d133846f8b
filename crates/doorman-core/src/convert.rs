//! The conversions between the core's two halves, written once for every
//! shell that hands a client core's request to a server core without a
//! wire in between (the server's Envoy front-ends, the simulator): a
//! client core's request item as the server core's ask ([`ask`]), a
//! server core's grant as the client core's answer item ([`answer_item`],
//! or [`answer_received`] where a wire is modelled), and the one clamp of
//! an amount on the way ([`amount`]); and the one rule by which a
//! parent's grant reaches an intermediate ([`UpstreamAnswer`]: sent from
//! a grant, received as an upstream grant), which the gRPC shell and the
//! simulator both go through.
//!
//! Must not: build or validate wire messages (`doorman-proto` and the
//! gRPC shell do), or decide anything.

use doorman_lease::{counted_for, Amount, Demand, Span, Time, WireLease};

use crate::client::{GrantItem, RequestItem};
use crate::config::AlgorithmConfig;
use crate::limits::MAX_AMOUNT;
use crate::server::{Claim, Grant, ResourceAsk, UpstreamGrant};

/// A client core's figure as an amount: clamped to `0..=MAX_AMOUNT`,
/// anything not a number as zero.
///
/// ```
/// use doorman_core::convert::amount;
/// assert_eq!(amount(5.0).get(), 5.0);
/// assert_eq!(amount(-1.0).get(), 0.0);
/// assert_eq!(amount(f64::NAN).get(), 0.0);
/// assert_eq!(amount(f64::INFINITY).get(), doorman_core::limits::MAX_AMOUNT);
/// ```
pub fn amount(v: f64) -> Amount {
    Amount::new("wants", v.clamp(0.0, MAX_AMOUNT)).unwrap_or(Amount::ZERO)
}

/// The server core's ask for one item of a client core's request at `now`
/// (its claim says what it has left, as our client library's do).
pub fn ask(item: &RequestItem, now: Time) -> ResourceAsk {
    ResourceAsk {
        resource_id: item.resource_id.clone(),
        demands: vec![Demand::client(item.priority, amount(item.wants))],
        claim: item.has.map(|l| Claim::held(&l, amount(l.capacity), now)),
        outstanding: None,
    }
}

/// The client core's answer item for one grant of the server core (the
/// lease as decided; a shell that models a wire replaces it with the lease
/// as received).
pub fn answer_item(g: &Grant) -> GrantItem {
    GrantItem {
        resource_id: g.resource_id.clone(),
        lease: g.lease,
        safe_capacity: Some(g.safe_capacity),
        shadow: g.shadow,
    }
}

/// The client core's answer item for one grant, as our client library
/// keeps it after the wire, for the request it sent at `sent_at`
/// ([`doorman_lease::Lease::through_wire`]; an answer pushed on a lease stream: its
/// arrival).
pub fn answer_received(g: &Grant, sent_at: Time) -> GrantItem {
    GrantItem {
        lease: g.lease.through_wire(g.at, sent_at),
        ..answer_item(g)
    }
}

/// A parent's answer for one resource on its way to an intermediate (what
/// `ServerCapacityResourceResponse` carries, in the core's terms). The
/// parent's shell sends [`UpstreamAnswer::sent`]; the intermediate's
/// keeps [`UpstreamAnswer::received`]; the gRPC shell maps it to and from
/// the wire field by field, the simulator hands it over as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamAnswer {
    /// The resource.
    pub resource_id: String,
    /// The lease, as the wire carries it.
    pub lease: WireLease,
    /// The algorithm, once the parent knows it.
    pub algorithm: Option<AlgorithmConfig>,
    /// The parent's per-client safe capacity.
    pub safe_capacity: Option<f64>,
    /// Ask again after this many seconds (the grant's own).
    pub next_refresh_interval: Option<i64>,
    /// The grant's `predecessor_out`.
    pub predecessor_out: Option<f64>,
    /// How long that still holds when sent.
    pub predecessor_left: Option<Span>,
    /// The resource is in shadow mode.
    pub shadow: bool,
}

impl UpstreamAnswer {
    /// What the parent sends for grant `g`, decided at `g.at`.
    pub fn sent(g: &Grant) -> UpstreamAnswer {
        UpstreamAnswer {
            resource_id: g.resource_id.clone(),
            lease: WireLease::sent(&g.lease, g.at),
            algorithm: g.algorithm_known.then(|| (*g.algorithm).clone()),
            safe_capacity: Some(g.safe_capacity),
            next_refresh_interval: g.next_refresh_interval,
            predecessor_out: g.predecessor_out,
            predecessor_left: g.predecessor_until.map(|u| (u - g.at).max(Span::ZERO)),
            shadow: g.shadow,
        }
    }

    /// The upstream grant the intermediate keeps, for the request it sent
    /// at `sent_at` and answered at `received_at` (its clock): the lease
    /// counts from when the request left (it ends no later than the parent
    /// counts it, [`WireLease::received`]); the predecessors' word, a bound on
    /// what may still be out, from when the answer came
    /// ([`counted_for`]). A pushed answer has both at its arrival. Figures
    /// a parent may not send are dropped (a refresh under a second, an
    /// outstanding amount not a finite non-negative number).
    pub fn received(self, (sent_at, received_at): (Time, Time)) -> UpstreamGrant {
        UpstreamGrant {
            resource_id: self.resource_id,
            lease: self.lease.received(sent_at),
            algorithm: self.algorithm,
            safe_capacity: self.safe_capacity,
            next_refresh_interval: self.next_refresh_interval.filter(|s| *s >= 1),
            predecessor_out: self.predecessor_out.filter(|p| p.is_finite() && *p >= 0.0),
            predecessor_until: self
                .predecessor_left
                .map(|left| received_at + counted_for(left)),
            shadow: self.shadow,
        }
    }
}
