//! Capacity-sharing algorithms for Doorman.
//!
//! The pure heart of the system: given a resource's capacity and the demands
//! of its requesters (end clients and downstream servers, in priority bands,
//! weighted by subclients), decide what each requester gets. No tokio, no
//! I/O, no clock: times are arguments (`doorman_lease::Time`).
//!
//! * [`Shares`] holds one resource's demands and grants and makes decisions.
//! * [`Kind`] selects the rule: NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE,
//!   FAIR_SHARE. Learning mode is [`Shares::decide_learning`].
//! * Its inputs and outputs (`Amount`, `Demand`, `Lease`, `Time`) are
//!   `doorman_lease`'s.
//!
//! The exact semantics, worked examples and costs are in
//! `docs/algorithms.md`.
//!
//! Must not: depend on anything but `doorman-lease` and `thiserror`; no
//! runtime, no I/O, no clock.

mod kind;
mod shares;
mod sumtree;
mod tree;

pub use kind::{Kind, UnknownKind};
pub use shares::{BandSummary, RequesterId, Shares, Totals};
