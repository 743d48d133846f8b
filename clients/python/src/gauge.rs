//! The Python `GaugeResource` and `GaugePermit`: a handle on a gauge of
//! the Rust client (operations in flight), with blocking and asyncio marks
//! that take a timeout, and a permit that is a context manager.
//!
//! Must not: count permits itself; every permit is a Rust `GaugePermit`.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::args;
use crate::refusal::Refusal;
use crate::shared::Core;

/// A gauge resource: capacity is operations in flight, granted by the
/// servers and shared by every handle on the same id in this client.
///
/// Open it with Client.gauge_resource(). Its capacity is released on the
/// servers when the last handle on it is garbage collected or the client is
/// closed.
#[pyclass(frozen, module = "doorman_client", name = "GaugeResource")]
pub struct GaugeResource {
    core: Arc<Core>,
    inner: doorman_client::GaugeResource,
}

/// One operation in flight on a gauge, from mark() or try_mark(). Release
/// it with release(), at the end of a `with` block, or by dropping it.
#[pyclass(frozen, module = "doorman_client", name = "GaugePermit")]
pub struct GaugePermit {
    permit: Mutex<Option<doorman_client::GaugePermit>>,
}

impl GaugePermit {
    fn new(permit: doorman_client::GaugePermit) -> Self {
        GaugePermit {
            permit: Mutex::new(Some(permit)),
        }
    }

    fn take(&self) -> Option<doorman_client::GaugePermit> {
        self.permit.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

#[pymethods]
impl GaugePermit {
    /// Releases the permit; releasing it again does nothing.
    fn release(&self) {
        drop(self.take());
    }

    /// True once released.
    #[getter]
    fn released(&self) -> bool {
        self.permit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.release();
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.released() { "released" } else { "held" };
        format!("<doorman_client.GaugePermit {state}>")
    }
}

impl GaugeResource {
    pub(crate) fn new(core: Arc<Core>, inner: doorman_client::GaugeResource) -> Self {
        GaugeResource { core, inner }
    }
}

#[pymethods]
impl GaugeResource {
    /// Waits for a free permit and takes it. The GIL is released while
    /// waiting. Use the permit as a context manager:
    ///
    ///     with gauge.mark(timeout=1.0):
    ///         ...
    ///
    /// timeout: seconds to wait at most (None: as long as it takes; 0: only
    ///     if a permit is free now). Raises DeadlineExceeded (a
    ///     TimeoutError) when it runs out, having taken nothing.
    /// Raises ClientClosed if the client is or gets closed.
    #[pyo3(signature = (timeout=None))]
    fn mark(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<GaugePermit> {
        let timeout = args::timeout(timeout)?;
        let permit = self.core.block(py, timeout, self.inner.mark())?;
        Ok(GaugePermit::new(permit))
    }

    /// mark() for asyncio: an awaitable of the permit. Cancelling it takes
    /// nothing.
    #[pyo3(signature = (timeout=None))]
    fn mark_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = args::timeout(timeout)?;
        let inner = self.inner.clone();
        self.core.spawn(
            py,
            timeout,
            async move { GaugePermit::new(inner.mark().await) },
        )
    }

    /// Takes a permit if one is free now (never blocks); None otherwise.
    fn try_mark(&self) -> PyResult<Option<GaugePermit>> {
        self.core.check_open()?;
        Ok(self.inner.try_mark().map(GaugePermit::new))
    }

    /// Changes the number in flight asked for (None: estimate it from use).
    fn set_wants(&self, wants: Option<f64>) -> PyResult<()> {
        self.inner.set_wants(args::new_wants(wants)?);
        Ok(())
    }

    /// Permits in flight now (taken and not released) in this client.
    #[getter]
    fn in_flight(&self) -> u64 {
        self.inner.in_flight()
    }

    /// The resource id.
    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }

    /// The capacity applied now: permits in flight at most (whole permits
    /// count; 2.5 allows 2).
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

    /// The number in flight asked for now (fixed, or estimated from use).
    #[getter]
    fn wants(&self) -> f64 {
        self.inner.current_wants()
    }

    fn __repr__(&self) -> String {
        format!(
            "<doorman_client.GaugeResource {:?} capacity={} in_flight={} mode={}>",
            self.inner.id(),
            self.inner.capacity(),
            self.inner.in_flight(),
            self.inner.mode().name()
        )
    }
}
