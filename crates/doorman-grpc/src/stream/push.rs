//! The pusher: one task that, when resources move (`doorman-state`'s
//! `Moved`), asks the core what each of their streaming holders would get
//! now and queues the grants the push rule lets through
//! (`doorman_core::server::PUSH_RULE`).
//!
//! Moves are gathered for `PUSH_BATCH` (2 ms) before a pass, so a burst
//! is one pass (`doorman_core::server::PUSH_BATCH`).
//!
//! Must not: decide (the core does), or hold a stream's order lock longer
//! than the decision and its queueing.

use std::sync::Arc;
use std::time::Duration;

use doorman_core::server::{Push, Sharded, Who, PUSH_BATCH, PUSH_RULE};
use doorman_lease::Time;
use doorman_state::ServerState;
use tokio::sync::watch;

use super::hub::Hub;

/// How long the pusher sleeps with nothing held back.
const IDLE: Duration = Duration::from_secs(60);

/// Runs until `stop` turns true.
pub async fn run(state: Arc<ServerState>, hub: Arc<Hub>, mut stop: watch::Receiver<bool>) {
    loop {
        let now = state.now();
        let wait = hub
            .next_later()
            .map_or(IDLE, |t| (t.max(now) - now).to_duration());
        tokio::select! {
            () = state.moved.notify.notified() => {}
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        tokio::time::sleep(PUSH_BATCH.to_duration()).await;
        pass(&state, &hub);
    }
}

/// One pass over what moved and what was held back.
pub fn pass(state: &ServerState, hub: &Hub) {
    let (moved, all) = state.moved.take();
    let now = state.now();
    let mut pushed = Vec::new();
    for (resource, seen) in hub.to_scan(moved, all, now) {
        push_resource(state, hub, (&resource, seen), now, &mut pushed);
    }
    for key in pushed {
        hub.pushed(key, now);
    }
}

/// The pushes due to `resource`'s holders, decided and queued under their
/// streams' order locks, unless its generation is still `seen`; the keys
/// of the streams pushed to go to `pushed`.
fn push_resource(
    state: &ServerState,
    hub: &Hub,
    (resource, seen): (&str, Option<u64>),
    now: Time,
    pushed: &mut Vec<u64>,
) {
    // Nothing moved since the last pass: look at no holder (a renewal that
    // changes nothing, the common case, costs one shard access here). Else
    // only at those whose grant may have moved, not at every holder.
    let (generation, whos) = state.core().push_candidates(now, resource, seen);
    if let Some(g) = generation {
        hub.saw(resource, g);
    }
    // Nobody named (nothing moved since `seen`, or nobody's grant did).
    if whos.is_empty() {
        return;
    }
    let holders = hub.holders_among(resource, whos);
    if holders.is_empty() {
        return;
    }
    let _order: Vec<_> = holders.iter().map(|h| h.slot.order()).collect();
    let list: Vec<(Who, Option<Time>)> = holders
        .iter()
        .map(|h| (h.who.clone(), h.last_push))
        .collect();
    let pushes = state.core().push(now, resource, &list, &PUSH_RULE);
    for (h, p) in holders.iter().zip(pushes) {
        match p {
            Push::Nothing => {}
            Push::Later(at) => hub.later(at, resource),
            Push::Grant(g) => {
                if h.slot.push(g) {
                    state.metrics.pushed();
                    pushed.push(h.slot.key());
                }
            }
        }
    }
}
