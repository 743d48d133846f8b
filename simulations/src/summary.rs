//! The figures of a run, computed from the time series (one sample per
//! simulated second) and the marks (demand shifts and mishaps).
//!
//! Must not: change the run; every figure is derived from the samples.

use doorman_algorithms::{Amount, Demand, Kind, Shares};
use serde::Serialize;

use crate::engine::Sim;

/// What `summary.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// Simulated seconds.
    pub simulated_s: u64,
    /// End clients.
    pub clients: usize,
    /// Server nodes.
    pub nodes: usize,
    /// Events processed.
    pub events: u64,
    /// Mean Σ client has / capacity over the samples after `settle` where
    /// Σ wants ≥ capacity.
    pub mean_utilisation: Option<f64>,
    /// Samples the utilisation was averaged over.
    pub utilisation_samples: usize,
    /// Times Σ client has went above capacity.
    pub shortfall_events: usize,
    /// Max Σ client has / capacity.
    pub max_over_capacity: f64,
    /// Mean Σ client has / capacity over the samples above capacity.
    pub mean_over_capacity: Option<f64>,
    /// Longest time after a mark until Σ has is back within 2 % of
    /// min(Σ wants, capacity), seconds.
    pub longest_reconvergence_s: Option<f64>,
    /// Mean Jain's index of has / fair-share target over clients, where
    /// demand exceeds capacity (sampled every 10 s).
    pub jain_fairness: Option<f64>,
    /// Wall-clock seconds the run took (not deterministic).
    pub wall_clock_s: f64,
    /// Peak resident memory of the simulator process, KiB (Linux).
    pub peak_rss_kib: Option<u64>,
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn jain(per: &[(f64, f64)], capacity: f64) -> Option<f64> {
    let mut shares: Shares<()> = Shares::new(Kind::FairShare, Amount::new("c", capacity).ok()?);
    let ids: Vec<_> = per
        .iter()
        .map(|(_, w)| {
            shares
                .insert(&[Demand::new(0, 1, w.max(0.0)).ok()?], ())
                .into()
        })
        .collect::<Option<Vec<_>>>()?;
    let mut xs = Vec::new();
    for (id, (has, _)) in ids.iter().zip(per) {
        let t = shares.target(*id);
        if t > 1e-9 {
            xs.push(has / t);
        }
    }
    if xs.is_empty() {
        return None;
    }
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    (s2 > 0.0).then(|| s * s / (xs.len() as f64 * s2))
}

/// Computes the summary of a finished run.
pub fn summarize(sim: &Sim, seed: u64, wall_clock_s: f64) -> Summary {
    let cap = sim.capacity;
    let settle = sim.scenario.settle as f64;
    let mut util = Vec::new();
    let mut over = Vec::new();
    let mut shortfalls = 0;
    let mut was_over = false;
    let mut max_over: f64 = 0.0;
    let mut jains = Vec::new();
    for s in &sim.samples {
        let ratio = if cap > 0.0 { s.client_has / cap } else { 0.0 };
        max_over = max_over.max(ratio);
        let is_over = s.client_has > cap * (1.0 + 1e-9);
        if is_over {
            over.push(ratio);
            if !was_over {
                shortfalls += 1;
            }
        }
        was_over = is_over;
        if s.t >= settle && s.client_wants >= cap {
            util.push(ratio);
            if (s.t as u64).is_multiple_of(10) && !s.per_client.is_empty() {
                if let Some(j) = jain(&s.per_client, cap) {
                    jains.push(j);
                }
            }
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut longest: Option<f64> = None;
    for m in &sim.marks {
        let t = sim
            .samples
            .iter()
            .filter(|s| s.t > m.t)
            .find(|s| {
                let goal = s.client_wants.min(cap);
                (s.client_has - goal).abs() <= 0.02 * goal.max(1e-9)
            })
            .map(|s| s.t - m.t);
        if let Some(t) = t {
            longest = Some(longest.map_or(t, |l: f64| l.max(t)));
        }
    }
    Summary {
        scenario: sim.scenario.name.clone(),
        seed,
        simulated_s: sim.scenario.duration,
        clients: sim.scenario.clients_per_leaf * leaves(&sim.scenario.tree),
        nodes: sim.nodes.len(),
        events: sim.events_run,
        mean_utilisation: mean(&util),
        utilisation_samples: util.len(),
        shortfall_events: shortfalls,
        max_over_capacity: max_over,
        mean_over_capacity: mean(&over),
        longest_reconvergence_s: longest,
        jain_fairness: mean(&jains),
        wall_clock_s,
        peak_rss_kib: peak_rss_kib(),
    }
}

/// Number of leaves of a tree given as fan-outs per level.
pub fn leaves(tree: &[usize]) -> usize {
    tree.iter().product::<usize>().max(1)
}
