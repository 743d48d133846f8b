//! When Σ in use passes the capacity, which side was wrong: each stretch
//! over it with what every client used at its start, and every client of
//! ours that used a lease past the end its leaf stated (the status
//! readings of `leases.rs`). Printed with the report: where the output
//! directory is not kept (CI), the printed lines are all there is to go
//! on.
//!
//! Must not: change the verdict (the auditor's `over` decides).

use crate::audit::{Point, Record, Steps};
use crate::leases::{leased, Reading};
use crate::tree::Kind;
use crate::world::World;

/// At most this many stretches over the capacity are described.
const MOST_STRETCHES: usize = 5;

/// A grant shows in the leaf's status before its holder reports it, but
/// only at the next reading (every 250 ms): a client counts as past its
/// lease only when it uses more than the leaf counted for it at any time
/// within this long after.
const READING_LAG: f64 = 0.5;

/// How finely a client's use is compared with its leaf's count, s.
const STEP: f64 = 0.05;

/// Each stretch of `points` over the bound: from, to, the worst excess.
pub fn stretches(points: &[Point]) -> Vec<(f64, f64, f64)> {
    let mut out: Vec<(f64, f64, f64)> = Vec::new();
    let mut open: Option<(f64, f64)> = None;
    for w in points.windows(2) {
        let excess = w[0].used - w[0].bound;
        if excess > 1e-6 * w[0].bound.max(1.0) {
            let (from, worst) = open.unwrap_or((w[0].t, 0.0));
            open = Some((from, worst.max(excess)));
        } else if let Some((from, worst)) = open.take() {
            out.push((from, w[0].t, worst));
        }
    }
    if let (Some((from, worst)), Some(last)) = (open, points.last()) {
        out.push((from, last.t, worst));
    }
    out
}

/// The lines that explain the stretches over the capacity in `points`
/// (none if there are none), times from `start`.
pub fn lines(
    w: &World,
    rec: &Record,
    readings: &[Reading],
    points: &[Point],
    start: f64,
) -> Vec<String> {
    let over = stretches(points);
    if over.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for &(from, to, worst) in over.iter().take(MOST_STRETCHES) {
        let using: Vec<String> = w
            .clients
            .iter()
            .zip(&rec.used)
            .filter(|(_, s)| s.at(from) > 0.0)
            .map(|(c, s)| {
                format!(
                    "{} {:.3} since {:.3}",
                    c.spec.name,
                    s.at(from),
                    since(s, from) - start
                )
            })
            .collect();
        out.push(format!(
            "over {:.3}–{:.3} s by up to {worst:.2}; in use at its start: {}",
            from - start,
            to - start,
            using.join(", ")
        ));
    }
    if over.len() > MOST_STRETCHES {
        out.push(format!(
            "… and {} more stretches over",
            over.len() - MOST_STRETCHES
        ));
    }
    out.extend(past_leases(w, rec, readings, &over, start));
    out
}

/// For each client of ours, what it used beyond what its leaf counted for
/// it during the stretches `over` (or that no lease of it was read).
fn past_leases(
    w: &World,
    rec: &Record,
    readings: &[Reading],
    over: &[(f64, f64, f64)],
    start: f64,
) -> Vec<String> {
    let mut out = Vec::new();
    for (c, used) in w.clients.iter().zip(&rec.used) {
        if c.spec.kind == Kind::Go {
            continue;
        }
        let Some(counted) = leased(readings, &c.spec.name) else {
            out.push(format!(
                "{}: no lease of it read from its leaf",
                c.spec.name
            ));
            continue;
        };
        if let Some((first, secs, most)) = past_lease(used, &counted, over) {
            out.push(format!(
                "{} used up to {most:.3} more than its leaf counted for it, {secs:.2} s in all, first at {:.3} s",
                c.spec.name,
                first - start
            ));
        }
    }
    out
}

/// When `s` last changed at or before `t`.
fn since(s: &Steps, t: f64) -> f64 {
    s.points()
        .iter()
        .take_while(|p| p.0 <= t)
        .last()
        .map_or(f64::NAN, |p| p.0)
}

/// Within `over`'s stretches (from a reading interval before each): when
/// a client first used more than its leaf counted for it, for how long,
/// and by how much at most; `None` if it never did.
fn past_lease(used: &Steps, counted: &Steps, over: &[(f64, f64, f64)]) -> Option<(f64, f64, f64)> {
    let (mut first, mut secs, mut most) = (None, 0.0, 0.0f64);
    for &(from, to, _) in over {
        let mut t = from - READING_LAG;
        while t < to {
            let beyond = used.at(t) - counted.max_over(t, t + READING_LAG);
            if beyond > 1e-9 {
                first.get_or_insert(t);
                secs += STEP;
                most = most.max(beyond);
            }
            t += STEP;
        }
    }
    first.map(|f| (f, secs, most))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(points: &[(f64, f64)]) -> Steps {
        let mut s = Steps::default();
        for &(t, v) in points {
            s.set(t, v);
        }
        s
    }

    #[test]
    fn stretches_are_cut_where_use_comes_back_within_the_bound() {
        let p = |t: f64, used: f64| Point {
            t,
            used,
            bound: 100.0,
            goal: 100.0,
        };
        let points = [
            p(0.0, 100.0),
            p(1.0, 112.5),
            p(2.0, 105.0),
            p(3.0, 100.0),
            p(4.0, 101.0),
            p(5.0, 90.0),
        ];
        assert_eq!(stretches(&points), vec![(1.0, 3.0, 12.5), (4.0, 5.0, 1.0)]);
    }

    #[test]
    fn a_client_past_its_lease_is_named_and_a_fresh_grant_is_not() {
        // The leaf counted 12.5 until 10 s; the client used it until 13 s.
        let used = steps(&[(0.0, 12.5), (13.0, 0.0)]);
        let counted = steps(&[(0.0, 12.5), (10.0, 0.0)]);
        let (first, secs, most) = past_lease(&used, &counted, &[(9.0, 14.0, 12.5)]).unwrap();
        assert!((first - 10.0).abs() < 0.06 && (secs - 3.0).abs() < 0.1 && most == 12.5);
        // A grant the leaf's next reading shows 0.2 s after the client
        // reported it is not past any lease.
        let used = steps(&[(0.0, 10.0), (5.0, 12.5)]);
        let counted = steps(&[(0.0, 10.0), (5.2, 12.5)]);
        assert!(past_lease(&used, &counted, &[(4.0, 8.0, 1.0)]).is_none());
    }
}
