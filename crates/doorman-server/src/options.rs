//! How to run a server ([`ServerOptions`], with its defaults) and why one
//! could not start ([`StartError`]); re-exported by `server`.
//!
//! Must not: start anything.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use doorman_state::core_locks::default_shards;

use crate::config_source::{ConfigSource, LoadError};
use doorman_election::{Election, Standalone};
use doorman_http::serve::HttpLimits;
use doorman_state::state::Clock;
use doorman_transport::auth::Auth;
use doorman_transport::tls::{TlsError, TlsFiles};

/// Default of `ServerOptions::grpc_max_connections` (and of
/// `--grpc-max-connections`).
pub const DEFAULT_GRPC_MAX_CONNECTIONS: usize = 10_000;

/// How to run a server.
#[derive(Clone)]
pub struct ServerOptions {
    /// gRPC listen address (port 0 picks one).
    pub listen: SocketAddr,
    /// HTTP listen address for metrics and status, if any.
    pub http: Option<SocketAddr>,
    /// Plaintext listen address serving only `grpc.health.v1.Health`
    /// (`--health-listen`), for probes that cannot speak TLS; the gRPC
    /// port serves health too.
    pub health: Option<SocketAddr>,
    /// Connection cap and deadlines of the HTTP listener.
    pub http_limits: HttpLimits,
    /// Most open gRPC connections; one more is closed at once.
    pub grpc_max_connections: usize,
    /// A gRPC connection without any traffic for this long is closed
    /// (HTTP/2 keep-alive pings every 30 s count as traffic).
    pub grpc_idle_timeout: Duration,
    /// How many holders the lease streams' push passes may look at (each
    /// may get a push): [`PUSH_BUDGET`] by default (`--push-budget`).
    ///
    /// [`PUSH_BUDGET`]: doorman_core::server::PUSH_BUDGET
    pub push_budget: doorman_core::server::PushBudgetRule,
    /// Id returned by Discovery; defaults to the bound gRPC address.
    pub server_id: Option<String>,
    /// The config.
    pub config: ConfigSource,
    /// See [`CoreOptions::min_request_interval`](doorman_core::server::CoreOptions::min_request_interval).
    pub min_request_interval: Duration,
    /// How many shards the core's resources are split into, each behind
    /// its own lock (see [`LockedCore`](doorman_state::core_locks::LockedCore)).
    pub core_shards: usize,
    /// How often to look at the config file for changes.
    pub reload_interval: Duration,
    /// How often to forget expired leases and empty resources.
    pub cleanup_interval: Duration,
    /// The parent node's addresses; empty for the root.
    pub parent: Vec<String>,
    /// The id this server uses towards its parent (`server_id` of
    /// GetServerCapacity); defaults to the server id. Give the replicas of
    /// one node the same node id so a new master continues its lease.
    pub node_id: Option<String>,
    /// Deadline of each RPC to the parent.
    pub parent_timeout: Duration,
    /// How this server takes part in its node's master election.
    pub election: Arc<dyn Election>,
    /// The clock (wall clock by default; tests may inject one).
    pub clock: Clock,
    /// Serve gRPC and the HTTP pages over TLS with these files (mutual TLS
    /// with a client CA); reloaded when they change and on SIGHUP.
    pub tls: Option<TlsFiles>,
    /// TLS towards the parent (its CA, and this server's certificate to
    /// present).
    pub parent_tls: Option<doorman_net::ClientTls>,
    /// Bearer token sent to the parent (`--parent-token-file`).
    pub parent_token: Option<doorman_net::BearerToken>,
    /// Bearer tokens accepted from callers, and whether the health pages
    /// need an identity.
    pub auth: Auth,
    /// `/metrics` per template (default) or per resource with a cap.
    pub metrics_series: doorman_state::metrics::ResourceSeries,
    /// Every resource in shadow mode (`--shadow`): decided and granted as
    /// usual, enforced by nobody (see `Template::shadow`).
    pub shadow: bool,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("listen", &self.listen)
            .field("http", &self.http)
            .field("server_id", &self.server_id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ServerOptions {
    /// Defaults: no HTTP, 1 s minimum request interval, 1 s reload check,
    /// 1 s cleanup, wall clock.
    pub fn new(listen: SocketAddr, config: ConfigSource) -> Self {
        ServerOptions {
            listen,
            http: None,
            health: None,
            http_limits: HttpLimits::default(),
            grpc_max_connections: DEFAULT_GRPC_MAX_CONNECTIONS,
            grpc_idle_timeout: Duration::from_secs(60),
            push_budget: doorman_core::server::PUSH_BUDGET,
            server_id: None,
            config,
            min_request_interval: Duration::from_secs(1),
            core_shards: default_shards(),
            reload_interval: Duration::from_secs(1),
            cleanup_interval: Duration::from_secs(1),
            parent: Vec::new(),
            node_id: None,
            parent_timeout: doorman_core::schedule::DEFAULT_RPC_TIMEOUT.to_duration(),
            election: Arc::new(Standalone),
            clock: Arc::new(doorman_net::clock::lease_clock),
            tls: None,
            parent_tls: None,
            parent_token: None,
            auth: Auth::default(),
            metrics_series: Default::default(),
            shadow: false,
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] LoadError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS certificate, key or client CA could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
}
