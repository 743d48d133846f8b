//! The auditor, outside the servers: from what every client reported it
//! used (each change, on the machine's monotonic clock), the capacity in
//! force and what the clients wanted, it checks at every change and every
//! 100 ms that Σ of what the holders believe they hold stays within the
//! capacity, and measures, per fault, the seconds over it, the lowest
//! share of the goal (min(capacity, Σ wants)) handed out, and how long the
//! tree took to come back within 5 % of the goal.
//!
//! A capacity lowered by a config push binds new grants at once; leases
//! handed out before it keep counting until they end (docs/operations.md),
//! so the bound at time t is the highest capacity in force during the
//! lease length before t.
//!
//! Must not: look inside the servers; a client's report is the only word
//! on what it uses.

use serde::Serialize;

/// A step function of time: values from each time on.
#[derive(Debug, Clone, Default)]
pub struct Steps(Vec<(f64, f64)>);

impl Steps {
    /// `v` from `t` on (times must not go back; an equal time replaces).
    pub fn set(&mut self, t: f64, v: f64) {
        match self.0.last_mut() {
            Some(last) if last.0 >= t => last.1 = v,
            _ => self.0.push((t, v)),
        }
    }

    /// The value at `t` (0 before the first step).
    pub fn at(&self, t: f64) -> f64 {
        match self.0.partition_point(|&(s, _)| s <= t) {
            0 => 0.0,
            i => self.0[i - 1].1,
        }
    }

    /// The highest value during `[from, to]`.
    pub fn max_over(&self, from: f64, to: f64) -> f64 {
        let start = self.at(from);
        self.0
            .iter()
            .filter(|&&(s, _)| s > from && s <= to)
            .map(|&(_, v)| v)
            .fold(start, f64::max)
    }

    fn times(&self) -> impl Iterator<Item = f64> + '_ {
        self.0.iter().map(|&(t, _)| t)
    }

    /// Each step: (from, value).
    pub fn points(&self) -> &[(f64, f64)] {
        &self.0
    }
}

/// What the auditor knows.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// What each client used (as counted: see `report.rs`).
    pub used: Vec<Steps>,
    /// What each original Go client believed it held, where the count
    /// is cut to its lease (for the events file).
    pub believed: Vec<Option<Steps>>,
    /// What each client wanted.
    pub wants: Vec<Steps>,
    /// The capacity in force.
    pub capacity: Steps,
    /// How long leases last (the lag of a lowered capacity), s.
    pub lease: f64,
}

/// One point of the sweep.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// When.
    pub t: f64,
    /// Σ used.
    pub used: f64,
    /// The most that may be in use.
    pub bound: f64,
    /// min(capacity, Σ wants).
    pub goal: f64,
}

impl Record {
    /// Σ used, the bound and the goal at every change and every 100 ms of
    /// `[from, to]`, in time order.
    pub fn sweep(&self, from: f64, to: f64) -> Vec<Point> {
        let (used, wants) = (total(&self.used), total(&self.wants));
        let mut times: Vec<f64> = [&used, &wants, &self.capacity]
            .into_iter()
            .flat_map(Steps::times)
            .filter(|&t| t >= from && t <= to)
            .collect();
        let mut g = from;
        while g <= to {
            times.push(g);
            g += 0.1;
        }
        times.sort_by(f64::total_cmp);
        times.dedup();
        times
            .into_iter()
            .map(|t| Point {
                t,
                used: used.at(t),
                bound: self.capacity.max_over(t - self.lease, t),
                goal: self.capacity.at(t).min(wants.at(t)),
            })
            .collect()
    }
}

/// Σ of `steps` as one step function (each step's change, summed in time
/// order: linear in the steps, however many clients).
fn total(steps: &[Steps]) -> Steps {
    let mut deltas: Vec<(f64, f64)> = Vec::new();
    for s in steps {
        let mut prev = 0.0;
        for &(t, v) in s.points() {
            deltas.push((t, v - prev));
            prev = v;
        }
    }
    deltas.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Steps::default();
    let mut sum = 0.0;
    for (t, d) in deltas {
        sum += d;
        out.set(t, sum);
    }
    out
}

/// Seconds of `points` (each lasting until the next) with more in use
/// than the bound, and the worst excess.
pub fn over(points: &[Point]) -> (f64, f64) {
    let mut secs = 0.0;
    let mut worst = 0.0f64;
    for w in points.windows(2) {
        let excess = w[0].used - w[0].bound;
        if excess > 1e-6 * w[0].bound.max(1.0) {
            secs += w[1].t - w[0].t;
            worst = worst.max(excess);
        }
    }
    (secs, worst)
}

/// What one fault did.
#[derive(Debug, Clone, Serialize)]
pub struct FaultReport {
    /// The fault.
    pub fault: String,
    /// Seconds from the start of the run.
    pub start: f64,
    /// Seconds it lasted.
    pub duration: f64,
    /// Seconds with more in use than the capacity allows.
    pub over_s: f64,
    /// The largest excess.
    pub over_by: f64,
    /// The lowest share of the goal in use.
    pub lowest_share: f64,
    /// Seconds from the fault's start until the tree is back within 5 %
    /// of the goal for 2 s (`None`: not within the window).
    pub recovery_s: Option<f64>,
}

/// Measures one fault over `[start, until]` (its window: the fault and
/// the settling after it).
pub fn fault(rec: &Record, name: &str, (start, duration, until): (f64, f64, f64)) -> FaultReport {
    let points = rec.sweep(start, until);
    let (over_s, over_by) = over(&points);
    let lowest_share = points
        .iter()
        .filter(|p| p.goal > 0.0)
        .map(|p| p.used / p.goal)
        .fold(f64::INFINITY, f64::min);
    FaultReport {
        fault: name.into(),
        start,
        duration,
        over_s,
        over_by,
        lowest_share: if lowest_share.is_finite() {
            lowest_share
        } else {
            1.0
        },
        recovery_s: recovery(&points, start),
    }
}

/// Seconds after `start` until Σ used is back within 5 % of the goal
/// for good: the end of the last stretch outside (0 if it never left),
/// `None` if it is still outside at the end or back for less than 2 s.
fn recovery(points: &[Point], start: f64) -> Option<f64> {
    let within = |p: &Point| p.used >= 0.95 * p.goal - 1e-9;
    let last_out = points.iter().rposition(|p| !within(p));
    match last_out {
        None => Some(0.0),
        Some(i) => {
            let back = points.get(i + 1)?.t;
            let end = points.last()?.t;
            (end - back >= 2.0).then_some(back - start)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> Record {
        let mut r = Record {
            used: vec![Steps::default(), Steps::default()],
            wants: vec![Steps::default(), Steps::default()],
            lease: 10.0,
            ..Record::default()
        };
        r.capacity.set(0.0, 100.0);
        for i in 0..2 {
            r.wants[i].set(0.0, 80.0);
            r.used[i].set(0.0, 50.0);
        }
        r
    }

    #[test]
    fn an_overlap_is_counted_and_a_lowered_capacity_has_its_lag() {
        let mut r = rec();
        // Client 0 keeps 50 from 20 s to 21.5 s while client 1 takes 100.
        r.used[1].set(20.0, 100.0);
        r.used[0].set(21.5, 0.0);
        let (secs, by) = over(&r.sweep(0.0, 30.0));
        assert!(
            (secs - 1.5).abs() < 1e-9 && (by - 50.0).abs() < 1e-9,
            "{secs} {by}"
        );
        // Capacity down to 60 at 40 s: 100 in use stays allowed for a lease.
        let mut r = rec();
        r.capacity.set(40.0, 60.0);
        assert_eq!(over(&r.sweep(0.0, 49.9)).0, 0.0);
        let (secs, _) = over(&r.sweep(0.0, 60.0));
        assert!((secs - 10.0).abs() < 0.11, "{secs}");
    }

    #[test]
    fn a_fault_reports_its_dip_and_recovery() {
        let mut r = rec();
        r.used[0].set(10.0, 0.0);
        r.used[0].set(13.0, 50.0);
        let f = fault(&r, "x", (9.0, 1.0, 30.0));
        assert_eq!(f.over_s, 0.0);
        assert!((f.lowest_share - 0.5).abs() < 1e-9);
        assert!(
            (f.recovery_s.unwrap() - 4.0).abs() < 1e-9,
            "{:?}",
            f.recovery_s
        );
        let quiet = fault(&rec(), "y", (0.0, 1.0, 30.0));
        assert_eq!(quiet.recovery_s, Some(0.0));
    }
}
