//! A lease and what it is measured in, for every crate of Doorman: an
//! instant and a length of time ([`Time`], [`Span`]), a validated amount of
//! capacity and a requester's demand for it ([`Amount`], [`Demand`]), and a
//! [`Lease`] (an amount until an instant) with the rules of holding one:
//! how long a holder keeps it and a receiver counts it across clocks that
//! run at different rates ([`held_for`], [`counted_for`],
//! [`CLOCK_RATE_BOUND`]), and the terms a resource hands it out on
//! ([`LeaseTerms`], [`scaled_refresh_interval`]).
//!
//! Every crate imports these from here (none re-exports them).
//!
//! Must not: depend on anything but `thiserror`; no runtime, no I/O, no
//! clock (time is always an argument).

mod lease;
mod time;
mod value;

pub use lease::{
    counted_for, held_for, scaled_refresh_interval, Lease, LeaseTerms, WireLease, CLOCK_RATE_BOUND,
    DEFAULT_DECAY_FACTOR,
};
pub use time::{Span, Time};
pub use value::{Amount, Demand, InvalidValue};
