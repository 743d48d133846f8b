//! Why an acquisition with a deadline failed ([`AcquireError`]), shared by
//! the resources, the blocking API and the tower layer.
//!
//! Must not: depend on the resources (they depend on it).

/// Why an acquisition with a deadline (`wait_timeout`, `wait_until`,
/// `mark_timeout`, …) did not get its permits. A resource stays open while
/// any handle to it lives, so there is no "resource closed" case: a waiter
/// holds a handle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcquireError {
    /// The deadline passed before enough capacity was available.
    #[error("resource {resource:?}: no capacity before the deadline")]
    Deadline {
        /// The resource.
        resource: String,
    },
    /// The server's access rules do not let this client acquire the
    /// resource (PERMISSION_DENIED); asked again about once a minute.
    #[error("resource {resource:?}: permission denied: {reason}")]
    PermissionDenied {
        /// The resource.
        resource: String,
        /// Why, for people (`Refused::describe`; the typed reason is the
        /// handle's `refusal()`).
        reason: String,
    },
    /// The server refused the request for the resource as invalid
    /// (INVALID_ARGUMENT).
    #[error("resource {resource:?}: invalid: {reason}")]
    InvalidResource {
        /// The resource.
        resource: String,
        /// Why, for people (the field and its problem).
        reason: String,
    },
    /// The client was closed.
    #[error("resource {resource:?}: the client is closed")]
    ClientClosed {
        /// The resource.
        resource: String,
    },
}

/// `timeout` from now; a timeout too long to add (`Duration::MAX` as
/// "forever") is a deadline a century away instead of a panic.
pub(crate) fn deadline_after(timeout: std::time::Duration) -> tokio::time::Instant {
    let now = crate::clock::instant();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + std::time::Duration::from_secs(100 * 365 * 86_400))
}
