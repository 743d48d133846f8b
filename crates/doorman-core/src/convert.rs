//! The conversions between the core's two halves, written once for every
//! shell that hands a client core's request to a server core without a
//! wire in between (the server's Envoy front-ends, the simulator): a
//! client core's request item as the server core's ask ([`ask`]), a
//! server core's grant as the client core's answer item ([`answer_item`]),
//! and the one clamp of an amount on the way ([`amount`]).
//!
//! Must not: convert wire messages (`doorman-proto` and the gRPC shell
//! do, with validation), or decide anything.

use doorman_lease::{Amount, Demand, Time};

use crate::client::{GrantItem, RequestItem};
use crate::limits::MAX_AMOUNT;
use crate::server::{Claim, Grant, ResourceAsk};

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
    }
}
