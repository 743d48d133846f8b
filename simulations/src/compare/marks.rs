//! Each mark on both sides: when, after it, Σ has first left the band and
//! when it came back (a lease that ran out shows as the start of a dip, so
//! the comparison sees *when* leases end, not only for how long in sum),
//! and the marks the fault harness could not apply to the real tree
//! (`real.json`'s `unapplied`), each a missed target.
//!
//! Must not: define the band or a dip (`summary.rs`, `mishaps.rs` do).

use std::path::Path;

use crate::mishaps::seed_dips;
use crate::summary::Timeline;

use super::targets::{Row, Unit};

/// A dip's start, and its end, on the real side within this many seconds
/// of the simulated one's. The runs are sampled once a second, each side
/// seeing a crossing at the first sample after it: two crossings less
/// than a second apart can land a second apart. The second second is for
/// what the replay cannot pin to the millisecond (process start-up, RPC
/// latencies that move every refresh timer a little at each answer).
pub const MARK_EDGE_S: f64 = 2.0;

/// A dip belongs to a mark when it starts between the mark's start and
/// this many seconds after its end (and before the next mark starts).
pub const MARK_WINDOW_S: f64 = 60.0;

/// The first dip after a mark: its first second out of the band and its
/// first second back in it (the run's end if never).
pub type Edges = (f64, f64);

/// Every dip (from settle) of a timeline as its edges.
fn dips(tl: &Timeline) -> Vec<Edges> {
    seed_dips(tl)
        .into_iter()
        .map(|(_, (a, z))| {
            let start = tl.band.sample(a).0;
            let end = if z < tl.band.len() {
                tl.band.sample(z).0
            } else {
                tl.duration
            };
            (start, end)
        })
        .collect()
}

/// Per mark, the first dip that starts in its window.
pub fn after_each_mark(tl: &Timeline) -> Vec<Option<Edges>> {
    let all = dips(tl);
    let marks = &tl.marks;
    (0..marks.len())
        .map(|i| {
            let (t, end, _) = marks[i];
            let next = marks.get(i + 1).map_or(f64::INFINITY, |m| m.0);
            let until = (end + MARK_WINDOW_S).min(next);
            all.iter().copied().find(|d| d.0 >= t && d.0 < until)
        })
        .collect()
}

/// The marks after which either run dips.
pub fn dipping(sim: &Timeline, real: &Timeline) -> usize {
    let (s, r) = (after_each_mark(sim), after_each_mark(real));
    s.iter()
        .zip(&r)
        .filter(|(a, b)| a.is_some() || b.is_some())
        .count()
}

/// The rows of each mark's dip on both sides: its start within
/// [`MARK_EDGE_S`] (no dip on either side: met; on one side only:
/// missed), its end shown. When a dip ends follows the retries of the
/// holders cut off, which the replay does not pin (backoff jitter, TCP's
/// retransmission of a connection cut mid-way; docs/sim-vs-real.md).
pub fn rows(sim: &Timeline, real: &Timeline) -> Vec<Row> {
    let (s, r) = (after_each_mark(sim), after_each_mark(real));
    let target = format!("± {MARK_EDGE_S:.0} s");
    let mut rows = Vec::new();
    for (i, m) in sim.marks.iter().enumerate() {
        let (sd, rd) = (s[i], r.get(i).copied().flatten());
        let name = format!("{} at {:.0} s: dip", m.2, m.0);
        let start = Row::shown(
            &format!("{name} starts"),
            Unit::Seconds,
            sd.map(|d| d.0),
            rd.map(|d| d.0),
        );
        rows.push(start.within(MARK_EDGE_S, target.clone()));
        let end = |d: Edges| d.1;
        rows.push(Row::shown(
            &format!("{name} ends"),
            Unit::Seconds,
            sd.map(end),
            rd.map(end),
        ));
    }
    rows
}

/// The marks the harness could not apply to the real run in `dir`
/// (`real.json`'s `unapplied`; none without the file, as for a run the
/// simulator wrote).
pub fn unapplied(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join("real.json")) else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let list = v["unapplied"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|x| x.as_str().unwrap_or("?").to_string())
        .collect()
}

/// The row of the marks not applied: none allowed.
pub fn unapplied_row(unapplied: &[String]) -> Row {
    let figure = if unapplied.is_empty() {
        "marks the harness could not apply".to_string()
    } else {
        format!(
            "marks the harness could not apply ({})",
            unapplied.join("; ")
        )
    };
    let mut row = Row::shown(&figure, Unit::Count, None, Some(unapplied.len() as f64));
    row.target = Some("0".into());
    row.ok = Some(unapplied.is_empty());
    row
}
