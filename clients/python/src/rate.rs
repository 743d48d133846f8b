//! The Python `RateResource`: a handle on a rate-limited resource of the
//! Rust client (its token bucket), with blocking and asyncio waits that
//! take a timeout.
//!
//! Must not: limit anything itself; every permit comes from the Rust
//! `RateResource`.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::args;
use crate::refusal::Refusal;
use crate::shared::Core;

/// A rate-limited resource: capacity is operations per second, granted by
/// the servers and shared by every handle on the same id in this client.
///
/// Open it with Client.rate_resource(). Its capacity is released on the
/// servers when the last handle on it is garbage collected or the client is
/// closed.
#[pyclass(frozen, module = "doorman_client", name = "RateResource")]
pub struct RateResource {
    core: Arc<Core>,
    inner: doorman_client::RateResource,
}

impl RateResource {
    pub(crate) fn new(core: Arc<Core>, inner: doorman_client::RateResource) -> Self {
        RateResource { core, inner }
    }
}

#[pymethods]
impl RateResource {
    /// Waits until n permits are available, then takes them. The GIL is
    /// released while waiting.
    ///
    /// timeout: seconds to wait at most (None: as long as it takes; 0: only
    ///     if the permits are there now). Raises DeadlineExceeded (a
    ///     TimeoutError) when it runs out, having taken nothing.
    /// Raises ClientClosed if the client is or gets closed.
    #[pyo3(signature = (n=1, timeout=None))]
    fn wait(&self, py: Python<'_>, n: i64, timeout: Option<f64>) -> PyResult<()> {
        let n = args::permits(n)?;
        let timeout = args::timeout(timeout)?;
        self.core.block(py, timeout, self.inner.wait_n(n))
    }

    /// wait() for asyncio: an awaitable that completes when the n permits
    /// are taken. Cancelling it takes nothing.
    #[pyo3(signature = (n=1, timeout=None))]
    fn wait_async<'py>(
        &self,
        py: Python<'py>,
        n: i64,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = args::permits(n)?;
        let timeout = args::timeout(timeout)?;
        let inner = self.inner.clone();
        self.core
            .spawn(py, timeout, async move { inner.wait_n(n).await })
    }

    /// Takes n permits if they are available now; never blocks.
    #[pyo3(signature = (n=1))]
    fn try_acquire(&self, n: i64) -> PyResult<bool> {
        let n = args::permits(n)?;
        self.core.check_open()?;
        Ok(self.inner.try_acquire_n(n))
    }

    /// Changes the rate asked for (None: estimate it from use). A change of
    /// more than 10 % is sent to the servers early.
    fn set_wants(&self, wants: Option<f64>) -> PyResult<()> {
        self.inner.set_wants(args::new_wants(wants)?);
        Ok(())
    }

    /// The resource id.
    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }

    /// The capacity applied now, in operations per second.
    #[getter]
    fn capacity(&self) -> f64 {
        self.inner.capacity()
    }

    /// Where the capacity comes from: "lease" (granted by a server), the
    /// fallback applied without one ("pessimistic", "optimistic", "safe"),
    /// or "refused" while the server refuses the resource.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode().name()
    }

    /// What the server said about its last grant, if anything (e.g.
    /// "learning mode, 42 s left").
    #[getter]
    fn note(&self) -> Option<String> {
        self.inner.note()
    }

    /// True while the server serves the resource in shadow mode: nothing
    /// waits or is refused for capacity; what would have been is counted
    /// in would_refuse.
    #[getter]
    fn shadow(&self) -> bool {
        self.inner.shadow()
    }

    /// Acquisitions shadow mode let through that would have waited or
    /// been refused.
    #[getter]
    fn would_refuse(&self) -> u64 {
        self.inner.would_refuse()
    }

    /// Why the server refuses the resource while mode is "refused" (its
    /// access rules, an invalid field), else None.
    #[getter]
    fn refusal(&self) -> Option<Refusal> {
        let why = self.inner.refusal()?;
        Some(Refusal::new(self.inner.id(), &why))
    }

    /// The rate asked for now (fixed, or estimated from use).
    #[getter]
    fn wants(&self) -> f64 {
        self.inner.current_wants()
    }

    fn __repr__(&self) -> String {
        format!(
            "<doorman_client.RateResource {:?} capacity={} mode={}>",
            self.inner.id(),
            self.inner.capacity(),
            self.inner.mode().name()
        )
    }
}
