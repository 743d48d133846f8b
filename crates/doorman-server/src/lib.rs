//! The Doorman lease server as a library.
//!
//! * [`core`]: the sans-IO state machine (time passed in).
//! * [`config`]: TOML resource templates, validation, lookup.
//! * [`validate`]: protobuf requests → validated core requests.
//! * [`service`]: the tonic `Capacity` service over the core.
//! * [`http`]: `/metrics`, `/debug/status`, `/api/v1/status`, `/healthz`.
//! * [`reload`]: config file watching (change on disk, SIGHUP).
//! * [`election`]: standalone, etcd and in-memory master election.
//! * [`etcd_config`]: config stored in (and watched from) an etcd key.
//! * [`upstream`]: an intermediate server asking its parent for capacity.
//! * [`server`]: wiring it all into a running server.
//! * [`isolated`]: a server on its own runtime, killable like a process.

pub mod config;
pub mod core;
pub mod election;
pub mod etcd_config;
pub mod etcd_election;
pub mod etcd_process;
pub mod http;
pub mod isolated;
pub mod metrics;
pub mod reload;
pub mod server;
pub mod service;
pub mod upstream;
pub mod validate;

pub use doorman_algorithms::Time;

/// The current wall-clock time as a [`Time`]: the only clock the server
/// library reads (the core never does). Shared with the client library.
pub use doorman_client::wall_clock;
