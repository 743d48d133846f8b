//! Capacity-sharing algorithms for Doorman.
//!
//! The pure heart of the system: given a resource's capacity and the demands
//! of its requesters (end clients and downstream servers, in priority bands,
//! weighted by subclients), decide what each requester gets. No tokio, no
//! I/O, no clock: times are arguments ([`Time`]).
//!
//! * [`Shares`] holds one resource's demands and grants and makes decisions.
//! * [`Kind`] selects the rule: NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE,
//!   FAIR_SHARE. Learning mode is [`Shares::decide_learning`].
//! * [`Amount`] and [`Demand`] are the validated inputs.
//! * [`LeaseTerms`] turns a grant into a [`Lease`].
//!
//! The exact semantics, worked examples and costs are in
//! `docs/algorithms.md`.
//!
//! Must not: depend on anything but `thiserror`; no runtime, no I/O, no clock.

mod kind;
mod lease;
mod shares;
mod sumtree;
mod time;
mod tree;
mod value;

pub use kind::{Kind, UnknownKind};
pub use lease::{
    counted_for, held_for, scaled_refresh_interval, Lease, LeaseTerms, CLOCK_RATE_BOUND,
    DEFAULT_DECAY_FACTOR,
};
pub use shares::{BandSummary, RequesterId, Shares, Totals};
pub use time::{Span, Time};
pub use value::{Amount, Demand, InvalidValue};
