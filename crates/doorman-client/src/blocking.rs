//! The client for synchronous programs: the same calls as the async API,
//! blocking the calling thread, with the client running on an internal
//! runtime (one worker thread named `doorman-client`). Any number of
//! threads may wait at once, `spawn_blocking` threads included. Calling it
//! from an async task (where blocking would stall the runtime) is an error,
//! [`BlockingError::InAsyncContext`], never a panic.
//!
//! ```no_run
//! use doorman_client::{blocking, Client, RateOptions};
//! let client = blocking::Client::connect(Client::builder().servers(["127.0.0.1:6000"]))?;
//! let db = client.rate_resource("db/users", RateOptions::wants(100.0))?;
//! for _ in 0..1000 {
//!     db.wait()?; // at most the leased rate
//! }
//! client.close();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Must not: hold the async client's logic (it wraps it) or block inside
//! an async runtime.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;

use crate::{
    AcquireError, CapacityState, ClientBuilder, ClientError, GaugeOptions, GaugePermit, Mode,
    RateOptions, Wants,
};

/// What a blocking call can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockingError {
    /// Called from inside an async runtime: use the async API there.
    #[error(
        "doorman_client::blocking called from inside an async runtime; use the async API there"
    )]
    InAsyncContext,
    /// The acquisition failed (with a deadline: why).
    #[error(transparent)]
    Acquire(#[from] AcquireError),
}

/// The internal runtime; dropped without blocking (so dropping the last
/// handle is fine anywhere, even inside an async runtime).
#[derive(Debug)]
struct Rt(Option<Runtime>);

impl std::ops::Deref for Rt {
    type Target = Runtime;
    fn deref(&self) -> &Runtime {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for Rt {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Rt {
    /// Runs `fut` to completion on this thread. Inside an async execution
    /// context (a runtime's worker, where blocking would stall it) tokio
    /// refuses by panicking before it starts anything; that refusal is
    /// caught and returned as [`BlockingError::InAsyncContext`]. Elsewhere
    /// (plain threads, `spawn_blocking`) it simply runs.
    fn run<T>(&self, fut: impl std::future::Future<Output = T>) -> Result<T, BlockingError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Ok(self.block_on(fut));
        }
        let run = std::panic::AssertUnwindSafe(|| self.block_on(fut));
        std::panic::catch_unwind(run).map_err(|_| BlockingError::InAsyncContext)
    }
}

/// A client for synchronous code.
#[derive(Debug)]
pub struct Client {
    // Dropped before the runtime, so its drop can still release leases.
    inner: crate::Client,
    rt: Arc<Rt>,
}

impl Client {
    /// Builds the client on an internal runtime. Fails inside an async
    /// runtime or when the builder's settings are invalid.
    pub fn connect(builder: ClientBuilder) -> Result<Client, ClientError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("doorman-client")
            .enable_all()
            .build()
            .map_err(|e| ClientError::Runtime(e.to_string()))?;
        let rt = Rt(Some(rt));
        let inner = rt
            .run(builder.build())
            .map_err(|_| ClientError::InAsyncContext)??;
        Ok(Client {
            inner,
            rt: Arc::new(rt),
        })
    }

    /// The async client underneath.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// Opens a rate resource (see [`crate::Client::rate_resource`]).
    pub fn rate_resource(&self, id: &str, opts: RateOptions) -> Result<RateResource, ClientError> {
        let _guard = self.rt.enter();
        let inner = self.inner.rate_resource(id, opts)?;
        Ok(RateResource {
            inner,
            rt: self.rt.clone(),
        })
    }

    /// Opens a gauge resource (see [`crate::Client::gauge_resource`]).
    pub fn gauge_resource(
        &self,
        id: &str,
        opts: GaugeOptions,
    ) -> Result<GaugeResource, ClientError> {
        let _guard = self.rt.enter();
        let inner = self.inner.gauge_resource(id, opts)?;
        Ok(GaugeResource {
            inner,
            rt: self.rt.clone(),
        })
    }

    /// Releases every resource on the server and stops (see
    /// [`crate::Client::close`]). Does nothing inside an async runtime.
    pub fn close(&self) {
        let _ = self.rt.run(self.inner.close());
    }
}

/// A rate resource for synchronous code.
#[derive(Debug, Clone)]
pub struct RateResource {
    inner: crate::RateResource,
    rt: Arc<Rt>,
}

impl RateResource {
    /// Blocks for `n` permits, however long capacity takes.
    pub fn wait_n(&self, n: u32) -> Result<(), BlockingError> {
        self.rt.run(self.inner.wait_n(n))
    }

    /// Blocks for one permit, however long capacity takes.
    pub fn wait(&self) -> Result<(), BlockingError> {
        self.wait_n(1)
    }

    /// Blocks at most `timeout` for `n` permits; says why it got none.
    pub fn wait_n_timeout(&self, n: u32, timeout: Duration) -> Result<(), BlockingError> {
        Ok(self.rt.run(self.inner.wait_n_timeout(n, timeout))??)
    }

    /// Blocks at most `timeout` for one permit.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), BlockingError> {
        self.wait_n_timeout(1, timeout)
    }

    /// Takes one permit if available now. Never blocks.
    pub fn try_acquire(&self) -> bool {
        self.inner.try_acquire()
    }

    /// Takes `n` permits if available now. Never blocks.
    pub fn try_acquire_n(&self, n: u32) -> bool {
        self.inner.try_acquire_n(n)
    }

    /// The async resource underneath.
    pub fn as_async(&self) -> &crate::RateResource {
        &self.inner
    }
}

/// A gauge resource for synchronous code.
#[derive(Debug, Clone)]
pub struct GaugeResource {
    inner: crate::GaugeResource,
    rt: Arc<Rt>,
}

impl GaugeResource {
    /// Blocks for a permit, however long capacity takes.
    pub fn mark(&self) -> Result<GaugePermit, BlockingError> {
        self.rt.run(self.inner.mark())
    }

    /// Blocks at most `timeout` for a permit; says why it got none.
    pub fn mark_timeout(&self, timeout: Duration) -> Result<GaugePermit, BlockingError> {
        Ok(self.rt.run(self.inner.mark_timeout(timeout))??)
    }

    /// Takes a permit if one is free now. Never blocks.
    pub fn try_mark(&self) -> Option<GaugePermit> {
        self.inner.try_mark()
    }

    /// The async resource underneath.
    pub fn as_async(&self) -> &crate::GaugeResource {
        &self.inner
    }
}

/// The read-only calls both resources share.
macro_rules! read_calls {
    ($t:ty) => {
        impl $t {
            /// The capacity applied now.
            pub fn capacity(&self) -> f64 {
                self.inner.capacity()
            }

            /// Lease, which fallback, or refused.
            pub fn mode(&self) -> Mode {
                self.inner.mode()
            }

            /// What the server said about the last grant.
            pub fn note(&self) -> Option<String> {
                self.inner.note()
            }

            /// Capacity, lease expiry, mode and phase now.
            pub fn state(&self) -> CapacityState {
                self.inner.capacity_watch().borrow().clone()
            }

            /// Changes what is asked for.
            pub fn set_wants(&self, wants: Wants) {
                self.inner.set_wants(wants)
            }
        }
    };
}
read_calls!(RateResource);
read_calls!(GaugeResource);
