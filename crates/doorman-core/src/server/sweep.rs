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

use doorman_algorithms::Time;

use super::status::{resource_gauge, resource_status};
use super::{ResourceGauge, ResourceStatus, ServerCore};

/// Resources visited per cleanup or metrics step (about a millisecond of
/// work at most; see BENCHMARKS.md).
pub const SWEEP_STEP: usize = 1024;

/// Resources visited per status step (each builds a full resource status).
pub const STATUS_STEP: usize = 128;

impl ServerCore {
    /// One step of the periodic cleanup from position `from`: forgets
    /// expired leases and drops resources with no lease left, no learning
    /// mode, or a retired template whose leases are gone. Returns where the
    /// next step starts, `None` when the pass is done.
    pub fn cleanup_step(&mut self, now: Time, from: usize) -> Option<usize> {
        let (mut i, mut visited, mut expired) = (from, 0, 0);
        while visited < SWEEP_STEP {
            let Some((id, r)) = self.resources.get_index_mut(i) else {
                break;
            };
            visited += 1;
            r.freshen(&self.config, self.config_gen, id);
            expired += r.expire(now);
            if (!r.shares.is_empty() || r.in_learning(now)) && !r.retired(now) {
                i += 1;
            } else {
                // The last resource moves here: visit it next.
                self.resources.swap_remove_index(i);
            }
        }
        self.counters.expired_leases += expired as u64;
        (i < self.resources.len()).then_some(i)
    }

    /// A whole cleanup pass in one call (tests and the simulator; a server
    /// goes step by step).
    pub fn cleanup(&mut self, now: Time) {
        let mut at = Some(0);
        while let Some(from) = at {
            at = self.cleanup_step(now, from);
        }
    }

    /// One step of a status snapshot: appends up to [`STATUS_STEP`]
    /// resources from position `from` to `out` (at most `max_leases` leases
    /// each). Returns where the next step starts.
    pub fn status_step(
        &mut self,
        now: Time,
        max_leases: usize,
        from: usize,
        out: &mut Vec<ResourceStatus>,
    ) -> Option<usize> {
        let end = (from + STATUS_STEP).min(self.resources.len());
        for i in from..end {
            if let Some((id, r)) = self.resources.get_index_mut(i) {
                r.freshen(&self.config, self.config_gen, id);
                out.push(resource_status(id, r, now, max_leases));
            }
        }
        (end < self.resources.len()).then_some(end)
    }

    /// One step of the per-resource metrics: appends up to [`SWEEP_STEP`]
    /// resources from position `from` to `out`. Returns where the next
    /// step starts.
    pub fn gauges_step(
        &mut self,
        now: Time,
        from: usize,
        out: &mut Vec<ResourceGauge>,
    ) -> Option<usize> {
        let end = (from + SWEEP_STEP).min(self.resources.len());
        for i in from..end {
            if let Some((id, r)) = self.resources.get_index_mut(i) {
                r.freshen(&self.config, self.config_gen, id);
                out.push(resource_gauge(id, r, now));
            }
        }
        (end < self.resources.len()).then_some(end)
    }
}
