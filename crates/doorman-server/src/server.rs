//! Wiring only: binds the gRPC and HTTP listeners, reads the config,
//! creates the core and the shared state, and starts one task per
//! boundary (gRPC, HTTP, cleanup, config source, election, upstream) until
//! shut down. Used by `doorman server`, the demo and tests.
//!
//! Must not: contain behaviour of its own; each task's logic lives in its
//! boundary's module.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use doorman_core::server::{CoreOptions, Role, Sharded};
use doorman_lease::Span;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use crate::config_source::ConfigSource;
use crate::config_source::Loaded;
use crate::grpc_port;
pub use crate::options::{ServerOptions, StartError, DEFAULT_GRPC_MAX_CONNECTIONS};
use doorman_election::{Candidacy, MasterView};

use doorman_state::core_locks::LockedCore;
use doorman_state::metrics::Metrics;
use doorman_state::ServerState;
use doorman_transport::auth::Auth;
use doorman_transport::listener::Incoming;
use doorman_transport::tls::{Port, ServerTls};

/// A running server.
#[derive(Debug)]
pub struct RunningServer {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address, if any.
    pub http_addr: Option<SocketAddr>,
    /// The bound plaintext health address (`--health-listen`), if any.
    pub health_addr: Option<SocketAddr>,
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
    format!("{}:{}", doorman_net::hostname(), addr.port())
}

/// Starts a server: reads the config, binds the listeners, and starts every
/// task. A standalone server is master before the first request.
pub async fn start(opts: ServerOptions) -> Result<RunningServer, StartError> {
    let loaded = opts.config.load().await?;
    let config = loaded.config.clone();
    let tls = match &opts.tls {
        Some(files) => Some(Arc::new(ServerTls::load(files.clone())?)),
        None => None,
    };
    let (grpc, grpc_addr) = bind_grpc(opts.listen).await?;
    let http = bind_optional(opts.http).await?;
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let health = bind_optional(opts.health).await?;
    let health_addr = health.as_ref().and_then(|l| l.local_addr().ok());
    let server_id = opts
        .server_id
        .clone()
        .unwrap_or_else(|| default_server_id(grpc_addr));
    let state = build_state(&opts, &server_id, config.clone());
    state.subtree.set_node_id(&node_id(&opts, &server_id));
    install_loaded(&state, &loaded);
    let (stop, stop_rx) = watch::channel(false);
    // The gRPC server first: `RunningServer::wait` waits for it.
    let listeners = Listeners { grpc, http, health };
    let mut tasks = spawn_front_ends(&opts, &state, listeners, tls.clone(), &stop_rx);
    tasks.extend(spawn_security(&opts, &state, tls.as_ref(), &stop_rx));
    tasks.extend(spawn_background(
        &opts, loaded, &state, &server_id, &stop_rx,
    ));
    tracing::info!(%grpc_addr, http = ?http_addr, health = ?health_addr, %server_id, parent = ?opts.parent, election = ?opts.election, config = %config.summary(), "doorman server started");
    Ok(RunningServer {
        grpc_addr,
        http_addr,
        health_addr,
        state,
        stop,
        tasks,
    })
}

/// The bound listeners: gRPC, and the optional HTTP and health ports.
struct Listeners {
    grpc: TcpListener,
    http: Option<TcpListener>,
    health: Option<TcpListener>,
}

async fn bind_optional(addr: Option<SocketAddr>) -> Result<Option<TcpListener>, StartError> {
    match addr {
        Some(a) => Ok(Some(bind(a).await?)),
        None => Ok(None),
    }
}

/// The gRPC listener and the address it got.
async fn bind_grpc(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let grpc = bind(addr).await?;
    let bound = grpc
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })?;
    Ok((grpc, bound))
}

/// What loading the config at start said: no config yet (not ready until
/// one arrives), or the config and its version.
fn install_loaded(state: &ServerState, loaded: &Loaded) {
    match &loaded.pending {
        Some(why) => {
            tracing::warn!("starting without a config, not ready until one arrives: {why}");
            state.core().wait_for_config(why.clone());
        }
        None => state.metrics.config_reload(true, state.now()),
    }
    if let Some(v) = loaded.version.clone() {
        tracing::info!("config loaded: {v}");
        state.set_config_version(v);
    }
}

/// The listeners' tasks: gRPC (with the Envoy services and the RLS
/// requester's refresh task) and HTTP.
fn spawn_front_ends(
    opts: &ServerOptions,
    state: &Arc<ServerState>,
    Listeners {
        grpc,
        http,
        health: health_port,
    }: Listeners,
    tls: Option<Arc<ServerTls>>,
    stop_rx: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let incoming = Incoming::new(
        grpc,
        "gRPC",
        opts.grpc_max_connections,
        opts.grpc_idle_timeout,
    );
    let peers = doorman_transport::tls::secure(
        incoming,
        tls.clone(),
        Port::Grpc,
        state.clone(),
        stop_rx.clone(),
    );
    let rls = Arc::new(doorman_envoy::local::LocalRequester::new(
        RLS_CLIENT_ID,
        state.core().shard_count(),
    ));
    let (health, health_task) =
        doorman_grpc::health::health(state.clone(), grpc_port::served_names(), stop_rx.clone());
    let mut tasks = vec![
        grpc_port::spawn_grpc(
            (state.clone(), opts.push_budget),
            rls.clone(),
            health.clone(),
            peers,
            stop_rx.clone(),
        ),
        tokio::spawn(rls.run(state.clone(), stop_rx.clone())),
        health_task,
    ];
    tasks.extend(health_port.map(|l| grpc_port::spawn_health(l, health, stop_rx.clone())));
    tasks.extend(http.map(|l| {
        let app = doorman_http::router(state.clone());
        let (state, stop) = (state.clone(), stop_rx.clone());
        tokio::spawn(doorman_http::serve::serve(
            l,
            app,
            opts.http_limits,
            tls,
            state,
            stop,
        ))
    }));
    tasks
}

/// The TLS files' and the token file's watches, and what the log should
/// say about how callers are authenticated.
fn spawn_security(
    opts: &ServerOptions,
    state: &Arc<ServerState>,
    tls: Option<&Arc<ServerTls>>,
    stop_rx: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    match tls {
        Some(t) => {
            let watch = doorman_transport::tls::spawn_watch(
                t.clone(),
                state.clone(),
                opts.reload_interval,
                stop_rx.clone(),
            );
            tasks.push(watch);
            let mode = if t.requires_client_cert() {
                "mutual TLS"
            } else {
                "TLS"
            };
            tracing::info!(cert = %t.files().cert.display(), "serving gRPC and HTTP over {mode}");
        }
        None if opts.auth.tokens.is_some() => tracing::warn!(
            "bearer tokens without TLS: tokens travel in clear text (give --tls-cert and --tls-key)"
        ),
        None => tracing::warn!(
            "unauthenticated mode: no TLS; anyone who can reach this server can use it"
        ),
    }
    warn_if_rules_cannot_pass(state, tls.map(|t| &**t), &opts.auth);
    if let Some(t) = &opts.auth.tokens {
        let (t, state, stop) = (t.clone(), state.clone(), stop_rx.clone());
        tasks.push(doorman_transport::auth::token_file::spawn_watch(
            t,
            move |ok| state.metrics.token_reload(ok),
            opts.reload_interval,
            stop,
        ));
    }
    tasks
}

/// The tasks behind the front-ends: cleanup, the config's watch, the
/// election and the link to the parent.
fn spawn_background(
    opts: &ServerOptions,
    loaded: Loaded,
    state: &Arc<ServerState>,
    server_id: &str,
    stop_rx: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![spawn_cleanup(
        state.clone(),
        opts.cleanup_interval,
        stop_rx.clone(),
    )];
    let reload = opts.reload_interval;
    tasks.extend(
        opts.config
            .spawn_watch(loaded, state.clone(), reload, stop_rx.clone()),
    );
    if !opts.election.is_standalone() {
        tasks.extend(spawn_election(opts, state, server_id, stop_rx));
    }
    if opts.election.replicas().is_some() {
        tasks.push(spawn_replicas(opts, state, stop_rx.clone()));
    }
    if !opts.parent.is_empty() {
        tasks.push(spawn_upstream(opts, state, server_id, stop_rx.clone()));
    }
    tasks
}

/// The core and the state shared by every task; a standalone server is
/// master from now on.
fn build_state(
    opts: &ServerOptions,
    server_id: &str,
    config: Arc<doorman_core::config::Config>,
) -> Arc<ServerState> {
    let role = if opts.parent.is_empty() {
        Role::Root
    } else {
        Role::Intermediate
    };
    let core_opts = CoreOptions {
        role,
        server_id: server_id.to_string(),
        min_request_interval: Span::from_duration(opts.min_request_interval),
        shadow_all: opts.shadow,
    };
    let core = LockedCore::new(core_opts, config, opts.core_shards);
    if opts.election.is_standalone() {
        (&core).become_master((opts.clock)());
    }
    let mut state = ServerState::new(core, Metrics::new(), opts.clock.clone());
    state.auth = opts.auth.clone();
    state.series = opts.metrics_series;
    if opts.parent.is_empty() {
        state.set_level(0);
    } else {
        state.parent_link = Some(doorman_state::parent_link::ParentLink::default());
    }
    let client_ca = opts.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    state.auth.authenticating = client_ca || opts.auth.tokens.is_some();
    Arc::new(state)
}

/// The client id under which a server's RLS front-end leases capacity
/// from its own core.
pub const RLS_CLIENT_ID: &str = "envoy-rls";

/// Forgets expired leases and empty resources every `every`.
fn spawn_cleanup(
    state: Arc<ServerState>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // A zero period would panic in tokio; 1 ms is the floor.
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let state = state.clone();
                    let _ = tokio::task::spawn_blocking(move || state.cleanup()).await;
                }
                _ = stop.changed() => return,
            }
        }
    })
}

/// The election and the task that applies its views to the core.
fn spawn_election(
    opts: &ServerOptions,
    state: &Arc<ServerState>,
    server_id: &str,
    stop: &watch::Receiver<bool>,
) -> [JoinHandle<()>; 2] {
    let (views_tx, views_rx) = watch::channel(MasterView::default());
    let core: Arc<dyn doorman_election::Mastership> = state.clone();
    let candidacy = Candidacy::new(server_id.to_string(), views_tx, stop.clone(), core);
    let election = opts.election.run(candidacy);
    [
        tokio::spawn(election),
        tokio::spawn(doorman_state::election::follow(
            state.clone(),
            views_rx,
            stop.clone(),
        )),
    ]
}

/// An intermediate server's link to its parent.
fn spawn_upstream(
    opts: &ServerOptions,
    state: &Arc<ServerState>,
    server_id: &str,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let node_id = node_id(opts, server_id);
    let conn = doorman_net::Connector::new(opts.parent.clone(), opts.parent_timeout)
        .with_tls(opts.parent_tls.clone())
        .with_token(opts.parent_token.clone());
    tokio::spawn(crate::upstream::run(state.clone(), conn, node_id, stop))
}

/// The id this node goes by towards its parent (and in the tree):
/// replicas of one node share it, so a new master continues its
/// predecessor's lease there.
fn node_id(opts: &ServerOptions, server_id: &str) -> String {
    opts.node_id
        .clone()
        .or_else(|| opts.election.node_id())
        .unwrap_or_else(|| server_id.to_string())
}

/// How often the election's servers are listed for the tree report.
const REPLICAS_EVERY: Duration = Duration::from_secs(5);

/// Lists the election's servers every [`REPLICAS_EVERY`] for the tree
/// report (a failed listing keeps the last one).
fn spawn_replicas(
    opts: &ServerOptions,
    state: &Arc<ServerState>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let (election, state) = (opts.election.clone(), state.clone());
    tokio::spawn(async move {
        loop {
            if let Some(listing) = election.replicas() {
                match listing.await {
                    Ok(list) => state.subtree.set_replicas(list),
                    Err(e) => tracing::debug!("cannot list the election's servers: {e}"),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(REPLICAS_EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    })
}

/// Access rules with no way to authenticate deny every request: say so at
/// start rather than leave operators guessing.
fn warn_if_rules_cannot_pass(state: &ServerState, tls: Option<&ServerTls>, auth: &Auth) {
    let identities = tls.is_some_and(ServerTls::requires_client_cert) || auth.tokens.is_some();
    let rules = state.core().config().acl().len();
    if rules > 0 && !identities {
        tracing::warn!(
            rules,
            "the config has access rules but callers cannot authenticate (no --tls-client-ca, no --auth-tokens): every request will be denied"
        );
    }
    if auth.allow_anonymous && !identities {
        tracing::warn!("--allow-anonymous has no effect: callers cannot authenticate (no --tls-client-ca, no --auth-tokens), so every caller is anonymous and served");
    } else if auth.allow_anonymous && rules == 0 {
        tracing::warn!("--allow-anonymous without access rules: callers with neither a token nor a certificate may use every resource");
    }
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
