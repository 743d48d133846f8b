//! Handles of a resource: the counted reference `RateResource` and
//! `GaugeResource` hold, the owner told when the last one is dropped, and
//! their read-only accessors (written once, as a macro).
//!
//! Must not: hold state of its own beyond the reference count.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Shared;

/// The read-only accessors of `RateResource` and `GaugeResource`, written
/// once; `$unit` names what the capacity counts.
macro_rules! handle_accessors {
    ($unit:literal) => {
        /// The resource id.
        pub fn id(&self) -> &str {
            &self.shared.id
        }

        #[doc = concat!("The capacity applied now (", $unit, ").")]
        pub fn capacity(&self) -> f64 {
            self.shared.capacity()
        }

        /// Lease, which fallback, or refused by the server.
        pub fn mode(&self) -> doorman_core::client::Mode {
            self.shared.mode()
        }

        /// Capacity, lease expiry, mode and phase (leased, learning-zero,
        /// fallback, refused), sent whenever one of them changes.
        pub fn capacity_watch(
            &self,
        ) -> tokio::sync::watch::Receiver<crate::observe::CapacityState> {
            self.shared.subscribe()
        }

        /// The capacity state now, then every change of the capacity or
        /// the mode, in order, each dated when it applied (`since`). The
        /// watch of `capacity_watch()` holds only the latest state, so a
        /// watcher that wakes after two changes sees the second alone;
        /// this sees both. More than [`CHANGES_KEPT`](crate::CHANGES_KEPT)
        /// changes behind, it misses the oldest and is told how many
        /// (`RecvError::Lagged`). A renewal at the same capacity is no
        /// change.
        pub fn capacity_changes(&self) -> crate::CapacityChanges {
            self.shared.changes()
        }

        /// Why the server refuses the resource, while it does (its access
        /// rules, an invalid field), as it said in the refusal's details.
        pub fn refusal(&self) -> Option<doorman_core::client::Refused> {
            self.shared.refusal()
        }

        /// Whether the server serves the resource in shadow mode: its
        /// acquisitions never wait or fail for capacity (they may still
        /// fail for a refusal or a closed client); each that would have
        /// is counted in [`would_refuse`](Self::would_refuse). False until
        /// the first grant.
        pub fn shadow(&self) -> bool {
            self.shared.shadow()
        }

        /// How many acquisitions shadow mode let through that would have
        /// waited or been refused (also
        /// `doorman_client_shadow_would_refuse_total`).
        pub fn would_refuse(&self) -> u64 {
            self.shared.would_refuse()
        }

        /// Why the capacity may be small, as the server said with its last
        /// grant (e.g. "learning mode, 42 s left", "no valid lease from
        /// the parent"); none from an original Doorman server.
        pub fn note(&self) -> Option<String> {
            self.shared.note()
        }
    };
}
pub(crate) use handle_accessors;

/// Who registered a resource: told when its last handle is dropped.
pub(crate) trait Owner: Send + Sync {
    /// A handle of `shared` was dropped; the owner decrements the count
    /// under its own lock and forgets the resource at zero.
    fn release(&self, shared: &Arc<Shared>);
    /// Something the owner's background task acts on changed (wants).
    fn wake(&self);
    /// The owner was closed.
    fn closed(&self) -> bool;
}

/// The owner of a detached resource (limiter tests): nobody.
#[cfg(test)]
pub(super) struct NoOwner;

#[cfg(test)]
impl Owner for NoOwner {
    fn release(&self, _: &Arc<Shared>) {}
    fn wake(&self) {}
    fn closed(&self) -> bool {
        false
    }
}

/// A counted reference to a resource: cloning retains it, dropping the last
/// one releases it on the server. Shared by `RateResource` and
/// `GaugeResource`.
#[derive(Debug)]
pub(crate) struct Handle(pub std::sync::Arc<Shared>);

impl Clone for Handle {
    fn clone(&self) -> Self {
        self.0.handles.fetch_add(1, Ordering::AcqRel);
        Handle(self.0.clone())
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(owner) = self.0.client.upgrade() {
            owner.release(&self.0);
        }
    }
}

impl std::ops::Deref for Handle {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}
