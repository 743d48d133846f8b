//! What an intermediate server knows about its link to the parent, for
//! `/readyz`, `/metrics` and the status pages: whether the last call
//! succeeded, when one last did, and the last error. Written by the
//! upstream task after each call; read by the HTTP boundary.
//!
//! Must not: decide anything about leases (the core does).

use std::sync::Mutex;

use doorman_lease::Time;

/// The link's state (the status pages' type).
pub use doorman_core::server::LinkStatus as LinkState;

/// The link, shared by the upstream task and the pages.
#[derive(Debug, Default)]
pub struct ParentLink {
    state: Mutex<LinkState>,
}

impl ParentLink {
    /// The parent answered, at `now` (the server's clock).
    pub fn succeeded(&self, now: Time) {
        let mut s = self.lock();
        s.calls += 1;
        s.failing = false;
        s.last_error = None;
        s.last_success_unix = Some(now.as_secs_f64());
    }

    /// A call failed with `error`.
    pub fn failed(&self, error: String) {
        let mut s = self.lock();
        s.calls += 1;
        s.failing = true;
        s.last_error = Some(error);
    }

    /// A copy of the state.
    pub fn get(&self) -> LinkState {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why the link stops the server from being ready: it never got an
/// answer and its last call failed.
pub fn unready(link: &LinkState) -> Option<String> {
    match (&link.last_success_unix, &link.last_error) {
        (None, Some(e)) if link.failing => {
            Some(format!("the parent has not answered since start: {e}"))
        }
        _ => None,
    }
}
