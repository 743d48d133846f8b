//! Starts a complete server: binds the gRPC and HTTP listeners, creates the
//! core, becomes master (standalone), and runs the cleanup and config-reload
//! tasks until shut down. Used by `doorman server`, the demo and tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use doorman_algorithms::Time;
use doorman_proto::CapacityServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{Config, ConfigError};
use crate::core::{CoreOptions, Role, ServerCore};
use crate::election::{Election, MasterView};
use crate::metrics::Metrics;
use crate::service::{CapacityService, Clock, ServerState};

/// Where the config comes from.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A TOML file, reloaded on change and SIGHUP.
    File(PathBuf),
    /// A config given directly (tests, demo); never reloaded.
    Inline(Arc<Config>),
    /// An etcd key, watched; `doorman config push` writes it.
    Etcd {
        /// etcd endpoints.
        endpoints: Vec<String>,
        /// The key, e.g. `/doorman/config`.
        key: String,
    },
}

/// How to run a server.
#[derive(Clone)]
pub struct ServerOptions {
    /// gRPC listen address (port 0 picks one).
    pub listen: SocketAddr,
    /// HTTP listen address for metrics and status, if any.
    pub http: Option<SocketAddr>,
    /// Id returned by Discovery; defaults to the bound gRPC address.
    pub server_id: Option<String>,
    /// The config.
    pub config: ConfigSource,
    /// See [`CoreOptions::min_request_interval`].
    pub min_request_interval: Duration,
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
    pub election: Election,
    /// The clock (wall clock by default; tests may inject one).
    pub clock: Clock,
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
            server_id: None,
            config,
            min_request_interval: Duration::from_secs(1),
            reload_interval: Duration::from_secs(1),
            cleanup_interval: Duration::from_secs(1),
            parent: Vec::new(),
            node_id: None,
            parent_timeout: Duration::from_secs(5),
            election: Election::Standalone,
            clock: Arc::new(crate::wall_clock),
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The config could not be read from etcd.
    #[error("{0}")]
    Etcd(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running server.
#[derive(Debug)]
pub struct RunningServer {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address, if any.
    pub http_addr: Option<SocketAddr>,
    /// The shared state (core, metrics, clock).
    pub state: Arc<ServerState>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops accepting, finishes in-flight requests and stops the tasks.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }

    /// Stops abruptly, as if the process died: tasks are aborted and
    /// connections dropped.
    pub fn kill(self) {
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Waits until the gRPC server ends (it was shut down or it failed).
    pub async fn wait(&mut self) {
        if let Some(grpc) = self.tasks.first_mut() {
            let _ = grpc.await;
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })
}

/// The listen address, or `<hostname>:<port>` when it is unspecified
/// (`0.0.0.0`, `[::]`): an unspecified address can neither be redirected to
/// nor tell two hosts apart at a parent.
pub fn default_server_id(addr: SocketAddr) -> String {
    if !addr.ip().is_unspecified() {
        return addr.to_string();
    }
    format!("{}:{}", doorman_client::hostname(), addr.port())
}

/// Starts a standalone (always master) server.
pub async fn start(opts: ServerOptions) -> Result<RunningServer, StartError> {
    let mut etcd_revision = 0;
    let (config, initial_bytes) = match &opts.config {
        ConfigSource::File(path) => {
            let (cfg, bytes) = Config::read(path)?;
            (Arc::new(cfg), Some(bytes))
        }
        ConfigSource::Inline(c) => (c.clone(), None),
        ConfigSource::Etcd { endpoints, key } => {
            let (bytes, rev) = crate::etcd_config::fetch(endpoints, key)
                .await
                .map_err(StartError::Etcd)?;
            etcd_revision = rev;
            let name = crate::etcd_config::source_name(key);
            (Arc::new(Config::from_bytes(&bytes, &name)?), Some(bytes))
        }
    };
    let grpc = bind(opts.listen).await?;
    let grpc_addr = grpc.local_addr().map_err(|source| StartError::Bind {
        addr: opts.listen,
        source,
    })?;
    let http = match opts.http {
        Some(a) => Some(bind(a).await?),
        None => None,
    };
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let server_id = opts
        .server_id
        .clone()
        .unwrap_or_else(|| default_server_id(grpc_addr));
    let role = if opts.parent.is_empty() {
        Role::Root
    } else {
        Role::Intermediate
    };
    let core_opts = CoreOptions {
        role,
        server_id: server_id.clone(),
        level: 0,
        min_request_interval: Time::from_duration(opts.min_request_interval),
    };
    let mut core = ServerCore::new(core_opts, config.clone());
    let standalone = matches!(opts.election, Election::Standalone);
    if standalone {
        core.become_master((opts.clock)());
    }
    let metrics = Metrics::new();
    metrics.config_reload(true);
    let state = Arc::new(ServerState::new(core, metrics, opts.clock.clone()));
    let (stop, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();

    let svc = CapacityServer::new(CapacityService::new(state.clone()));
    let mut grpc_stop = stop_rx.clone();
    tasks.push(tokio::spawn(async move {
        // Small request/response pairs: without TCP_NODELAY, Nagle and
        // delayed ACKs add ~40 ms to every response that spans two writes.
        let incoming = tokio_stream::StreamExt::map(
            tokio_stream::wrappers::TcpListenerStream::new(grpc),
            |conn| {
                conn.inspect(|s| {
                    let _ = s.set_nodelay(true);
                })
            },
        );
        let r = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = grpc_stop.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "gRPC server failed");
        }
    }));

    if let Some(listener) = http {
        let app = crate::http::router(state.clone());
        let mut http_stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            let r = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = http_stop.wait_for(|s| *s).await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!(error = %e, "HTTP server failed");
            }
        }));
    }

    let cleanup_state = state.clone();
    let mut cleanup_stop = stop_rx.clone();
    let every = opts.cleanup_interval;
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = cleanup_state.now();
                    cleanup_state.core().cleanup(now);
                }
                _ = cleanup_stop.changed() => return,
            }
        }
    }));

    match (&opts.config, initial_bytes) {
        (ConfigSource::File(path), Some(bytes)) => {
            tasks.push(tokio::spawn(crate::reload::watch_file(
                state.clone(),
                path.clone(),
                bytes,
                opts.reload_interval,
                stop_rx.clone(),
            )));
        }
        (ConfigSource::Etcd { endpoints, key }, Some(bytes)) => {
            tasks.push(tokio::spawn(crate::etcd_config::watch(
                state.clone(),
                endpoints.clone(),
                key.clone(),
                bytes,
                etcd_revision,
                stop_rx.clone(),
            )));
        }
        _ => {}
    }

    if !standalone {
        let (views_tx, views_rx) = watch::channel(MasterView::default());
        tasks.push(tokio::spawn(opts.election.clone().run(
            server_id.clone(),
            views_tx,
            stop_rx.clone(),
        )));
        tasks.push(tokio::spawn(crate::election::follow(
            state.clone(),
            views_rx,
            stop_rx.clone(),
        )));
    }

    if role == Role::Intermediate {
        // Replicas of one node share their identity towards the parent, so
        // a new master continues its predecessor's lease there.
        let node_id = opts
            .node_id
            .clone()
            .unwrap_or_else(|| match &opts.election {
                Election::Etcd(e) => e.key.clone(),
                _ => server_id.clone(),
            });
        let conn = doorman_client::Connector::new(opts.parent.clone(), opts.parent_timeout);
        tasks.push(tokio::spawn(crate::upstream::run(
            state.clone(),
            conn,
            node_id,
            stop_rx.clone(),
        )));
    }

    tracing::info!(%grpc_addr, http = ?http_addr, %server_id, parent = ?opts.parent, election = ?opts.election, config = %config.summary(), "doorman server started");
    Ok(RunningServer {
        grpc_addr,
        http_addr,
        state,
        stop,
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ids_are_reachable_and_distinct() {
        assert_eq!(
            default_server_id("127.0.0.1:6000".parse().unwrap()),
            "127.0.0.1:6000"
        );
        let id = default_server_id("0.0.0.0:6000".parse().unwrap());
        assert!(id.ends_with(":6000") && !id.starts_with("0.0.0.0"), "{id}");
        assert!(!default_server_id("[::]:7".parse().unwrap()).starts_with('['));
    }
}
