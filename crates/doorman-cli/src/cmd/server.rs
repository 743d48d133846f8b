//! `doorman server`: run a lease server (a root with `--config`, or below a
//! parent with `--parent`; always master, or electing one through etcd with
//! `--election-key`) until SIGINT or SIGTERM, then shut down gracefully.
//!
//! Must not: hold server logic (it maps flags onto `ServerOptions`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use doorman_core::server::PushBudgetRule;
use doorman_election::{Election, Standalone};
use doorman_etcd::EtcdElection;
use doorman_http::serve::HttpLimits;
use doorman_server::server::{start, ConfigSource, ServerOptions, DEFAULT_GRPC_MAX_CONNECTIONS};
use doorman_state::metrics::ResourceSeries;
use doorman_transport::auth::{Auth, TokenFile};
use doorman_transport::tls::TlsFiles;

use crate::etcd_args::EtcdArgs;
use crate::tls_args::ClientTlsArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Resource configuration: a TOML file (reloaded when it changes and on
    /// SIGHUP) or `etcd:KEY` (watched; needs --etcd). Required for a root;
    /// optional with --parent, where it can only narrow what the parent
    /// sends (capacity, lease length, refresh).
    #[arg(long)]
    config: Option<String>,
    /// etcd, for --election-key and etcd: configs.
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Campaign for mastership of this node on this etcd election key, e.g.
    /// /doorman/root (needs --etcd). Without it the server is always master.
    #[arg(long)]
    election_key: Option<String>,
    /// Seconds a master keeps mastership without reaching etcd (1 to 3600).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    election_ttl: u64,
    /// Parent node addresses (comma-separated): run as an intermediate
    /// server that leases its capacity from the parent's master.
    #[arg(long, value_delimiter = ',')]
    parent: Vec<String>,
    /// Id used towards the parent (default: the election key when
    /// electing, else the server id). Replicas of one node must share it,
    /// so a new master continues the node's lease.
    #[arg(long)]
    node_id: Option<String>,
    /// gRPC listen address.
    #[arg(long, default_value = "127.0.0.1:6000")]
    listen: SocketAddr,
    /// HTTP address for /metrics, /healthz, /readyz, /debug/status and
    /// /api/v1/status.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Plaintext address serving only the standard gRPC health service
    /// (grpc.health.v1.Health), for probes that cannot speak TLS, such as
    /// Kubernetes' `grpc:` probes. The gRPC port serves health and
    /// reflection too.
    #[arg(long)]
    health_listen: Option<SocketAddr>,
    /// Most open connections to the HTTP address (1 to 65536); one more is
    /// closed at once.
    #[arg(long, default_value_t = HttpLimits::DEFAULT_MAX_CONNECTIONS, value_parser = crate::args::count(65_536))]
    http_max_connections: usize,
    /// Seconds an HTTP peer has to send its request headers (0.1 to 600;
    /// default 10).
    #[arg(long, value_parser = crate::args::seconds(0.1, 600.0))]
    http_header_timeout: Option<Duration>,
    /// Most open gRPC connections (1 to 1 000 000); one more is closed at
    /// once. The soft limit of open files is raised to the hard limit at
    /// start.
    #[arg(long, default_value_t = DEFAULT_GRPC_MAX_CONNECTIONS, value_parser = crate::args::count(1_000_000))]
    grpc_max_connections: usize,
    /// Grants per second the server may push on lease streams (1 to
    /// 10 000 000; default 5 000), in bursts of up to four seconds' worth; a
    /// holder looked at and not pushed to costs a sixteenth of one. Holders
    /// past it get theirs from a later pass, or at their next renewal.
    #[arg(long, value_parser = crate::args::count(10_000_000))]
    push_budget: Option<usize>,
    /// Id returned by Discovery (default: the listen address).
    #[arg(long)]
    server_id: Option<String>,
    /// Seconds within which a repeat request for the same resource gets the
    /// lease it holds without a new decision (0 disables; at most 3600).
    #[arg(long, default_value = "1", value_parser = crate::args::seconds(0.0, 3600.0))]
    min_request_interval: Duration,
    /// Shards the core's resources are split into, each with its own lock
    /// (default: four per CPU, a power of two, at most 64).
    #[arg(long, value_parser = crate::args::count(1024))]
    core_shards: Option<usize>,
    /// Seconds between checks of the config file for changes (0.01 to
    /// 3600; SIGHUP always reloads at once).
    #[arg(long, default_value = "1", value_parser = crate::args::seconds(0.01, 3600.0))]
    config_poll_interval: Duration,
    /// Serve gRPC and the HTTP pages over TLS with this PEM certificate
    /// chain (needs --tls-key). Re-read when it changes and on SIGHUP. Also
    /// presented to the parent with --parent-tls-ca.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates chaining to this PEM CA file (mutual
    /// TLS; needs --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Connect to the parent over TLS, trusting this PEM CA file, and
    /// present --tls-cert/--tls-key if given.
    #[arg(long, requires = "parent")]
    parent_tls_ca: Option<PathBuf>,
    /// Name to check the parent's certificate against (default: the host
    /// of the parent address).
    #[arg(long, requires = "parent_tls_ca")]
    parent_tls_server_name: Option<String>,
    /// Present this PEM client certificate to the parent instead of
    /// --tls-cert (needs --parent-tls-key): a node that serves its own
    /// clients without TLS (original Doorman clients have none) can still
    /// be a mutual-TLS client of its parent.
    #[arg(long, requires_all = ["parent_tls_ca", "parent_tls_key"])]
    parent_tls_cert: Option<PathBuf>,
    /// PEM private key of --parent-tls-cert.
    #[arg(long, requires = "parent_tls_cert")]
    parent_tls_key: Option<PathBuf>,
    /// Send the bearer token in this file to the parent (for a parent with
    /// --auth-tokens).
    #[arg(long, requires = "parent")]
    parent_token_file: Option<PathBuf>,
    /// Accept bearer tokens listed in this TOML file (`[[token]]` entries
    /// with `identity` and `token` or `sha256`); a caller sending one has
    /// that identity. Use with TLS. Re-read when it changes and on SIGHUP
    /// (a bad new file is logged and the old tokens stay).
    #[arg(long)]
    auth_tokens: Option<PathBuf>,
    /// Require a client certificate or token for /metrics, /healthz and
    /// /readyz too (open by default, for probes and scrapers).
    #[arg(long)]
    http_require_identity: bool,
    /// Serve callers with neither a token nor a client certificate,
    /// although this server identifies callers (--auth-tokens or
    /// --tls-client-ca): by default they are refused with UNAUTHENTICATED.
    #[arg(long)]
    allow_anonymous: bool,
    /// Export resource gauges per resource (label `resource`) instead of
    /// per config template, for at most --metrics-max-resources resources.
    #[arg(long)]
    metrics_per_resource: bool,
    /// With --metrics-per-resource: most resources with their own series;
    /// the rest are summed per template under resource="_other".
    #[arg(long, default_value_t = 1000, requires = "metrics_per_resource")]
    metrics_max_resources: usize,
    /// Shadow mode for every resource: leases are decided and granted as
    /// usual, but our clients and the Envoy front-ends never wait or
    /// refuse for them; they count what they would have refused. A
    /// template's `shadow = true` does the same for its resources alone.
    #[arg(long)]
    shadow: bool,
}

/// Raises the soft limit of open files to the hard limit, so the
/// connection caps, not the default soft limit (often 1024), bound the
/// server's connections.
fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return;
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(from = ?limit.current, to = ?limit.maximum, "raised the open-files limit")
        }
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit"),
    }
}

async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Where the config comes from, as the flags say.
fn config_source(args: &Args) -> anyhow::Result<ConfigSource> {
    Ok(match (&args.config, args.parent.is_empty()) {
        (Some(c), _) => match c.strip_prefix("etcd:") {
            Some(key) => ConfigSource::Etcd {
                etcd: args.etcd.options(&format!("--config {c}"))?,
                key: key.to_string(),
            },
            None => ConfigSource::File(PathBuf::from(c)),
        },
        (None, false) => ConfigSource::Inline(Arc::new(doorman_core::config::Config::empty())),
        (None, true) => anyhow::bail!(
            "--config is required for a root server (or give --parent ADDR to run below one)"
        ),
    })
}

/// How this server takes part in its node's election, as the flags say.
fn election(args: &Args) -> anyhow::Result<Arc<dyn Election>> {
    Ok(match &args.election_key {
        None => Arc::new(Standalone),
        Some(key) => Arc::new(EtcdElection {
            etcd: args.etcd.options("--election-key")?,
            key: key.clone(),
            ttl: Duration::from_secs(args.election_ttl),
        }),
    })
}

fn options(args: Args) -> anyhow::Result<ServerOptions> {
    let mut opts = ServerOptions::new(args.listen, config_source(&args)?);
    opts.election = election(&args)?;
    opts.auth = auth(&args)?;
    opts.parent = args.parent;
    opts.node_id = args.node_id;
    opts.grpc_max_connections = args.grpc_max_connections;
    opts.push_budget = args
        .push_budget
        .map_or(opts.push_budget, |n| PushBudgetRule::per_second(n as f64));
    opts.http = args.http;
    opts.health = args.health_listen;
    let defaults = HttpLimits::default();
    opts.http_limits = HttpLimits {
        max_connections: args.http_max_connections,
        header_timeout: args.http_header_timeout.unwrap_or(defaults.header_timeout),
        ..defaults
    };
    opts.server_id = args.server_id;
    opts.min_request_interval = args.min_request_interval;
    if let Some(n) = args.core_shards {
        opts.core_shards = n;
    }
    opts.reload_interval = args.config_poll_interval;
    opts.tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        }),
        _ => None,
    };
    let parent_tls = ClientTlsArgs {
        tls_ca: args.parent_tls_ca.clone(),
        tls_cert: args.parent_tls_ca.as_ref().and(
            args.parent_tls_cert
                .clone()
                .or_else(|| args.tls_cert.clone()),
        ),
        tls_key: args
            .parent_tls_ca
            .as_ref()
            .and(args.parent_tls_key.clone().or_else(|| args.tls_key.clone())),
        tls_server_name: args.parent_tls_server_name.clone(),
        token_file: args.parent_token_file.clone(),
    };
    opts.parent_token = parent_tls.token()?;
    opts.parent_tls = parent_tls.client_tls()?;
    opts.shadow = args.shadow;
    if args.metrics_per_resource {
        opts.metrics_series = ResourceSeries::PerResource(args.metrics_max_resources);
    }
    Ok(opts)
}

/// Who may call, from `--auth-tokens`, `--http-require-identity` and
/// `--allow-anonymous`.
fn auth(args: &Args) -> anyhow::Result<Auth> {
    Ok(Auth {
        tokens: match &args.auth_tokens {
            Some(p) => Some(Arc::new(TokenFile::load(p).map_err(anyhow::Error::msg)?)),
            None => None,
        },
        health_needs_identity: args.http_require_identity,
        authenticating: false, // set by the server from its TLS and tokens
        allow_anonymous: args.allow_anonymous,
    })
}

/// Runs `doorman server` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config_name = args.config.clone().unwrap_or_else(|| "(none)".into());
    let opts = options(args)?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    raise_open_files_limit();
    let mut server = start(opts)
        .await
        .with_context(|| format!("cannot start the server with config {config_name}"))?;
    let status = server
        .http_addr
        .map(|a| format!(", {scheme}://{a}/debug/status"))
        .unwrap_or_default();
    tracing::info!(grpc = %server.grpc_addr, "doorman server listening on {} (gRPC){status}", server.grpc_addr);
    tokio::select! {
        _ = terminated() => {
            tracing::info!("shutting down (resigning mastership if held)");
            server.shutdown().await;
        }
        _ = server.wait() => anyhow::bail!("the gRPC server stopped unexpectedly"),
    }
    Ok(ExitCode::SUCCESS)
}
