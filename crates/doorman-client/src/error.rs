//! The errors of the client API.
//!
//! Must not: carry anything but what the caller needs to act on.

use doorman_core::limits::{MAX_ID_BYTES, MAX_RESOURCE_ID_BYTES};

use crate::resource::Kind;

/// Errors of the client API.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `servers` was empty.
    #[error("no server addresses given")]
    NoServers,
    /// The client id is empty or longer than [`MAX_ID_BYTES`].
    #[error("client id must be 1 to {MAX_ID_BYTES} bytes, got {0} bytes")]
    BadClientId(usize),
    /// The client id contains control characters, which servers refuse.
    #[error("client id must not contain control characters")]
    ClientIdControlCharacters,
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
    /// `blocking::Client::connect` was called inside an async runtime.
    #[error("the blocking client cannot be used inside an async runtime; use the async API there")]
    InAsyncContext,
    /// The blocking client's runtime could not start.
    #[error("cannot start the client's runtime: {0}")]
    Runtime(String),
}
