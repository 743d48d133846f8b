//! What each client used, on one time line, from what it reported and
//! what the harness did to its process: a report counts from the time it
//! was printed; a process killed, exited or just started uses nothing
//! until it reports; a process stopped (SIGSTOP) uses nothing until it
//! runs again, and then what it first reports within a second of
//! resuming (what it found applies on waking), else what it last
//! reported before the stop. A client process that runs but reports
//! nothing for [`SILENT_S`] (they report every second), or that missed
//! changes of its own (`lost`), is named: the auditor cannot see what it
//! uses.
//!
//! Must not: judge (the auditor sums).

use std::collections::BTreeMap;

use crate::audit::Steps;
use crate::procs::{Life, Proc};
use crate::tree::Kind;

/// A running client silent this long is a failure of the run.
pub const SILENT_S: f64 = 5.0;

/// How long after resuming a report still says what applied on waking.
const RESUME_GRACE_S: f64 = 1.0;

/// One report: when (monotonic s), the client's index in its process,
/// what it used, and its wall clock (ms since the epoch) if it said.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    /// When.
    pub t: f64,
    /// The client's index in its process.
    pub i: u64,
    /// What it used.
    pub cap: f64,
    /// Its wall clock, ms.
    pub wall_ms: Option<f64>,
}

/// The reports in lines a client process printed (`seen`: when the
/// harness read each), for its kind.
pub fn reports(lines: &[(f64, String)], kind: Kind) -> Vec<Report> {
    lines
        .iter()
        .filter_map(|(seen, line)| match kind {
            Kind::Go => line
                .strip_prefix("capacity ")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|cap| Report {
                    t: *seen,
                    i: 0,
                    cap,
                    wall_ms: None,
                }),
            _ => {
                let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
                Some(Report {
                    t: v.get("t")?.as_f64()?,
                    i: v.get("i").and_then(|x| x.as_u64()).unwrap_or(0),
                    cap: v.get("cap")?.as_f64()?,
                    wall_ms: v.get("wall_ms").and_then(|x| x.as_f64()),
                })
            }
        })
        .collect()
}

/// The changes a client of ours fell too far behind to see, in lines it
/// printed: (client index, when, how many). Only a line naming `lost` is
/// parsed: the reports (`reports`) are read apart, and a mass process
/// prints a hundred thousand of them.
pub fn lost(lines: &[(f64, String)]) -> Vec<(u64, f64, u64)> {
    lines
        .iter()
        .filter(|(_, line)| line.contains("\"lost\""))
        .filter_map(|(_, line)| {
            let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
            Some((
                v.get("i").and_then(|x| x.as_u64()).unwrap_or(0),
                v.get("t")?.as_f64()?,
                v.get("lost")?.as_u64()?,
            ))
        })
        .collect()
}

/// What each client of a process used (by its index), from its reports
/// and its life.
pub fn used(reports: &[Report], life: &[(f64, Life)]) -> BTreeMap<u64, Steps> {
    let mut by_client: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for r in reports {
        by_client.entry(r.i).or_default().push((r.t, r.cap));
    }
    by_client
        .into_iter()
        .map(|(i, rs)| (i, steps(&rs, life)))
        .collect()
}

/// One client's use from its reports `(t, cap)` and its process's life.
fn steps(reports: &[(f64, f64)], life: &[(f64, Life)]) -> Steps {
    #[derive(Clone, Copy)]
    enum Ev {
        Report(f64),
        Life(Life),
    }
    let mut evs: Vec<(f64, Ev)> = reports.iter().map(|&(t, c)| (t, Ev::Report(c))).collect();
    evs.extend(life.iter().map(|&(t, l)| (t, Ev::Life(l))));
    evs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut s = Steps::default();
    let (mut last, mut paused, mut gone) = (0.0, false, false);
    for (k, &(t, ev)) in evs.iter().enumerate() {
        match ev {
            // A process being stopped may still print while it closes:
            // it counts as using nothing from the stop on.
            Ev::Report(_) if gone => {}
            Ev::Report(cap) => {
                last = cap;
                if !paused {
                    s.set(t, cap);
                }
            }
            Ev::Life(Life::Paused) => {
                paused = true;
                s.set(t, 0.0);
            }
            Ev::Life(Life::Resumed) => {
                paused = false;
                let first = evs[k + 1..].iter().find_map(|&(u, e)| match e {
                    Ev::Report(c) if u <= t + RESUME_GRACE_S => Some(c),
                    _ => None,
                });
                s.set(t, first.unwrap_or(last));
            }
            Ev::Life(l @ (Life::Killed | Life::Exited | Life::Started(_) | Life::Stopped)) => {
                last = 0.0;
                gone = !matches!(l, Life::Started(_));
                s.set(t, 0.0);
            }
            Ev::Life(Life::Clock(_)) => {}
        }
    }
    s
}

/// Stretches longer than [`SILENT_S`] in which a client of `p` that runs
/// (not stopped, killed or exited) printed no report, as (client index,
/// from, seconds); none for the original Go clients (they print only
/// changes).
pub fn silences(p: &Proc, reports: &[Report], until: f64) -> Vec<(u64, f64, f64)> {
    let mut by_client: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for r in reports {
        by_client.entry(r.i).or_default().push(r.t);
    }
    let stops = |l: &Life| {
        matches!(
            l,
            Life::Paused | Life::Killed | Life::Exited | Life::Stopped
        )
    };
    let quiet = |from: f64, to: f64| {
        // Time it was running between `from` and `to` (a process being
        // stopped may report after the stop began).
        let before = p.life.iter().rfind(|(t, _)| *t <= from);
        let mut running = before.is_none_or(|(_, l)| !stops(l));
        let mut at = from;
        let mut total = 0.0;
        for &(t, l) in p.life.iter().filter(|(t, _)| *t > from && *t < to) {
            if running {
                total += t - at;
            }
            running = !stops(&l);
            at = t;
        }
        if running {
            total += to - at;
        }
        total
    };
    let mut out = Vec::new();
    for (i, mut ts) in by_client {
        // A change is dated when it applied, and may be printed after
        // heartbeats of later times (a lease that ended while stopped).
        ts.sort_by(f64::total_cmp);
        ts.push(until);
        for w in ts.windows(2) {
            let gap = quiet(w[0], w[1]);
            if gap > SILENT_S {
                out.push((i, w[0], gap));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_client_uses_nothing_then_what_it_finds_on_waking() {
        let reports = [(0.0, 10.0), (5.0, 12.0), (20.2, 0.0)];
        let life = [(6.0, Life::Paused), (20.0, Life::Resumed)];
        let s = steps(&reports, &life);
        assert_eq!((s.at(5.5), s.at(10.0), s.at(20.1)), (12.0, 0.0, 0.0));
        // No report within a second of resuming: its last value counts.
        let s = steps(&[(0.0, 10.0), (5.0, 12.0), (21.5, 0.0)], &life);
        assert_eq!((s.at(20.1), s.at(21.6)), (12.0, 0.0));
    }

    #[test]
    fn a_client_being_stopped_uses_nothing_whatever_it_still_prints() {
        let life = [(1.0, Life::Started(0)), (10.0, Life::Stopped)];
        let s = steps(&[(2.0, 10.0), (10.5, 12.0)], &life);
        assert_eq!((s.at(9.0), s.at(10.2), s.at(11.0)), (10.0, 0.0, 0.0));
    }

    #[test]
    fn a_killed_client_uses_nothing_until_it_reports_again() {
        let life = [(3.0, Life::Killed), (9.0, Life::Started(30))];
        let s = steps(&[(0.0, 10.0), (9.5, 4.0)], &life);
        assert_eq!(
            (s.at(2.0), s.at(5.0), s.at(9.2), s.at(9.6)),
            (10.0, 0.0, 0.0, 4.0)
        );
    }

    #[test]
    fn changes_a_client_missed_are_read_and_are_no_report() {
        let lines = [
            (
                1.0,
                r#"{"t":1.0,"i":2,"cap":5.0,"mode":"lease"}"#.to_string(),
            ),
            (2.0, r#"{"t":2.0,"i":3,"lost":7}"#.to_string()),
        ];
        assert_eq!(lost(&lines), [(3, 2.0, 7)]);
        assert_eq!(reports(&lines, Kind::Rust).len(), 1);
    }
}
