//! What an application can watch: per resource, its capacity, lease expiry
//! and phase ([`CapacityState`], through `capacity_watch()`, the latest,
//! and `capacity_changes()`, every change); per client, its connection
//! ([`ConnectionState`]).
//!
//! Must not: decide anything (the core does) or do I/O.

use std::time::{Instant, SystemTime};

use doorman_core::client::Mode;
use doorman_core::server::GrantNote;

/// Where a resource's capacity comes from now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// A valid lease from the server.
    Leased,
    /// A lease of capacity 0 because the server is in learning mode (after
    /// it became master), for about this many more seconds.
    LearningZero {
        /// Seconds left, as the server said with the grant.
        seconds_left: f64,
    },
    /// No valid lease: the client's fallback applies (which one: the mode).
    Fallback,
    /// The server refuses the resource (its access rules, an invalid
    /// request); see the resource's `wait_timeout` error for why.
    Refused,
}

/// A resource's capacity as the application sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityState {
    /// The capacity applied now.
    pub capacity: f64,
    /// When the lease it comes from expires (none in fallback or refused).
    pub lease_expiry: Option<SystemTime>,
    /// Lease, which fallback, or refused.
    pub mode: Mode,
    /// The phase, derived from the mode and the server's note.
    pub phase: Phase,
    /// What the server said about the grant, if anything.
    pub note: Option<String>,
    /// Since when its capacity (and mode) apply: when the resource applied
    /// them (a lease's end, when it ran out); a renewal at the same
    /// capacity keeps the time. A watcher woken late, after several
    /// changes, still knows when the capacity it reads took effect.
    pub since: Instant,
}

impl CapacityState {
    /// The state of a resource with `capacity` in `mode`, its lease's
    /// expiry (ms since the epoch) and the server's note.
    pub(crate) fn new(
        capacity: f64,
        mode: Mode,
        expiry_ms: Option<i64>,
        note: Option<String>,
        since: Instant,
    ) -> Self {
        let learning = note.as_deref().and_then(GrantNote::parse);
        let phase = match (mode, learning) {
            (Mode::Refused, _) => Phase::Refused,
            (Mode::Lease, Some(GrantNote::Learning { seconds_left })) if capacity == 0.0 => {
                Phase::LearningZero { seconds_left }
            }
            (Mode::Lease, _) => Phase::Leased,
            _ => Phase::Fallback,
        };
        let lease_expiry = (mode == Mode::Lease)
            .then_some(expiry_ms)
            .flatten()
            .and_then(|ms| u64::try_from(ms).ok())
            .map(|ms| SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms));
        CapacityState {
            capacity,
            lease_expiry,
            mode,
            phase,
            note,
            since,
        }
    }

    /// The same state, whenever each began (`since` aside).
    pub(crate) fn same_as(&self, other: &CapacityState) -> bool {
        (
            self.capacity,
            self.lease_expiry,
            self.mode,
            self.phase,
            &self.note,
        ) == (
            other.capacity,
            other.lease_expiry,
            other.mode,
            other.phase,
            &other.note,
        )
    }
}

/// A client's connection to its server node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionState {
    /// The server believed to be the master, if any.
    pub master: Option<String>,
    /// When a call last succeeded.
    pub last_success: Option<SystemTime>,
    /// The last call's error, if it failed.
    pub last_error: Option<String>,
}
