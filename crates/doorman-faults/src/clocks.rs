//! Whether the wall clocks the harness set took effect: every process of
//! ours starts (and restarts) with an offset, and some have it stepped
//! while they run (libfaketime's offset file, re-read within a second).
//! Each says its wall clock back (clients in every report, servers on
//! their status page, `wall_clock_ms`; the status page's `now` is the
//! lease clock, which a step must not move); the harness compares it with
//! the true time (its own clock is not faked) and the offset it set. A
//! reading off by more than [`TOLERANCE_S`] once the offset has settled,
//! or an offset set for a while and never read back, fails the run: a
//! skewed row of "Faults we test" proves nothing if the skew never
//! happened.
//!
//! Must not: set a clock.

use crate::procs::{Life, Proc};

/// How far a reading may be from the offset set, s (whole-second offsets;
/// a report is stamped a little after its wall clock was read).
pub const TOLERANCE_S: f64 = 1.5;

/// How long after a change the process may still read the old offset, s
/// (libfaketime re-reads its file within a second).
const SETTLE_S: f64 = 2.5;

/// A process's wall clock as it said it: when (monotonic s) and what
/// (ms since the epoch).
pub type Reading = (f64, f64);

/// The offset set for `p` at monotonic `t`, and since when.
fn set_at(p: &Proc, t: f64) -> (i64, f64) {
    let mut out = (p.spec.clock, f64::NEG_INFINITY);
    for &(at, l) in p.life.iter().filter(|(at, _)| *at <= t) {
        if let Life::Started(o) | Life::Clock(o) = l {
            out = (o, at);
        }
    }
    out
}

/// What is wrong with `p`'s wall clock readings (`wall_base`: the true
/// wall clock, s, minus the monotonic one; times printed from `start`;
/// `until`: the end of the run).
pub fn check(
    p: &Proc,
    readings: &[Reading],
    wall_base: f64,
    (start, until): (f64, f64),
) -> Vec<String> {
    let mut out = Vec::new();
    let name = &p.spec.name;
    for &(t, ms) in readings {
        let (set, since) = set_at(p, t);
        let off = ms / 1000.0 - (wall_base + t);
        if t - since > SETTLE_S && (off - set as f64).abs() > TOLERANCE_S {
            out.push(format!(
                "{name}'s wall clock read {off:+.1} s off at {:.1} s, where {set:+} s was set",
                t - start
            ));
            break;
        }
    }
    for (from, to, set) in segments(p, until) {
        let seen = readings
            .iter()
            .any(|&(t, _)| t > from + SETTLE_S && t <= to);
        if set != 0 && to - from > 2.0 * SETTLE_S && !seen {
            out.push(format!(
                "{name}'s wall clock was set {set:+} s from {:.1} to {:.1} s and never read back",
                from - start,
                to - start
            ));
        }
    }
    out
}

/// The stretches `p` ran with one offset: (from, to, offset).
fn segments(p: &Proc, until: f64) -> Vec<(f64, f64, i64)> {
    let mut out = Vec::new();
    let mut open: Option<(f64, i64)> = None;
    for &(t, l) in &p.life {
        let next = match l {
            Life::Started(o) | Life::Clock(o) => Some(Some(o)),
            Life::Killed | Life::Exited | Life::Stopped => Some(None),
            _ => None,
        };
        let Some(next) = next else { continue };
        if let Some((from, o)) = open.take() {
            out.push((from, t, o));
        }
        open = next.map(|o| (t, o));
    }
    if let Some((from, o)) = open {
        out.push((from, until, o));
    }
    out
}
