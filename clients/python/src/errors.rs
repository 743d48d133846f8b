//! The Python exceptions raised by the bindings and the mapping of the Rust
//! client's errors onto them. The classes themselves are defined in Python
//! (`doorman_client/_errors.py`) so that they can have two bases
//! (`DeadlineExceeded` is a `TimeoutError`, `InvalidArgument` a
//! `ValueError`); they are imported lazily, the first time one is raised.
//!
//! Must not: decide when to raise (the callers do) or hold Python objects.

use std::time::Duration;

use doorman_client::{ClientError, TlsFileError};
use pyo3::PyErr;

pyo3::import_exception!(doorman_client._errors, DoormanError);
pyo3::import_exception!(doorman_client._errors, DeadlineExceeded);
pyo3::import_exception!(doorman_client._errors, ClientClosed);
pyo3::import_exception!(doorman_client._errors, InvalidArgument);
pyo3::import_exception!(doorman_client._errors, ConfigError);

/// Why a wait ended without its permit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stopped {
    /// The timeout given ran out.
    Deadline(Duration),
    /// The client was closed.
    Closed,
}

impl From<Stopped> for PyErr {
    fn from(s: Stopped) -> PyErr {
        match s {
            Stopped::Deadline(t) => DeadlineExceeded::new_err(format!(
                "no capacity within the timeout of {:.3} s",
                t.as_secs_f64()
            )),
            Stopped::Closed => closed(),
        }
    }
}

/// The error of any call on a closed client or its resources.
pub(crate) fn closed() -> PyErr {
    ClientClosed::new_err("the client is closed")
}

/// An argument that was refused before reaching the Rust client.
pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidArgument::new_err(msg.into())
}

/// The Rust client's errors as Python exceptions.
pub(crate) fn client_error(e: ClientError) -> PyErr {
    let msg = e.to_string();
    match e {
        ClientError::Closed => ClientClosed::new_err(msg),
        ClientError::NoServers
        | ClientError::BadClientId(_)
        | ClientError::ClientIdControlCharacters
        | ClientError::BadResourceId(_)
        | ClientError::BadWants { .. }
        | ClientError::KindMismatch { .. } => InvalidArgument::new_err(msg),
        // The bindings register no metrics; any future variant lands here.
        _ => DoormanError::new_err(msg),
    }
}

/// A TLS file that could not be used.
pub(crate) fn tls_error(e: TlsFileError) -> PyErr {
    ConfigError::new_err(e.to_string())
}
