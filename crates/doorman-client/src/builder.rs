//! Building a [`Client`]: servers, id, fallback, intervals, deadlines,
//! backoff, metrics and clock, checked before the background task starts.
//!
//! Must not: connect (connecting is lazy, so a client can start before its
//! servers).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use doorman_core::client::{ClientCore, CoreOptions, Fallback};
use doorman_core::limits::{id_length_problem, MAX_ID_BYTES};
use doorman_core::Backoff;
use doorman_lease::Span;
use tokio::sync::Notify;

use crate::client::Client;
use crate::connection::Connector;
use crate::error::ClientError;
use crate::identity::{default_client_id, lease_clock, Clock};
use crate::metrics::ClientMetrics;
use crate::registry::{ClientShared, ClientState};
use crate::tls::ClientTls;
use doorman_net::BearerToken;

/// Builds a [`Client`].
pub struct ClientBuilder {
    servers: Vec<String>,
    client_id: Option<String>,
    fallback: Fallback,
    min_refresh_interval: Duration,
    rpc_timeout: Duration,
    backoff: (Duration, Duration),
    metrics: Option<prometheus::Registry>,
    clock: Option<Clock>,
    tls: Option<ClientTls>,
    token: Option<BearerToken>,
    lease_stream: bool,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("servers", &self.servers)
            .field("client_id", &self.client_id)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }
}

impl ClientBuilder {
    /// Defaults: pessimistic fallback, 1 s minimum refresh interval, 5 s
    /// RPC deadline, backoff from 100 ms to 30 s, no metrics, the lease
    /// clock ([`crate::lease_clock`]).
    pub(crate) fn new() -> Self {
        ClientBuilder {
            servers: Vec::new(),
            client_id: None,
            fallback: Fallback::Pessimistic,
            min_refresh_interval: Duration::from_secs(1),
            rpc_timeout: doorman_core::schedule::DEFAULT_RPC_TIMEOUT.to_duration(),
            backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            metrics: None,
            clock: None,
            tls: None,
            token: None,
            lease_stream: true,
        }
    }

    /// Connects to the servers over TLS (see [`ClientTls::from_files`]):
    /// their certificates must chain to its CA, and its client certificate,
    /// if any, is presented (mutual TLS).
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sends `token` as `authorization: Bearer …` on every RPC (for
    /// servers started with `--auth-tokens`; use it with TLS).
    pub fn bearer_token(mut self, token: BearerToken) -> Self {
        self.token = Some(token);
        self
    }

    /// The addresses (host:port) of the servers of the client's node; the
    /// client finds the master among them.
    pub fn servers<I, S>(mut self, servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.servers = servers.into_iter().map(Into::into).collect();
        self
    }

    /// The client id (default `<hostname>:<pid>:<n>`).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// What resources fall back to when a lease runs out (default
    /// pessimistic).
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Never more than one request per resource per this interval
    /// (default 1 s).
    pub fn min_refresh_interval(mut self, d: Duration) -> Self {
        self.min_refresh_interval = d;
        self
    }

    /// Deadline of every RPC (default 5 s).
    pub fn rpc_timeout(mut self, d: Duration) -> Self {
        self.rpc_timeout = d;
        self
    }

    /// Backoff after errors: first delay and cap (default 100 ms → 30 s),
    /// with jitter. A resource that has held a lease is retried no later
    /// than that lease's refresh interval, whatever the backoff says.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff = (initial, max);
        self
    }

    /// Registers the client's metrics on `registry`.
    pub fn metrics(mut self, registry: &prometheus::Registry) -> Self {
        self.metrics = Some(registry.clone());
        self
    }

    /// Whether to use the lease stream where the server offers it
    /// (default: yes). Without it, or against a server without one (an
    /// original Doorman server), every renewal is a GetCapacity call and
    /// a grant changes only when the client asks.
    pub fn lease_stream(mut self, on: bool) -> Self {
        self.lease_stream = on;
        self
    }

    /// Replaces the lease clock (simulations, tests).
    #[doc(hidden)]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Starts the client's background task. Connecting happens lazily, so
    /// this succeeds even if no server is up yet.
    pub async fn build(self) -> Result<Client, ClientError> {
        if self.servers.is_empty() {
            return Err(ClientError::NoServers);
        }
        let client_id = self.client_id.unwrap_or_else(default_client_id);
        if id_length_problem(client_id.len(), MAX_ID_BYTES).is_some() {
            return Err(ClientError::BadClientId(client_id.len()));
        }
        if doorman_core::limits::has_control_chars(&client_id) {
            // The server refuses such ids (they would break lease owners).
            return Err(ClientError::ClientIdControlCharacters);
        }
        let metrics = self
            .metrics
            .as_ref()
            .map(ClientMetrics::register)
            .transpose()?;
        let clock = self.clock.unwrap_or_else(|| Arc::new(lease_clock));
        let min_refresh = Span::from_duration(self.min_refresh_interval);
        let core = ClientCore::new(
            client_id,
            CoreOptions {
                min_refresh_interval: min_refresh,
                fallback: self.fallback,
                ..CoreOptions::default()
            },
        );
        let shared = Arc::new(ClientShared {
            state: Mutex::new(ClientState {
                core,
                resources: HashMap::new(),
                to_release: Vec::new(),
            }),
            wake: Notify::new(),
            clock,
            metrics: metrics.clone(),
            closed: AtomicBool::new(false),
            connection: Mutex::new(Default::default()),
        });
        let mut conn = Connector::new(self.servers, self.rpc_timeout)
            .with_tls(self.tls)
            .with_token(self.token);
        if let Some(m) = metrics {
            conn = conn.with_observer(Arc::new(move |method, d, code| {
                m.rpc(method, d.as_secs_f64(), code)
            }));
        }
        let seed = (shared.now().as_millis() as u64) ^ u64::from(std::process::id()) << 20;
        let backoff = Backoff::new(self.backoff.0, self.backoff.1, seed);
        let link = (self.rpc_timeout, self.lease_stream);
        Ok(Client::start(shared, conn, backoff, link))
    }
}
