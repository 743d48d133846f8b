//! The registry of a client's open resources, shared by the `Client`
//! handle, the resources' handles and the background task: the client core
//! and the resources under one lock, the wake-up of the task, and what to
//! release on the server.
//!
//! Must not: do I/O (the background task does).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use doorman_core::client::{ClientCore, Mode};
use doorman_lease::Time;
use tokio::sync::Notify;

use crate::identity::Clock;
use crate::metrics::ClientMetrics;
use crate::observe::ConnectionState;
use crate::resource::{LeaseEnd, Owner, Shared};

/// What the client's handle, its resources' handles and its background
/// task share.
pub(crate) struct ClientShared {
    pub(crate) state: Mutex<ClientState>,
    /// Wakes the background task (a resource opened or released).
    pub wake: Notify,
    pub(crate) clock: Clock,
    pub(crate) metrics: Option<ClientMetrics>,
    pub(crate) closed: AtomicBool,
    /// The connection as the last call left it.
    pub(crate) connection: Mutex<ConnectionState>,
}

impl std::fmt::Debug for ClientShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientShared").finish_non_exhaustive()
    }
}

/// The client core and the open resources, under one lock.
pub(crate) struct ClientState {
    pub core: ClientCore,
    pub resources: HashMap<String, Arc<Shared>>,
    /// Resources whose last handle was dropped, to release on the server.
    pub to_release: Vec<String>,
}

impl ClientShared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now(&self) -> Time {
        (self.clock)()
    }

    /// Records how a call to `master` (as far as known) went.
    pub(crate) fn called(&self, master: Option<&str>, error: Option<String>) {
        let mut c = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        c.master = master.map(str::to_string);
        if error.is_none() {
            c.last_success = Some(crate::clock::wall());
        }
        c.last_error = error;
    }

    /// Applies the capacity the core says applies now to every resource.
    pub(crate) fn publish(&self, st: &ClientState, now: Time) {
        let instant = crate::clock::instant();
        // A closed client has released (or is releasing) its leases.
        let closed = self.closed.load(Ordering::Acquire);
        for (id, r) in &st.resources {
            if closed {
                r.set_shadow(false);
                r.publish((0.0, Mode::Pessimistic), None, None, None);
                continue;
            }
            if let Some((cap, mode)) = st.core.capacity(id, now) {
                let lease = st.core.lease(id);
                let expiry = lease.map(|l| l.expiry.as_millis());
                // The resource ends the lease itself when it ends, even if
                // this task is late to wake (a stopped process resumed).
                let end = lease
                    .filter(|l| mode == Mode::Lease && l.expiry > now)
                    .and_then(|l| {
                        let after = st.core.capacity(id, l.expiry)?;
                        let at = instant + (l.expiry - now).to_duration();
                        Some(LeaseEnd { at, after })
                    });
                r.set_shadow(st.core.shadow(id));
                r.publish((cap, mode), end, expiry, st.core.refusal(id));
                if let Some(m) = &r.metrics {
                    m.wants.set(st.core.wants(id).unwrap_or(0.0));
                    m.applied(cap, mode);
                }
            }
        }
    }
}

impl Owner for ClientShared {
    /// The last handle was dropped: the resource is removed and the
    /// background task releases it on the server.
    fn release(&self, shared: &Arc<Shared>) {
        let mut st = self.lock();
        if shared.handles.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let current = st
            .resources
            .get(&shared.id)
            .is_some_and(|s| Arc::ptr_eq(s, shared));
        if current {
            st.resources.remove(&shared.id);
            st.core.remove(&shared.id);
            st.to_release.push(shared.id.clone());
            if let Some(m) = &self.metrics {
                m.forget(&shared.id);
            }
        }
        drop(st);
        self.wake.notify_one();
    }

    fn wake(&self) {
        self.wake.notify_one();
    }

    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
