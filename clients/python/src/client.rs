//! The Python `Client`: builds the Rust client on a runtime of its own,
//! opens rate and gauge resources, and closes (also as a context manager,
//! sync or async).
//!
//! Must not: talk to servers or hold capacity itself (the Rust client
//! does); resources keep the shared `Core` alive, not the Python object.

use std::path::PathBuf;
use std::sync::Arc;

use doorman_client::{BearerToken, ClientTls, GaugeOptions, RateOptions};
use pyo3::prelude::*;

use crate::args;
use crate::errors::{client_error, invalid, tls_error, DoormanError};
use crate::gauge::GaugeResource;
use crate::rate::RateResource;
use crate::shared::{new_runtime, Core};

/// A Doorman client: the connection to the servers of one node, sharing
/// capacity for the resources it opens.
///
/// Client(servers, client_id=None, fallback="pessimistic",
///        rpc_timeout=5.0, tls_ca=None, tls_cert=None, tls_key=None,
///        token=None)
///
/// servers: the addresses ("host:port") of the node's servers; the client
///     finds the master among them. Connecting is lazy: the client starts
///     even if no server is up yet.
/// client_id: the id sent to the servers (default "<hostname>:<pid>:<n>").
/// fallback: what capacity applies when a lease runs out and no server can
///     be reached: "pessimistic" (0; also None), "optimistic" (what the
///     resource wants), or ("safe", default) (the safe capacity the server
///     last sent, else default).
/// rpc_timeout: deadline of every RPC, in seconds.
/// tls_ca: PEM CA file; connects over TLS when given.
/// tls_cert, tls_key: PEM client certificate and key for mutual TLS (both
///     or neither; need tls_ca).
/// token: a bearer token sent with every RPC (for servers started with
///     --auth-tokens; use it with TLS).
///
/// Use it as a context manager, or call close(), to release the capacity
/// held on the servers at once rather than when the leases expire.
#[pyclass(frozen, module = "doorman_client", name = "Client")]
pub struct PyClient {
    core: Arc<Core>,
}

fn tls(
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> PyResult<Option<ClientTls>> {
    match ca {
        Some(ca) => ClientTls::from_files(&ca, cert.as_deref(), key.as_deref())
            .map(Some)
            .map_err(tls_error),
        None if cert.is_some() || key.is_some() => Err(invalid("tls_cert and tls_key need tls_ca")),
        None => Ok(None),
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(
        signature = (
            servers, client_id=None, fallback=None, rpc_timeout=5.0,
            tls_ca=None, tls_cert=None, tls_key=None, token=None, lease_stream=true
        ),
        text_signature = "(servers, client_id=None, fallback='pessimistic', rpc_timeout=5.0, \
                          tls_ca=None, tls_cert=None, tls_key=None, token=None, lease_stream=True)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        servers: Vec<String>,
        client_id: Option<String>,
        fallback: Option<&Bound<'_, PyAny>>,
        rpc_timeout: f64,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        token: Option<String>,
        lease_stream: bool,
    ) -> PyResult<Self> {
        let mut builder = doorman_client::Client::builder()
            .servers(servers)
            .lease_stream(lease_stream)
            .rpc_timeout(args::seconds("rpc_timeout", rpc_timeout)?);
        if let Some(f) = fallback {
            builder = builder.fallback(args::fallback(f)?);
        }
        if let Some(id) = client_id {
            builder = builder.client_id(id);
        }
        if let Some(t) = tls(tls_ca, tls_cert, tls_key)? {
            builder = builder.tls(t);
        }
        if let Some(t) = token {
            builder =
                builder.bearer_token(BearerToken::new(&t).map_err(|e| invalid(e.to_string()))?);
        }
        let rt = new_runtime().map_err(|e| {
            DoormanError::new_err(format!("cannot start the client's runtime: {e}"))
        })?;
        let client = py
            .detach(|| rt.block_on(builder.build()))
            .map_err(client_error)?;
        Ok(PyClient {
            core: Arc::new(Core::new(rt, client)),
        })
    }

    /// The client id sent to the servers.
    #[getter]
    fn client_id(&self) -> String {
        self.core.client.client_id()
    }

    /// True once close() was called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.is_closed()
    }

    /// Opens a rate resource (capacity in operations per second), or shares
    /// the one already open under this id.
    ///
    /// wants: the rate to ask for; None estimates it from use.
    /// priority: the priority band (higher is more important).
    #[pyo3(signature = (id, wants=None, priority=0))]
    fn rate_resource(&self, id: &str, wants: Option<f64>, priority: i64) -> PyResult<RateResource> {
        self.core.check_open()?;
        let opts = RateOptions {
            wants: args::wants(wants),
            ..RateOptions::default()
        }
        .priority(priority);
        let inner = self
            .core
            .client
            .rate_resource(id, opts)
            .map_err(client_error)?;
        Ok(RateResource::new(self.core.clone(), inner))
    }

    /// Opens a gauge resource (capacity in operations in flight), or shares
    /// the one already open under this id.
    ///
    /// wants: the number in flight to ask for; None estimates it from use.
    /// priority: the priority band (higher is more important).
    #[pyo3(signature = (id, wants=None, priority=0))]
    fn gauge_resource(
        &self,
        id: &str,
        wants: Option<f64>,
        priority: i64,
    ) -> PyResult<GaugeResource> {
        self.core.check_open()?;
        let opts = GaugeOptions {
            wants: args::wants(wants),
            priority,
        };
        let inner = self
            .core
            .client
            .gauge_resource(id, opts)
            .map_err(client_error)?;
        Ok(GaugeResource::new(self.core.clone(), inner))
    }

    /// Closes the client: every wait in progress raises ClientClosed, and
    /// the capacity held is released on the servers (within the RPC
    /// deadline plus a second, even with every server gone). Idempotent.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.core.close_blocking());
    }

    /// close() as an awaitable, for asyncio code.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let done = self.core.close_future();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            done.await;
            Ok(())
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me: Py<Self> = slf.unbind();
        pyo3_async_runtimes::tokio::future_into_py(py, async move { Ok(me) })
    }

    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let done = self.core.close_future();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            done.await;
            Ok(false)
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<doorman_client.Client id={:?}{}>",
            self.core.client.client_id(),
            if self.core.is_closed() { " closed" } else { "" }
        )
    }
}
