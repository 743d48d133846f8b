//! `Client`: the bottom half. One background task per client refreshes all
//! resources in one bulk GetCapacity, finds the master (Discovery,
//! redirects), backs off with jitter on errors, applies leases and
//! fallbacks to the resources, and releases resources whose last handle is
//! dropped. Every RPC has a deadline; `close()` is bounded too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use doorman_algorithms::{Lease, Time};
use doorman_proto::doorman as pb;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::connection::Connector;
use crate::gauge::{GaugeOptions, GaugeResource};
use crate::metrics::ClientMetrics;
use crate::rate::{RateOptions, RateResource};
use crate::resource::{Handle, Kind, Shared, Wants};
use doorman_core::client::{ClientCore, CoreOptions, Fallback, GrantItem};
use doorman_core::limits::{
    id_length_problem, MAX_ID_BYTES, MAX_RESOURCES_PER_REQUEST, MAX_RESOURCE_ID_BYTES,
};
use doorman_core::Backoff;

/// Where the client gets the time (wall clock by default).
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// The wall clock.
pub fn wall_clock() -> Time {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// Errors of the client API.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `servers` was empty.
    #[error("no server addresses given")]
    NoServers,
    /// The client id is empty or longer than [`MAX_ID_BYTES`].
    #[error("client id must be 1 to {MAX_ID_BYTES} bytes, got {0} bytes")]
    BadClientId(usize),
    /// The resource id is empty or longer than [`MAX_RESOURCE_ID_BYTES`].
    #[error("resource id must be 1 to {MAX_RESOURCE_ID_BYTES} bytes, got {0} bytes")]
    BadResourceId(usize),
    /// Wants must be finite and ≥ 0.
    #[error("resource {id:?}: wants must be a finite number >= 0, got {wants}")]
    BadWants {
        /// The resource.
        id: String,
        /// The value refused.
        wants: f64,
    },
    /// The id is already used by a resource of the other kind.
    #[error("resource {id:?} is already open as a {existing:?} resource")]
    KindMismatch {
        /// The resource.
        id: String,
        /// Its kind.
        existing: Kind,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
    /// Metrics could not be registered.
    #[error("cannot register client metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(0);

/// This machine's host name (`/proc/sys/kernel/hostname`, else
/// `$HOSTNAME`, else `localhost`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// `<hostname>:<pid>:<n>`, unique per `Client` in a process.
pub fn default_client_id() -> String {
    format!(
        "{}:{}:{}",
        hostname(),
        std::process::id(),
        NEXT_CLIENT.fetch_add(1, Ordering::Relaxed)
    )
}

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

impl ClientBuilder {
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

    /// Replaces the wall clock (simulations, tests).
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
        let metrics = self
            .metrics
            .as_ref()
            .map(ClientMetrics::register)
            .transpose()?;
        let clock = self.clock.unwrap_or_else(|| Arc::new(wall_clock));
        let min_refresh = Time::from_duration(self.min_refresh_interval);
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
        });
        let mut conn = Connector::new(self.servers, self.rpc_timeout);
        if let Some(m) = metrics {
            conn = conn.with_observer(Arc::new(move |method, d, code| {
                m.rpc(method, d.as_secs_f64(), code)
            }));
        }
        let seed = (shared.now().as_millis() as u64) ^ u64::from(std::process::id()) << 20;
        let backoff = Backoff::new(self.backoff.0, self.backoff.1, seed);
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(shared.clone(), conn, backoff, stop_rx));
        Ok(Client {
            inner: Arc::new(Inner {
                shared,
                stop,
                task: Mutex::new(Some(task)),
                rpc_timeout: self.rpc_timeout,
            }),
        })
    }
}

pub(crate) struct ClientShared {
    state: Mutex<ClientState>,
    pub wake: Notify,
    clock: Clock,
    metrics: Option<ClientMetrics>,
    closed: AtomicBool,
}

impl std::fmt::Debug for ClientShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientShared").finish_non_exhaustive()
    }
}

struct ClientState {
    core: ClientCore,
    resources: HashMap<String, Arc<Shared>>,
    to_release: Vec<String>,
}

impl ClientShared {
    fn lock(&self) -> MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Time {
        (self.clock)()
    }

    /// Applies the capacity the core says applies now to every resource.
    fn publish(&self, st: &ClientState, now: Time) {
        for (id, r) in &st.resources {
            if let Some((cap, mode)) = st.core.capacity(id, now) {
                r.apply(cap, mode);
                if let Some(m) = &self.metrics {
                    m.resource(id, cap, st.core.wants(id).unwrap_or(0.0), mode);
                }
            }
        }
    }
}

/// A handle was cloned.
pub(crate) fn retain(shared: &Shared) {
    shared.handles.fetch_add(1, Ordering::AcqRel);
}

/// A handle was dropped; the last one removes the resource and has the
/// background task release it on the server.
pub(crate) fn release(shared: &Arc<Shared>) {
    let Some(client) = shared.client.upgrade() else {
        return;
    };
    let mut st = client.lock();
    if shared.handles.fetch_sub(1, Ordering::AcqRel) != 1 {
        return;
    }
    let current = st
        .resources
        .get(&shared.id)
        .is_some_and(|s| Arc::ptr_eq(s, shared));
    if current {
        st.resources.remove(&shared.id);
        st.core.remove(&shared.id);
        st.to_release.push(shared.id.clone());
        if let Some(m) = &client.metrics {
            m.forget(&shared.id);
        }
    }
    drop(st);
    client.wake.notify_one();
}

struct Inner {
    shared: Arc<ClientShared>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
    rpc_timeout: Duration,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The task releases what is left (best effort) and exits.
        let _ = self.stop.send(true);
    }
}

/// A Doorman client. Cheap to clone; all clones share one background task.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id())
            .finish_non_exhaustive()
    }
}

fn check_id(id: &str) -> Result<(), ClientError> {
    if id_length_problem(id.len(), MAX_RESOURCE_ID_BYTES).is_some() {
        return Err(ClientError::BadResourceId(id.len()));
    }
    Ok(())
}

fn check_wants(id: &str, wants: Wants) -> Result<f64, ClientError> {
    match wants {
        Wants::Auto => Ok(0.0),
        Wants::Fixed(w) if w.is_finite() && w >= 0.0 => Ok(w),
        Wants::Fixed(w) => Err(ClientError::BadWants {
            id: id.to_string(),
            wants: w,
        }),
    }
}

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder {
            servers: Vec::new(),
            client_id: None,
            fallback: Fallback::Pessimistic,
            min_refresh_interval: Duration::from_secs(1),
            rpc_timeout: Duration::from_secs(5),
            backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            metrics: None,
            clock: None,
        }
    }

    /// The client id sent to servers.
    pub fn client_id(&self) -> String {
        self.inner.shared.lock().core.client_id().to_string()
    }

    fn open(
        &self,
        id: &str,
        kind: Kind,
        priority: i64,
        wants: Wants,
        burst: Duration,
    ) -> Result<Arc<Shared>, ClientError> {
        check_id(id)?;
        let initial_wants = check_wants(id, wants)?;
        let shared = &self.inner.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        let now = shared.now();
        let mut st = shared.lock();
        if let Some(existing) = st.resources.get(id) {
            if existing.kind != kind {
                return Err(ClientError::KindMismatch {
                    id: id.to_string(),
                    existing: existing.kind,
                });
            }
            existing.handles.fetch_add(1, Ordering::AcqRel);
            return Ok(existing.clone());
        }
        // A release queued by a dropped handle must not reach the server
        // after the resource was opened again.
        st.to_release.retain(|r| r != id);
        st.core.add(id, priority, initial_wants, now);
        let initial = st
            .core
            .capacity(id, now)
            .unwrap_or((0.0, doorman_core::client::Mode::Pessimistic));
        let hist = shared.metrics.as_ref().map(|m| m.wait_histogram(id));
        let r = Arc::new(Shared::new(
            id.to_string(),
            kind,
            wants,
            burst,
            initial,
            Arc::downgrade(shared),
            hist,
        ));
        r.handles.store(1, Ordering::Release);
        st.resources.insert(id.to_string(), r.clone());
        drop(st);
        shared.wake.notify_one();
        Ok(r)
    }

    /// Opens (or shares) a rate resource: capacity in operations per second.
    pub fn rate_resource(&self, id: &str, opts: RateOptions) -> Result<RateResource, ClientError> {
        let shared = self.open(id, Kind::Rate, opts.priority, opts.wants, opts.burst)?;
        Ok(RateResource {
            shared: Handle(shared),
        })
    }

    /// Opens (or shares) a gauge resource: capacity in operations in flight.
    pub fn gauge_resource(
        &self,
        id: &str,
        opts: GaugeOptions,
    ) -> Result<GaugeResource, ClientError> {
        let shared = self.open(id, Kind::Gauge, opts.priority, opts.wants, Duration::ZERO)?;
        Ok(GaugeResource {
            shared: Handle(shared),
        })
    }

    /// The lease the client holds for a resource, if any.
    pub fn lease(&self, id: &str) -> Option<Lease> {
        self.inner.shared.lock().core.lease(id)
    }

    /// Stops the background task and releases every resource with
    /// ReleaseCapacity, all within the RPC deadline (plus a second). Never
    /// hangs, even with every server gone. Handles keep their last capacity.
    pub async fn close(&self) {
        self.inner.shared.closed.store(true, Ordering::Release);
        let _ = self.inner.stop.send(true);
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(mut task) = task {
            let limit = self.inner.rpc_timeout + Duration::from_secs(1);
            if tokio::time::timeout(limit, &mut task).await.is_err() {
                task.abort();
            }
        }
    }
}

fn grants(resp: &pb::GetCapacityResponse) -> Vec<GrantItem> {
    resp.response
        .iter()
        .map(|r| GrantItem {
            resource_id: r.resource_id.clone(),
            lease: doorman_proto::lease_from_wire(&r.gets),
            safe_capacity: r.safe_capacity,
        })
        .collect()
}

/// How often Auto wants are sampled while idle.
const AUTO_SAMPLE: Time = Time::from_millis(1000);

async fn run(
    shared: Arc<ClientShared>,
    mut conn: Connector,
    mut backoff: Backoff,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            break;
        }
        let (release, request, client_id) = {
            let now = shared.now();
            let instant = tokio::time::Instant::now();
            let mut guard = shared.lock();
            let st = &mut *guard;
            let release = std::mem::take(&mut st.to_release);
            for r in st.resources.values() {
                st.core.set_wants(&r.id, r.wants(instant), now);
            }
            (
                release,
                st.core.poll_request(now),
                st.core.client_id().to_string(),
            )
        };
        if !release.is_empty() {
            let req = pb::ReleaseCapacityRequest {
                client_id: client_id.clone(),
                resource_id: release,
            };
            tokio::select! {
                r = conn.release_capacity(req) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "ReleaseCapacity failed (ignored; the lease will expire)");
                    }
                }
                _ = stop.changed() => break,
            }
        }
        if let Some(items) = request {
            // The protocol allows 10 000 resources per request.
            for chunk in items.chunks(MAX_RESOURCES_PER_REQUEST) {
                let ids: Vec<String> = chunk.iter().map(|i| i.resource_id.clone()).collect();
                let req = pb::GetCapacityRequest {
                    client_id: client_id.clone(),
                    resource: chunk
                        .iter()
                        .map(|i| pb::ResourceRequest {
                            resource_id: i.resource_id.clone(),
                            priority: i.priority,
                            has: i.has.as_ref().map(doorman_proto::lease_to_wire),
                            wants: i.wants,
                        })
                        .collect(),
                };
                let r = tokio::select! {
                    r = conn.get_capacity(req) => r,
                    _ = stop.changed() => break,
                };
                let now = shared.now();
                let mut st = shared.lock();
                match r {
                    Ok(resp) => {
                        backoff.reset();
                        st.core.on_response(now, &ids, &grants(&resp));
                    }
                    Err(e) => {
                        let delay = backoff.next_delay();
                        tracing::warn!(error = %e, retry_in = ?delay, "GetCapacity failed");
                        st.core.on_failure(now, &ids, Time::from_duration(delay));
                    }
                }
            }
            if *stop.borrow() {
                break;
            }
        }
        let now = shared.now();
        let next = {
            let st = shared.lock();
            shared.publish(&st, now);
            let mut next = st.core.next_wakeup(now);
            if st
                .resources
                .values()
                .any(|r| r.lock().fixed_wants.is_none())
            {
                next = Some(next.map_or(now + AUTO_SAMPLE, |t| t.min(now + AUTO_SAMPLE)));
            }
            next
        };
        let sleep = next
            .map(|t| (t - now).to_duration())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.wake.notified() => {}
            _ = stop.changed() => {}
        }
    }
    // Shutting down: release everything still open, under the deadline.
    let (ids, client_id) = {
        let st = shared.lock();
        let mut ids: Vec<String> = st.core.resource_ids().map(str::to_string).collect();
        ids.extend(st.to_release.iter().cloned());
        (ids, st.core.client_id().to_string())
    };
    if !ids.is_empty() {
        let req = pb::ReleaseCapacityRequest {
            client_id,
            resource_id: ids,
        };
        let limit = conn.timeout();
        match tokio::time::timeout(limit, conn.release_capacity(req)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "ReleaseCapacity at close failed"),
            Err(_) => tracing::debug!("ReleaseCapacity at close timed out"),
        }
    }
}
