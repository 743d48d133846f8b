//! Whole-server work in bounded steps: cleanup, status and metrics visit
//! at most a fixed number of resources per call and say where to go on, so
//! a shell can release the core between steps and no request waits for a
//! walk over every resource. Steps go by position in the resource table;
//! a resource created between two steps is visited by this pass or the
//! next, and one moved by a removal between two steps (removal moves the
//! last resource into the gap) may be missed by this pass and is visited by
//! the next. A pass is thus consistent per resource, not across resources.
//!
//! Must not: hold anything between steps (the caller may change the core in
//! between).

use doorman_lease::Time;

use super::resource::Resource;
use super::status::{resource_gauge, resource_status};
use super::{Node, ResourceGauge, ResourceShard, ResourceStatus};

/// Resources visited per cleanup or metrics step (about a millisecond of
/// work at most; see BENCHMARKS.md).
pub const SWEEP_STEP: usize = 1024;

/// Resources visited per status step (each builds a full resource status).
pub const STATUS_STEP: usize = 128;

/// Resources of one request decided per hold of the core's lock
/// ([`ResourceShard::decide_asks`]): a request at the protocol's limit of
/// 10 000 new resources takes about 31 ms in one piece (BENCHMARKS.md), so
/// in steps of 512 each hold stays near 1.6 ms.
pub const DECIDE_STEP: usize = 512;

/// Runs `step` from position 0 until it says the pass is done (`None`).
/// A shell wraps each call in its own lock.
pub fn whole_pass(mut step: impl FnMut(usize) -> Option<usize>) {
    let mut at = Some(0);
    while let Some(from) = at {
        at = step(from);
    }
}

impl ResourceShard {
    /// One step of the periodic cleanup from position `from`: forgets
    /// expired leases and drops resources with no lease left, no learning
    /// mode and (on an intermediate) no unexpired lease from the parent,
    /// or a retired template whose leases are gone. Returns where the
    /// next step starts, `None` when the pass is done.
    pub fn cleanup_step(&mut self, node: &Node, now: Time, from: usize) -> Option<usize> {
        let (mut i, mut visited, mut expired) = (from, 0, 0);
        while visited < SWEEP_STEP {
            let Some((id, r)) = self.resources.get_index_mut(i) else {
                break;
            };
            visited += 1;
            r.freshen(&node.config, node.config_gen, id);
            expired += r.expire(now, node.opts.min_request_interval);
            if r.keys_due(now) {
                // A mass expiry, more keys than one call handles: this
                // resource again, at the cost of an eighth of a step.
                visited += SWEEP_STEP / 8;
                continue;
            }
            // An intermediate keeps a resource while its parent's lease
            // lasts (the parent counts it): a requester whose lease of 0
            // ended at once comes back to it rather than to a new
            // resource waiting for the parent again.
            let backed = r
                .upstream
                .as_ref()
                .is_some_and(|u| u.valid_lease(now).is_some());
            if (!r.shares.is_empty() || r.in_learning(now) || backed) && !r.retired(now) {
                i += 1;
            } else {
                // The last resource moves here: visit it next.
                self.resources.swap_remove_index(i);
            }
        }
        self.counters.expired_leases += expired as u64;
        (i < self.resources.len()).then_some(i)
    }

    /// One step of a status snapshot: appends up to [`STATUS_STEP`]
    /// resources from position `from` to `out` (at most `max_leases` leases
    /// each). Returns where the next step starts.
    pub fn status_step(
        &mut self,
        node: &Node,
        now: Time,
        max_leases: usize,
        from: usize,
        out: &mut Vec<ResourceStatus>,
    ) -> Option<usize> {
        self.read_step(node, from, STATUS_STEP, out, |id, r| {
            resource_status(id, r, now, max_leases)
        })
    }

    /// One step of the per-resource metrics: appends up to [`SWEEP_STEP`]
    /// resources from position `from` to `out`. Returns where the next
    /// step starts.
    pub fn gauges_step(
        &mut self,
        node: &Node,
        now: Time,
        from: usize,
        out: &mut Vec<ResourceGauge>,
    ) -> Option<usize> {
        self.read_step(node, from, SWEEP_STEP, out, |id, r| {
            resource_gauge(id, r, now)
        })
    }

    /// Appends `row` of up to `len` resources from position `from`, each
    /// re-bound to the running config first.
    fn read_step<T>(
        &mut self,
        node: &Node,
        from: usize,
        len: usize,
        out: &mut Vec<T>,
        row: impl Fn(&str, &mut Resource) -> T,
    ) -> Option<usize> {
        let end = (from + len).min(self.resources.len());
        for i in from..end {
            if let Some((id, r)) = self.resources.get_index_mut(i) {
                r.freshen(&node.config, node.config_gen, id);
                out.push(row(id, r));
            }
        }
        (end < self.resources.len()).then_some(end)
    }
}
