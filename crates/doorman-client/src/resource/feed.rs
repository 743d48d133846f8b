//! What a resource tells its watchers: the latest state (a watch, for
//! `capacity_watch()`) and every change of capacity or mode in order (a
//! broadcast, for `capacity_changes()`: [`CapacityChanges`]), each dated
//! when it applied.
//!
//! Must not: decide what the state is (the resource's `publish` and
//! `check_end` do).

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
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

    /// The lease expiry watchers have now.
    pub fn lease_expiry(&self) -> Option<std::time::SystemTime> {
        self.latest.borrow().lease_expiry
    }

    /// A receiver of the latest state.
    pub fn subscribe(&self) -> watch::Receiver<CapacityState> {
        self.latest.subscribe()
    }

    /// The state now, then every change. Read under the watch's lock: a
    /// change is sent under it too, so each is either in the state read
    /// or among those received after it, never both or neither.
    pub fn changes(&self) -> CapacityChanges {
        let now = self.latest.borrow();
        CapacityChanges {
            rx: self.changes.subscribe(),
            first: Some(now.clone()),
        }
    }
}

/// A resource's state when this was made, then every change of its
/// capacity or mode, in order, each dated when it applied (`since`).
/// Unlike a watch, which holds only the latest state, it coalesces
/// nothing: of two lowerings in a row, both come.
#[derive(Debug)]
pub struct CapacityChanges {
    first: Option<CapacityState>,
    rx: broadcast::Receiver<CapacityState>,
}

impl CapacityChanges {
    /// The next state: first the one when this was made, then each
    /// change. `Err(RecvError::Lagged(n))`: more than [`CHANGES_KEPT`]
    /// behind, it missed the `n` oldest (the next call goes on with those
    /// kept); `Err(RecvError::Closed)`: the resource is gone.
    pub async fn next(&mut self) -> Result<CapacityState, RecvError> {
        match self.first.take() {
            Some(s) => Ok(s),
            None => self.rx.recv().await,
        }
    }

    /// [`next`](Self::next) without waiting (`TryRecvError::Empty` when
    /// no change is due).
    pub fn try_next(&mut self) -> Result<CapacityState, TryRecvError> {
        match self.first.take() {
            Some(s) => Ok(s),
            None => self.rx.try_recv(),
        }
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
        let seen: Vec<(f64, Instant)> = std::iter::from_fn(|| all.try_next().ok())
            .map(|s| (s.capacity, s.since))
            .collect();
        let expected = [(0.0, t0), (0.279, at(1)), (0.269, at(2)), (0.26, at(4))];
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_receiver_made_later_starts_from_the_state_then() {
        let t0 = crate::clock::instant().into_std();
        let f = Feed::new(state(0.0, 0, t0));
        f.send(state(5.0, 0, t0 + Duration::from_millis(1)));
        let mut all = f.changes();
        f.send(state(4.0, 0, t0 + Duration::from_millis(2)));
        let seen: Vec<f64> = std::iter::from_fn(|| all.try_next().ok())
            .map(|s| s.capacity)
            .collect();
        assert_eq!(seen, [5.0, 4.0]);
    }

    #[test]
    fn a_receiver_that_falls_behind_is_told_how_many_it_missed() {
        let t0 = crate::clock::instant().into_std();
        let f = Feed::new(state(0.0, 0, t0));
        let mut all = f.changes();
        for k in 1..=CHANGES_KEPT + 3 {
            f.send(state(k as f64, 0, t0));
        }
        assert_eq!(all.try_next().map(|s| s.capacity), Ok(0.0));
        assert_eq!(all.try_next(), Err(TryRecvError::Lagged(3)));
        assert_eq!(all.try_next().map(|s| s.capacity), Ok(4.0));
    }
}
