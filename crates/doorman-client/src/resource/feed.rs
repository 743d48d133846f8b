//! What a resource tells its watchers: the latest state (a watch, for
//! `capacity_watch()`) and every change of capacity or mode in order (a
//! broadcast, for `capacity_changes()`), each dated when it applied.
//!
//! Must not: decide what the state is (the resource's `publish` and
//! `check_end` do).

use tokio::sync::{broadcast, watch};

use crate::observe::CapacityState;

/// How many changes a `capacity_changes()` receiver may fall behind
/// before it misses the oldest (and is told how many).
pub const CHANGES_KEPT: usize = 64;

/// The watch and the broadcast of one resource.
#[derive(Debug)]
pub(crate) struct Feed {
    latest: watch::Sender<CapacityState>,
    changes: broadcast::Sender<CapacityState>,
}

impl Feed {
    /// A feed whose watchers first see `initial`.
    pub fn new(initial: CapacityState) -> Self {
        Feed {
            latest: watch::Sender::new(initial),
            changes: broadcast::Sender::new(CHANGES_KEPT),
        }
    }

    /// Tells the watchers `state`, if it differs from what they have
    /// (whenever it began). Its `since` is when its capacity and mode took
    /// effect: a renewal at the same capacity keeps the earlier time, so a
    /// watcher that wakes after a lowering and the renewal behind it still
    /// learns when the lowering applied. A change of capacity or mode also
    /// goes to every `changes()` receiver, sent under the watch's lock so
    /// that they see the changes in the order the watch took them.
    pub fn send(&self, mut state: CapacityState) {
        self.latest.send_if_modified(|s| {
            if s.same_as(&state) {
                return false;
            }
            if (s.capacity, s.mode) == (state.capacity, state.mode) {
                state.since = s.since;
            } else {
                // No receiver is no error: nobody asked for every change.
                let _ = self.changes.send(state.clone());
            }
            *s = state;
            true
        });
    }

    /// The state watchers have now.
    pub fn latest(&self) -> CapacityState {
        self.latest.borrow().clone()
    }

    /// A receiver of the latest state.
    pub fn subscribe(&self) -> watch::Receiver<CapacityState> {
        self.latest.subscribe()
    }

    /// A receiver of every change from now on.
    pub fn changes(&self) -> broadcast::Receiver<CapacityState> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use doorman_core::client::Mode;
    use std::time::{Duration, Instant};

    fn state(capacity: f64, expiry_ms: i64, since: Instant) -> CapacityState {
        CapacityState::new(capacity, Mode::Lease, Some(expiry_ms), None, since)
    }

    #[test]
    fn every_change_reaches_a_receiver_that_the_watch_coalesces() {
        let t0 = crate::clock::instant().into_std();
        let f = Feed::new(state(0.0, 0, t0));
        let mut watch = f.subscribe();
        let mut all = f.changes();
        let at = |ms| t0 + Duration::from_millis(ms);
        f.send(state(0.279, 1_000, at(1)));
        f.send(state(0.269, 1_000, at(2)));
        f.send(state(0.269, 2_000, at(3))); // a renewal: no change
        f.send(state(0.26, 2_000, at(4)));
        assert_eq!(watch.borrow_and_update().capacity, 0.26);
        let seen: Vec<(f64, Instant)> = std::iter::from_fn(|| all.try_recv().ok())
            .map(|s| (s.capacity, s.since))
            .collect();
        assert_eq!(seen, [(0.279, at(1)), (0.269, at(2)), (0.26, at(4))]);
    }

    #[test]
    fn a_receiver_that_falls_behind_is_told_how_many_it_missed() {
        let t0 = crate::clock::instant().into_std();
        let f = Feed::new(state(0.0, 0, t0));
        let mut all = f.changes();
        for k in 1..=CHANGES_KEPT + 3 {
            f.send(state(k as f64, 0, t0));
        }
        assert_eq!(
            all.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(3))
        );
        assert_eq!(all.try_recv().map(|s| s.capacity), Ok(4.0));
    }
}
