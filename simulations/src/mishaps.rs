//! `mishaps.md`: re-convergence by kind of mishap, the dips out of the
//! band, what the longest re-convergence would be without the dips after
//! each kind, and what it would be if hand-overs had no gap
//! ([`Timeline::gapless`]), over the runs of one `doorman-sim run`
//! (docs/simulation.md, "What limits us" and "Scheduled hand-overs",
//! whose analysis is docs/notes/simulation-rounds-2.md).
//!
//! Must not: define the band or the hold (`summary.rs`'s [`Band`] does);
//! every figure here comes from it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::engine::MarkKind;
use crate::summary::{Band, Summary, Timeline};

/// A re-convergence longer than this counts against issue 17's goal.
const GOAL_S: f64 = 30.0;

/// One dip out of the band.
#[derive(Debug, Clone, PartialEq)]
pub struct Dip {
    /// Its length in samples (seconds).
    pub secs: usize,
    /// Its lowest ratio (Σ has / min(Σ wants, capacity)).
    pub lowest: f64,
    /// The kind of the last mark that started at or before it.
    pub after: Option<MarkKind>,
}

/// The report over `runs` (one per seed), as Markdown.
pub fn report(runs: &[Summary]) -> String {
    let per_kind = by_kind(runs.iter().map(|r| &r.timeline));
    let dips: Vec<_> = runs.iter().flat_map(|r| seed_dips(&r.timeline)).collect();
    let mut out = String::new();
    kinds_table(&mut out, &per_kind, runs.len());
    dips_line(&mut out, &dips, runs);
    what_if(&mut out, &dips, runs);
    gapless_line(&mut out, runs);
    out
}

/// The re-convergence after every mark of `timelines` (from its end,
/// [`Band::reconvergence`]), by kind in the tables' order.
pub fn by_kind<'a>(timelines: impl IntoIterator<Item = &'a Timeline>) -> BTreeMap<Order, Vec<f64>> {
    let mut per_kind: BTreeMap<Order, Vec<f64>> = BTreeMap::new();
    for tl in timelines {
        for &(_, end, kind) in &tl.marks {
            let r = tl.band.reconvergence(end);
            per_kind.entry(Order(kind)).or_default().push(r);
        }
    }
    per_kind
}

/// Re-convergence as if every hand-over had no gap ([`Timeline::gapless`]).
fn gapless_line(out: &mut String, runs: &[Summary]) {
    let every: Vec<f64> = runs
        .iter()
        .flat_map(|r| {
            let tl = &r.timeline;
            tl.marks
                .iter()
                .map(|&(_, end, _)| tl.gapless.reconvergence(end))
        })
        .collect();
    let _ = writeln!(
        out,
        "\nif every unit idle in a node's books were held at once by a client that wants it \
         (a bound for hand-overs without a gap; docs/simulation.md, \"Scheduled hand-overs\"): \
         longest re-convergence {:.0} s; {} of {} mishaps take longer than {GOAL_S} s",
        longest(&every),
        over_goal(&every),
        every.len(),
    );
}

/// The longest of `v` (0 if none).
pub fn longest(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// How many of `v` exceed the goal.
fn over_goal(v: &[f64]) -> usize {
    v.iter().filter(|&&x| x > GOAL_S).count()
}

/// Kinds in the order of docs/simulation.md's tables: spikes, then from
/// the deepest nodes up, a cut-off before a lost master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order(pub MarkKind);

impl Order {
    fn key(&self) -> (usize, usize, usize) {
        match self.0 {
            MarkKind::Spike => (0, 0, 0),
            MarkKind::CutOff(d) => (1, usize::MAX - d, 0),
            MarkKind::MasterLost(d) => (1, usize::MAX - d, 1),
            MarkKind::Election(d) => (1, usize::MAX - d, 2),
        }
    }
}

impl PartialOrd for Order {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Order {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// The dips of one run from its `settle` on, each with its samples (first
/// index, last index + 1).
pub fn seed_dips(tl: &Timeline) -> Vec<(Dip, (usize, usize))> {
    tl.band
        .dips(tl.settle)
        .into_iter()
        .map(|(a, z)| {
            let start = tl.band.sample(a).0;
            let lowest = (a..z)
                .map(|i| tl.band.sample(i).1)
                .fold(f64::INFINITY, f64::min);
            let after = tl.marks.iter().rev().find(|m| m.0 <= start).map(|m| m.2);
            let dip = Dip {
                secs: z - a,
                lowest,
                after,
            };
            (dip, (a, z))
        })
        .collect()
}

/// The `q` quantile of `v` (the element at rank ⌊q · (n − 1)⌋ of the
/// sorted values; the default, 0, for none).
pub fn quantile<T: PartialOrd + Copy + Default>(v: &[T], q: f64) -> T {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get((q * (v.len().max(1) - 1) as f64) as usize)
        .copied()
        .unwrap_or_default()
}

fn kinds_table(out: &mut String, per_kind: &BTreeMap<Order, Vec<f64>>, seeds: usize) {
    let every: Vec<f64> = per_kind.values().flatten().copied().collect();
    let _ = writeln!(
        out,
        "{} mishaps over {seeds} seeds; {} take longer than {GOAL_S} s; median {:.0} s\n",
        every.len(),
        over_goal(&every),
        quantile(&every, 0.5)
    );
    out.push_str(
        "| mishap | count | > 30 s | median | p90 | longest |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (k, v) in per_kind {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} s | {:.0} s | {:.0} s |",
            k.0,
            v.len(),
            over_goal(v),
            quantile(v, 0.5),
            quantile(v, 0.9),
            longest(v)
        );
    }
}

fn dips_line(out: &mut String, dips: &[(Dip, (usize, usize))], runs: &[Summary]) {
    let lengths: Vec<usize> = dips.iter().map(|d| d.0.secs).collect();
    let lows: Vec<f64> = dips.iter().map(|d| d.0.lowest).collect();
    let total: usize = lengths.iter().sum();
    let hours = runs.iter().map(|r| r.timeline.duration).sum::<f64>() / 3600.0;
    let _ = writeln!(
        out,
        "\nout of the band (from each run's settle): {total} s in {} dips over {hours:.1} \
         simulated hours ({:.0} s per hour); median dip {} s, lowest {:.1} %; 90 % last \
         under {} s; longest {} s, deepest {:.1} %",
        dips.len(),
        total as f64 / hours.max(1e-9),
        quantile(&lengths, 0.5),
        100.0 * quantile(&lows, 0.5),
        quantile(&lengths, 0.9) + 1,
        lengths.iter().max().unwrap_or(&0),
        100.0 * lows.iter().copied().fold(1.0, f64::min),
    );
    let deepest = dips.iter().min_by(|a, b| a.0.lowest.total_cmp(&b.0.lowest));
    if let Some((d, _)) = deepest {
        let after = d
            .after
            .map_or("no mishap".to_string(), |k| format!("a {k}"));
        let _ = writeln!(
            out,
            "\nthe deepest dip ({:.1} %, {} s) came after {after}",
            100.0 * d.lowest,
            d.secs
        );
    }
    worst_seed_line(out, runs);
}

/// The seed with the most seconds out of the band, per hour.
fn worst_seed_line(out: &mut String, runs: &[Summary]) {
    let per_hour = |r: &Summary| {
        let secs: usize = seed_dips(&r.timeline).iter().map(|d| d.0.secs).sum();
        (secs as f64 * 3600.0 / r.timeline.duration.max(1.0), r.seed)
    };
    let worst = runs.iter().map(per_hour).max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((secs, seed)) = worst {
        let _ = writeln!(
            out,
            "\nworst seed out of the band: seed {seed}, {secs:.0} s per hour"
        );
    }
}

/// The dips by the kind of mark before them, and the longest
/// re-convergence over the runs if the dips after that kind (and the kinds
/// above it in the table, most seconds first) were not there.
fn what_if(out: &mut String, dips: &[(Dip, (usize, usize))], runs: &[Summary]) {
    let name = |k: Option<MarkKind>| k.map_or("none".to_string(), |k| k.to_string());
    let mut by_kind: BTreeMap<Option<MarkKind>, (usize, usize)> = BTreeMap::new();
    for (d, _) in dips {
        let e = by_kind.entry(d.after).or_default();
        *e = (e.0 + 1, e.1 + d.secs);
    }
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort_by_key(|&(k, (_, secs))| (std::cmp::Reverse(secs), name(k)));
    out.push_str("\n| dips after | dips | seconds | longest re-convergence without these and the rows above |\n");
    out.push_str("|---|---:|---:|---:|\n");
    let mut gone = Vec::new();
    for (k, (n, secs)) in kinds {
        gone.push(k);
        let longest = runs
            .iter()
            .map(|r| longest_without(&r.timeline, &gone))
            .fold(0.0, f64::max);
        let _ = writeln!(out, "| {} | {n} | {secs} | {longest:.0} s |", name(k));
    }
}

/// The longest re-convergence of one run with the dips after the kinds in
/// `gone` counted as in the band.
fn longest_without(tl: &Timeline, gone: &[Option<MarkKind>]) -> f64 {
    let runs: Vec<(usize, usize)> = seed_dips(tl)
        .into_iter()
        .filter(|(d, _)| gone.contains(&d.after))
        .map(|(_, r)| r)
        .collect();
    let band: Band = tl.band.without(&runs);
    tl.marks
        .iter()
        .map(|&(_, end, _)| band.reconvergence(end))
        .fold(0.0, f64::max)
}
