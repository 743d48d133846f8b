//! What every boundary of a running lease server shares
//! ([`ServerState`]): the core in its shards behind their locks
//! ([`core_locks`]), the Prometheus [`metrics`] the boundaries record
//! into, the injected clock, the config that runs ([`config_version`]) and
//! the parent link's state ([`parent_link`]). The gRPC, Envoy and HTTP
//! crates are services over it; `doorman-server` builds it and wires them.
//!
//! Must not: decide anything (the core does) or do I/O.

pub mod config_version;
pub mod core_locks;
pub mod election;
pub mod metrics;
pub mod moved;
pub mod parent_link;
pub mod state;
pub mod subtree;

pub use state::{Clock, ServerState, Unready};
