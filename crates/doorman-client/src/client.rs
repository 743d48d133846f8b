//! `Client`: the application's handle on the bottom half. It opens
//! resources (shared per id, reference counted), reports the lease held,
//! and closes: the background task (`task.rs`) then releases everything
//! within the RPC deadline. Every RPC has a deadline; `close()` is bounded
//! too.
//!
//! Must not: do I/O itself (the background task does).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use doorman_core::client::Mode;
use doorman_core::limits::{id_length_problem, MAX_RESOURCE_ID_BYTES};
use doorman_core::Backoff;
use doorman_lease::Lease;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::connection::Connector;
use crate::error::ClientError;
use crate::gauge::{GaugeOptions, GaugeResource};
use crate::rate::{RateOptions, RateResource};
use crate::registry::ClientShared;
use crate::resource::{Handle, Kind, Owner, Shared, Wants};

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
    /// Starts the background task over `shared`.
    pub(crate) fn start(
        shared: Arc<ClientShared>,
        conn: Connector,
        backoff: Backoff,
        (rpc_timeout, lease_stream): (Duration, bool),
    ) -> Client {
        let (stop, stop_rx) = watch::channel(false);
        let streaming = crate::stream::Streaming::new(lease_stream);
        let run = crate::task::run(shared.clone(), conn, backoff, (streaming, stop_rx));
        let task = tokio::spawn(run);
        Client {
            inner: Arc::new(Inner {
                shared,
                stop,
                task: Mutex::new(Some(task)),
                rpc_timeout,
            }),
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
            .unwrap_or((0.0, Mode::Pessimistic));
        let metrics = shared.metrics.as_ref().map(|m| m.for_resource(id));
        let owner: Weak<dyn Owner> = Arc::downgrade(shared) as Weak<ClientShared>;
        let r = Arc::new(Shared::new(
            id.to_string(),
            kind,
            wants,
            burst,
            initial,
            owner,
            metrics,
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

    /// Whom the client talks to and how its last call went.
    pub fn connection(&self) -> crate::observe::ConnectionState {
        let c = self.inner.shared.connection.lock();
        c.unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The lease the client holds for a resource, if any.
    pub fn lease(&self, id: &str) -> Option<Lease> {
        self.inner.shared.lock().core.lease(id)
    }

    /// Stops the background task and releases every resource with
    /// ReleaseCapacity, all within the RPC deadline (plus a second). Never
    /// hangs, even with every server gone. Handles apply capacity 0 from
    /// then on, before anything is released: the server hands a released
    /// lease to others at once.
    pub async fn close(&self) {
        self.inner.shared.closed.store(true, Ordering::Release);
        // Waiters with a deadline learn at once that the client closed.
        for r in self.inner.shared.lock().resources.values() {
            r.publish((0.0, Mode::Pessimistic), None, None, None);
            r.notify.notify_waiters();
        }
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
