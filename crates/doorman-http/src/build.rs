//! Where whole-server pages (`/metrics`, the status pages) are built: on a
//! thread of their own at a lower CPU priority, at most
//! [`MAX_CONCURRENT_BUILDS`] at a time, so that building a page of 100 000
//! resources (about 0.13 s of CPU and 30 MB of text, see BENCHMARKS.md)
//! yields the CPU to the RPCs being served and a burst of scrapes cannot
//! multiply that memory. Requests over the limit wait their turn.
//! `/metrics` is built at most once per [`METRICS_MAX_AGE`]: scrapes
//! closer together share the last page, so a scrape loop cannot keep a
//! sweep of every resource running against the RPCs.
//!
//! Must not: run a build on an async worker, or hold the core lock itself
//! (the builds go through `ServerState`'s stepwise reads).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Bytes;
use axum::http::StatusCode;
use tokio::sync::{Mutex, Semaphore};

use doorman_state::ServerState;

/// Pages built at once; more wait.
pub const MAX_CONCURRENT_BUILDS: usize = 2;

/// How old a `/metrics` page may be when it is served again instead of
/// being rebuilt (Prometheus scrapes every 10 s or more).
pub const METRICS_MAX_AGE: Duration = Duration::from_secs(1);

/// How much nicer than the server's other threads a build thread is
/// (Linux nice values are per thread).
const NICENESS: i32 = 10;

/// A page and when it was built.
type LastPage = Option<(Instant, Bytes)>;

/// The page builder of one HTTP boundary.
#[derive(Debug, Clone)]
pub struct Builder {
    state: Arc<ServerState>,
    permits: Arc<Semaphore>,
    /// The last `/metrics` page and when it was built.
    metrics: Arc<Mutex<LastPage>>,
}

impl Builder {
    /// A builder reading `state`.
    pub fn new(state: Arc<ServerState>) -> Self {
        Builder {
            state,
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT_BUILDS)),
            metrics: Arc::default(),
        }
    }

    /// The `/metrics` page: the last one if it is younger than
    /// [`METRICS_MAX_AGE`], else a new build (concurrent scrapes wait for
    /// it and share it).
    pub async fn metrics_page(&self) -> Result<Bytes, StatusCode> {
        let mut last = self.metrics.lock().await;
        if let Some((at, page)) = last.as_ref() {
            if doorman_net::clock::since(*at) < METRICS_MAX_AGE {
                return Ok(page.clone());
            }
        }
        let page = Bytes::from(self.build(|state| state.metrics_text()).await?);
        *last = Some((doorman_net::clock::instant(), page.clone()));
        Ok(page)
    }

    /// The server state, for cheap reads on the async worker.
    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// Runs `f` on a low-priority thread of its own once a permit is free.
    pub async fn build<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ServerState) -> T + Send + 'static,
    ) -> Result<T, StatusCode> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(internal)?;
        let state = self.state.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("doorman-page".into())
            .spawn(move || {
                lower_priority();
                let _ = tx.send(f(&state));
                drop(permit);
            })
            .map_err(internal)?;
        rx.await.map_err(internal)
    }
}

fn internal<E>(_: E) -> StatusCode {
    StatusCode::INTERNAL_SERVER_ERROR
}

/// Lowers the calling thread's CPU priority (best effort: a failure only
/// means the page competes with RPCs at the normal priority).
fn lower_priority() {
    let current = rustix::process::getpriority_process(None).unwrap_or(0);
    if let Err(e) = rustix::process::setpriority_process(None, current + NICENESS) {
        tracing::debug!("could not lower the page thread's priority: {e}");
    }
}
