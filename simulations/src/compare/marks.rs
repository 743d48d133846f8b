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

use super::targets::{Row, Unit, DIP_START_S, MARK_EDGE_S};

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
/// [`DIP_START_S`] (no dip on either side: met; on one side only: met if
/// that dip lasts at most [`MARK_EDGE_S`], the same lease renewed that
/// much before its end on the other side, missed if longer), its end
/// shown. When a dip ends follows the retries of the holders cut off,
/// which the replay does not pin (backoff jitter, TCP's retransmissions;
/// docs/sim-vs-real.md).
pub fn rows(sim: &Timeline, real: &Timeline) -> Vec<Row> {
    let (s, r) = (after_each_mark(sim), after_each_mark(real));
    let mut rows = Vec::new();
    for (i, m) in sim.marks.iter().enumerate() {
        let (sd, rd) = (s[i], r.get(i).copied().flatten());
        let name = format!("{} at {:.0} s: dip", m.2, m.0);
        let starts = format!("{name} starts");
        let start = Row::shown(&starts, Unit::Seconds, sd.map(|d| d.0), rd.map(|d| d.0));
        rows.push(start_target(start, sd.or(rd)));
        let end = |d: Edges| d.1;
        let ends = format!("{name} ends");
        rows.push(Row::shown(&ends, Unit::Seconds, sd.map(end), rd.map(end)));
    }
    rows
}

/// A dip start's target; `dip` is either side's dip, for the one-sided
/// case.
fn start_target(row: Row, dip: Option<Edges>) -> Row {
    let target = format!("± {DIP_START_S:.0} s");
    let one_sided = row.simulated.is_some() != row.real.is_some();
    let short = dip.is_some_and(|d| d.1 - d.0 <= MARK_EDGE_S);
    if one_sided && short {
        let mut row = row;
        row.target = Some(format!(
            "{target}, or one side only for ≤ {MARK_EDGE_S:.0} s"
        ));
        row.ok = Some(true);
        return row;
    }
    row.within(DIP_START_S, target)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{MarkKind, Sample};
    use crate::summary::Band;

    /// 100 s at capacity 100 (wants 200), Σ has 50 over `dip`, one
    /// datacenter cut off from 30 to 35 s.
    fn timeline(dip: std::ops::Range<u32>) -> Timeline {
        let samples: Vec<Sample> = (0..=100)
            .map(|t| Sample {
                t: f64::from(t),
                levels: Vec::new(),
                nodes: Vec::new(),
                client_wants: 200.0,
                client_has: if dip.contains(&t) { 50.0 } else { 100.0 },
                per_client: Vec::new(),
            })
            .collect();
        Timeline {
            band: Band::of(&samples, 100.0, 100.0),
            gapless: Band::default(),
            marks: vec![(30.0, 35.0, MarkKind::CutOff(2))],
            settle: 10.0,
            duration: 100.0,
        }
    }

    #[test]
    fn a_dip_belongs_to_the_mark_before_it_and_its_start_is_gated() {
        let sim = timeline(40..50);
        assert_eq!(after_each_mark(&sim), vec![Some((40.0, 50.0))]);
        // Its start 9 s later (a renewal cycle and a sample), its end 5 s
        // later: met (ends are shown).
        let rows = rows(&sim, &timeline(49..55));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].ok, Some(true), "{}", rows[0].describe());
        assert_eq!((rows[1].ok, rows[1].real), (None, Some(55.0)));
        // 10 s later or earlier: missed.
        for off in [50..60, 30..50] {
            assert_eq!(rows_of(&sim, &timeline(off)), Some(false));
        }
        // No dip on one side: missed, unless the other's lasts at most 2 s
        // (a lease renewed that much before its end here); on neither: met.
        assert_eq!(rows_of(&sim, &timeline(0..0)), Some(false));
        assert_eq!(rows_of(&timeline(40..42), &timeline(0..0)), Some(true));
        assert_eq!(rows_of(&timeline(0..0), &timeline(40..43)), Some(false));
        assert_eq!(rows_of(&timeline(0..0), &timeline(0..0)), Some(true));
        assert_eq!(dipping(&sim, &timeline(0..0)), 1);
        // A dip past the mark's window is not the mark's.
        assert_eq!(after_each_mark(&timeline(96..99)), vec![None]);
    }

    fn rows_of(sim: &Timeline, real: &Timeline) -> Option<bool> {
        rows(sim, real)[0].ok
    }

    #[test]
    fn every_mark_the_harness_could_not_apply_fails() {
        let dir = std::env::temp_dir().join(format!("marks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(
            unapplied(&dir).is_empty(),
            "a simulated run has no real.json"
        );
        let json = r#"{"unapplied": ["n1: master lost (not applied: no master)"]}"#;
        std::fs::write(dir.join("real.json"), json).unwrap();
        let list = unapplied(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(list.len(), 1);
        let row = unapplied_row(&list);
        assert_eq!((row.ok, row.real), (Some(false), Some(1.0)));
        assert!(row.figure.contains("no master"), "{}", row.figure);
        assert_eq!(unapplied_row(&[]).ok, Some(true));
    }
}
