//! One scenario over many seeds: the runs in parallel on std threads (each
//! run is deterministic and independent, so the results do not depend on
//! the number of threads), and per figure the mean, min, max and 95th
//! percentile over the seeds, with the seed of the worst value.
//!
//! Must not: change a run or a figure; it only gathers summaries.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::scenario::Scenario;
use crate::summary::Summary;

/// A figure over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    /// Seeds that had a value.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// 95th percentile (nearest rank).
    pub p95: f64,
    /// The seed of the worst value (for this figure, larger or smaller).
    pub worst_seed: u64,
}

/// What `summary.json` holds for a seed range.
#[derive(Debug, Clone, Serialize)]
pub struct SeedsSummary {
    /// The scenario's name.
    pub scenario: String,
    /// The profile.
    pub profile: String,
    /// The seeds run.
    pub seeds: Vec<u64>,
    /// Per figure, over the seeds.
    pub stats: BTreeMap<&'static str, Stat>,
    /// Every run's summary, by seed.
    pub runs: Vec<Summary>,
}

type Figure = fn(&Summary) -> Option<f64>;

/// The figures gathered, and whether larger is worse.
pub const FIGURES: [(&str, Figure, bool); 11] = [
    ("doc_utilisation", |s| s.doc_utilisation, false),
    (
        "shortfall_events",
        |s| Some(s.shortfall_events as f64),
        true,
    ),
    ("max_over_capacity", |s| Some(s.max_over_capacity), true),
    ("mean_over_capacity", |s| s.mean_over_capacity, true),
    ("doc_utilisation_5s", |s| s.doc_utilisation_5s, false),
    (
        "shortfall_events_5s",
        |s| Some(s.shortfall_events_5s as f64),
        true,
    ),
    (
        "max_over_capacity_5s",
        |s| Some(s.max_over_capacity_5s),
        true,
    ),
    ("ours_utilisation", |s| s.ours_utilisation, false),
    ("reconvergence_s", |s| s.reconvergence_s, true),
    (
        "reconvergence_from_start_s",
        |s| s.reconvergence_from_start_s,
        true,
    ),
    ("wall_clock_s", |s| Some(s.wall_clock_s), true),
];

/// Mean, min, max, p95 and worst seed of one figure.
pub fn stat(runs: &[Summary], f: Figure, larger_is_worse: bool) -> Option<Stat> {
    let mut v: Vec<(f64, u64)> = runs
        .iter()
        .filter_map(|s| f(s).map(|x| (x, s.seed)))
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let n = v.len();
    let rank = ((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1;
    let worst = if larger_is_worse { v[n - 1] } else { v[0] };
    Some(Stat {
        n,
        mean: v.iter().map(|x| x.0).sum::<f64>() / n as f64,
        min: v[0].0,
        max: v[n - 1].0,
        p95: v[rank].0,
        worst_seed: worst.1,
    })
}

/// Runs `scenario` for every seed on `jobs` threads; when `out` is given,
/// each run's files go to `out/seed-N`. Summaries come back by seed.
pub fn run_seeds(
    scenario: &Scenario,
    seeds: &[u64],
    jobs: usize,
    out: Option<&Path>,
) -> anyhow::Result<SeedsSummary> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, seeds.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else {
                    return;
                };
                let r = crate::run(scenario.clone(), seed).and_then(|(sim, s)| {
                    if let Some(dir) = out {
                        crate::output::write_all(&sim, &s, &dir.join(format!("seed-{seed}")))?;
                    }
                    Ok(s)
                });
                if let Ok(mut v) = results.lock() {
                    v.push(r);
                }
            });
        }
    });
    let mut runs = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a run panicked"))?
        .into_iter()
        .collect::<anyhow::Result<Vec<Summary>>>()?;
    runs.sort_by_key(|s| s.seed);
    let stats = FIGURES
        .iter()
        .filter_map(|&(name, f, worse)| Some((name, stat(&runs, f, worse)?)))
        .collect();
    Ok(SeedsSummary {
        scenario: scenario.name.clone(),
        profile: scenario.profile.clone(),
        seeds: seeds.to_vec(),
        stats,
        runs,
    })
}

/// Parses `A..B` (inclusive, as in `--seeds 1..30`) or a single seed.
pub fn parse_range(s: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("expected a seed or a range like 1..30, got {s:?}");
    match s.split_once("..") {
        Some((a, b)) => {
            let a: u64 = a.trim().parse().map_err(|_| bad())?;
            let b: u64 = b
                .trim_start_matches('=')
                .trim()
                .parse()
                .map_err(|_| bad())?;
            if a > b || b - a >= 100_000 {
                return Err(bad());
            }
            Ok((a..=b).collect())
        }
        None => Ok(vec![s.trim().parse().map_err(|_| bad())?]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inclusive() {
        assert_eq!(parse_range("1..3"), Ok(vec![1, 2, 3]));
        assert_eq!(parse_range("1..=2"), Ok(vec![1, 2]));
        assert_eq!(parse_range("7"), Ok(vec![7]));
        assert!(parse_range("3..1").is_err());
        assert!(parse_range("x").is_err());
    }
}
