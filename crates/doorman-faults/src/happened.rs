//! What a run did besides what the clients reported: when the tree
//! started and the first fault began, the slots as run (with what applying
//! and mending their faults found), the capacity in force, the leases and
//! wall clocks read from the servers, the processes that exited by
//! themselves, what clients were told to want. Filled by `run.rs`, read by
//! the report and its checks.
//!
//! Must not: judge.

use crate::audit::Steps;
use crate::schedule::Fault;
use crate::world::World;

/// One slot as run.
#[derive(Debug, Clone)]
pub struct SlotRun {
    /// Its faults' names.
    pub names: Vec<String>,
    /// Its faults.
    pub faults: Vec<Fault>,
    /// When it started (monotonic s).
    pub at: f64,
    /// How long its faults lasted.
    pub duration: f64,
    /// When it ended.
    pub until: f64,
    /// What applying and mending showed went wrong (each fails the run).
    pub failures: Vec<String>,
    /// What else they found.
    pub notes: Vec<String>,
}

/// What the run did, besides what the clients reported.
#[derive(Debug, Clone, Default)]
pub struct Happened {
    /// When the tree started (monotonic s): everything from here is
    /// audited.
    pub start: f64,
    /// When the warmup ended and the first slot began.
    pub first_slot: f64,
    /// The true wall clock less the monotonic one, s.
    pub wall_base: f64,
    /// The capacity in force.
    pub capacity: Steps,
    /// The slots.
    pub slots: Vec<SlotRun>,
    /// Every client's lease by its leaf's word.
    pub readings: Vec<crate::leases::Reading>,
    /// Every server's wall clock by its status page.
    pub walls: Vec<(usize, f64, f64)>,
    /// Each root replica's lost config watches at the end.
    pub watch_restarts: Vec<(String, f64)>,
    /// Processes that exited by themselves: when, which.
    pub exited: Vec<(f64, String)>,
    /// What the harness told clients to want: when, which client, how much.
    pub wants: Vec<(f64, usize, f64)>,
}

impl Happened {
    /// The run's record from `start`, the capacity in force since.
    pub fn new(w: &World, start: f64, wall_base: f64) -> Self {
        let mut capacity = Steps::default();
        capacity.set(start - 60.0, w.layout.terms.capacity);
        Happened {
            start,
            first_slot: start,
            wall_base,
            capacity,
            ..Happened::default()
        }
    }

    /// A config fault was applied (or mended) and taken at `t`.
    pub fn config_changed(&mut self, w: &World, f: &Fault, t: f64, mended: bool) {
        if let Some(c) = crate::faults::capacity_after(w, f, mended) {
            self.capacity.set(t, c);
        }
    }

    /// The end of the run.
    pub fn end(&self) -> f64 {
        self.slots.last().map_or(self.first_slot, |s| s.until)
    }
}
