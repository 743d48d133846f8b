//! The Doorman lease server: the shell around `doorman-core`, one module
//! per boundary. The core decides; these modules do the I/O.
//!
//! * [`grpc`]: the tonic `doorman.Capacity` service, request validation and
//!   the wire conversions.
//! * [`http`]: `/metrics`, `/debug/status`, `/api/v1/status`, `/healthz`.
//! * [`metrics`]: the Prometheus registry the boundaries record into.
//! * [`election`]: the core as an election sees it (`doorman-election`'s
//!   `Mastership`), and `follow`, which applies what the election
//!   publishes; the elections themselves are in `doorman-election`
//!   (standalone) and `doorman-etcd`.
//! * [`config_source`]: the config from a file or an etcd key (through
//!   `doorman-etcd`), watched.
//! * [`upstream`]: an intermediate server's link to its parent.
//! * [`state`]: what the boundaries share (the core behind its lock,
//!   metrics, clock).
//! * [`clock`]: the one module that reads time.
//! * [`server`]: wiring it all into a running server.
//!
//! Dependencies point one way: these shells → `doorman-core` →
//! `doorman-algorithms`.
//!
//! Must not: decide grants, leases or learning mode (`doorman-core` does).

pub mod auth;
pub mod clock;
pub mod config_source;
pub mod config_version;
pub mod core_locks;
pub mod election;
pub mod envoy;

pub mod grpc;
mod hangup;
pub mod http;
pub mod identity;
pub mod idle;
pub mod listener;
pub mod metrics;
mod options;
pub mod parent_link;
pub mod server;
pub mod state;
pub mod tls;
pub mod upstream;

pub use doorman_lease::{Span, Time};

/// The lease and wall clocks as [`Time`] (see [`clock`], the one module
/// that reads time; the core never does).
pub use clock::{lease_clock, wall_clock};
