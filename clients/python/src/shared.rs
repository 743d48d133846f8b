//! `Core`: what a Python `Client` and every resource it opened share — the
//! Rust client, the tokio runtime it runs on (owned here, never the
//! user's), and whether it was closed. Also the two bridges from Python to
//! the Rust futures: [`Core::block`] (a blocking wait with the GIL released,
//! a timeout, closing and Ctrl-C honoured) and [`Core::spawn`] (an asyncio
//! awaitable through pyo3-async-runtimes).
//!
//! Must not: implement any lease, refresh or limiter logic (the Rust client
//! does), or let a task on the runtime own the `Core` (dropping it there
//! would drop the runtime from inside itself).

use std::future::Future;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::errors::{closed, Stopped};

/// How long a blocking wait runs without the GIL before it looks for a
/// pending signal (Ctrl-C) and comes back.
const SLICE: Duration = Duration::from_millis(100);

/// Worker threads of a client's runtime: its background task (RPCs,
/// timers) and the asyncio waits; blocking waits run on the caller's thread.
const WORKERS: usize = 2;

pub(crate) struct Core {
    /// Some until dropped.
    rt: Option<Runtime>,
    handle: Handle,
    pub client: doorman_client::Client,
    closed: watch::Sender<bool>,
}

/// A task aborted when the awaitable that waits for it is dropped (an
/// asyncio task cancelled): its permit, if it got one, is dropped with it.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A small multi-thread runtime for one client.
pub(crate) fn new_runtime() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("doorman-client")
        .enable_all()
        .build()
}

impl Core {
    /// Wraps a client built on `rt`.
    pub fn new(rt: Runtime, client: doorman_client::Client) -> Core {
        Core {
            handle: rt.handle().clone(),
            rt: Some(rt),
            client,
            closed: watch::Sender::new(false),
        }
    }

    /// True once `close` was called.
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// ClientClosed if closed.
    pub fn check_open(&self) -> PyResult<()> {
        if self.is_closed() {
            return Err(closed());
        }
        Ok(())
    }

    /// Marks the client closed (waking every wait with ClientClosed), then
    /// releases its resources on the server, bounded by the RPC deadline
    /// plus a second. Idempotent. The caller releases the GIL.
    pub fn close_blocking(&self) {
        self.closed.send_replace(true);
        self.handle.block_on(self.client.close());
    }

    /// `close_blocking` for asyncio: a future to run on any runtime.
    pub fn close_future(&self) -> impl Future<Output = ()> + Send + 'static {
        self.closed.send_replace(true);
        let client = self.client.clone();
        let task = self.handle.spawn(async move { client.close().await });
        async move {
            let _ = task.await;
        }
    }

    /// `fut` raced against closing: None if the client closed first.
    fn guarded<F: Future>(&self, fut: F) -> impl Future<Output = Option<F::Output>> {
        let mut rx = self.closed.subscribe();
        async move {
            tokio::select! {
                biased;
                v = fut => Some(v),
                _ = rx.wait_for(|c| *c) => None,
            }
        }
    }

    /// Runs `fut` on the calling thread with the GIL released, until it
    /// completes, `timeout` runs out (DeadlineExceeded), the client is
    /// closed (ClientClosed) or a signal handler raises (KeyboardInterrupt).
    /// On any of those `fut` is dropped, which takes nothing.
    pub fn block<F>(&self, py: Python<'_>, timeout: Option<Duration>, fut: F) -> PyResult<F::Output>
    where
        F: Future + Send,
        F::Output: Send,
    {
        self.check_open()?;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let fut = self.guarded(fut);
        let mut fut = std::pin::pin!(fut);
        loop {
            let slice = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
                None => SLICE,
            };
            let fut = fut.as_mut();
            let out = py.detach(|| {
                self.handle
                    .block_on(async move { tokio::time::timeout(slice, fut).await })
            });
            match out {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => return Err(Stopped::Closed.into()),
                Err(_) => {
                    if let (Some(d), Some(t)) = (deadline, timeout) {
                        if Instant::now() >= d {
                            return Err(Stopped::Deadline(t).into());
                        }
                    }
                    py.check_signals()?;
                }
            }
        }
    }

    /// Runs `fut` as a task on this client's runtime and returns an asyncio
    /// awaitable of its output, with the same timeout and closing rules as
    /// [`Core::block`]. Cancelling the awaitable aborts the task.
    pub fn spawn<'py, F, T>(
        &self,
        py: Python<'py>,
        timeout: Option<Duration>,
        fut: F,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        F: Future<Output = T> + Send + 'static,
        T: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        self.check_open()?;
        let fut = self.guarded(fut);
        let task = self.handle.spawn(async move {
            let out = match timeout {
                Some(t) => tokio::time::timeout(t, fut)
                    .await
                    .map_err(|_| Stopped::Deadline(t))?,
                None => fut.await,
            };
            out.ok_or(Stopped::Closed)
        });
        let mut task = AbortOnDrop(task);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            match (&mut task.0).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(stopped)) => Err(stopped.into()),
                // Aborted: the runtime is going away with the client.
                Err(_) => Err(closed()),
            }
        })
    }
}

impl Drop for Core {
    /// A client dropped without `close()`: it is closed on a thread of its
    /// own (the garbage collector must not wait for the servers), which
    /// then drops the runtime. A closed client's runtime is shut down here
    /// without waiting, which is allowed on any thread.
    fn drop(&mut self) {
        let Some(rt) = self.rt.take() else { return };
        if self.is_closed() {
            rt.shutdown_background();
            return;
        }
        let client = self.client.clone();
        let closer = std::thread::Builder::new()
            .name("doorman-client-close".into())
            .spawn(move || {
                rt.block_on(client.close());
                drop(rt);
            });
        if let Err(e) = closer {
            eprintln!("doorman_client: cannot close a dropped client in the background: {e}");
        }
    }
}
