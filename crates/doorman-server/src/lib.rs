//! The Doorman lease server: builds a running server from its options and
//! wires the boundaries, each a crate of its own (linkerd2-proxy style),
//! around `doorman-core`. The core decides; the boundaries do the I/O.
//!
//! * `doorman-grpc`: the `doorman.Capacity` service and the tower layers
//!   of the gRPC port (validation and wire conversions: `doorman-wire`).
//! * `doorman-envoy`: Envoy's RLS and RLQS on the same port.
//! * `doorman-http`: `/metrics`, the status pages, `/healthz`, `/readyz`.
//! * `doorman-transport`: listeners, TLS, identities, bearer tokens.
//! * `doorman-state`: what they share (the core behind its locks, the
//!   metrics, the clock) and the core as an election sees it.
//! * `doorman-election` and `doorman-etcd`: the master election and the
//!   etcd config store.
//!
//! Here:
//!
//! * [`server`]: wiring it all into a running server.
//! * [`config_source`]: the config from a file or an etcd key (through
//!   `doorman-etcd`), watched.
//! * [`upstream`]: an intermediate server's link to its parent.
//!
//! Dependencies point one way: these shells → `doorman-core` →
//! `doorman-algorithms`.
//!
//! Must not: decide grants, leases or learning mode (`doorman-core` does).

pub mod config_source;
mod grpc_port;
mod options;
pub mod server;
pub mod upstream;

pub use doorman_lease::{Span, Time};

/// The lease and wall clocks as [`Time`] (defined once, in
/// `doorman_net::clock`; the core never reads time).
pub use doorman_net::clock::{lease_clock, wall_clock};
