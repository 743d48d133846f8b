//! The pusher: one task that, when resources move (`doorman-state`'s
//! `Moved`), asks the core what each of their streaming holders would get
//! now and queues the grants the push rule lets through
//! (`doorman_core::server::PUSH_RULE`).
//!
//! Moves are gathered for `PUSH_BATCH` (2 ms) before a pass, so a burst
//! is one pass (`doorman_core::server::PUSH_BATCH`). A pass looks at no
//! more holders than the server's push budget holds
//! (`doorman_core::server::PUSH_BUDGET` unless `--push-budget` says
//! otherwise); a resource with holders left
//! over is passed again when the budget has refilled.
//!
//! Must not: decide (the core does), or hold a stream's order lock longer
//! than the decision and its queueing.

use std::sync::Arc;
use std::time::Duration;

use doorman_core::server::{Push, PushBudget, PushBudgetRule, Sharded, Who, PUSH_BATCH, PUSH_RULE};
use doorman_lease::Time;
use doorman_state::ServerState;
use tokio::sync::watch;

use super::hub::Hub;

/// How long the pusher sleeps with nothing held back.
const IDLE: Duration = Duration::from_secs(60);

/// Runs until `stop` turns true.
pub async fn run(
    (state, hub, rule): (Arc<ServerState>, Arc<Hub>, PushBudgetRule),
    mut stop: watch::Receiver<bool>,
) {
    let mut budget = PushBudget::new(rule);
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
        pass(&state, &hub, &mut budget);
    }
}

/// One pass over what moved and what was held back, within `budget`.
pub fn pass(state: &ServerState, hub: &Hub, budget: &mut PushBudget) {
    let (moved, all) = state.moved.take();
    let now = state.now();
    let mut pushed = Vec::new();
    for (resource, seen) in hub.to_scan(moved, all, now) {
        let again = budget.part(now, |limit| {
            let before = pushed.len();
            let scan = (resource.as_str(), seen, limit);
            let (looked, more) = push_resource(state, hub, scan, now, &mut pushed);
            (looked, pushed.len() - before, more)
        });
        if let Some(at) = again {
            hub.later(at, &resource);
        }
    }
    for key in pushed {
        hub.pushed(key, now);
    }
}

/// The pushes due to up to `limit` of `resource`'s holders, decided and
/// queued under their streams' order locks, unless its generation is
/// still `seen`; the keys of the streams pushed to go to `pushed`. Returns
/// how many holders were looked at, and whether some were left over.
fn push_resource(
    state: &ServerState,
    hub: &Hub,
    (resource, seen, limit): (&str, Option<u64>, usize),
    now: Time,
    pushed: &mut Vec<u64>,
) -> (usize, bool) {
    // Nothing moved since the last pass: look at no holder (a renewal that
    // changes nothing, the common case, costs one shard access here). Else
    // only at those whose grant may have moved, not at every holder.
    let c = state.core().push_candidates(now, resource, seen, limit);
    if let Some(g) = c.generation {
        hub.saw(resource, g);
    }
    let looked = (c.looked, c.more);
    // Nobody named (nothing moved since `seen`, or nobody's grant did).
    if c.whos.is_empty() {
        return looked;
    }
    let holders = hub.holders_among(resource, c.whos);
    if holders.is_empty() {
        return looked;
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
    looked
}
