//! The figures of a run, computed from the time series (one sample per
//! simulated second) and the marks (demand shifts and mishaps): the design
//! doc's, as it defines them, and ours beside them.
//!
//! Must not: change the run; every figure is derived from the samples.

use doorman_algorithms::{Amount, Demand, Kind, Shares};
use serde::Serialize;

use crate::engine::{RpcCounts, Sample, Sim};

/// What `summary.json` holds for one run. The design doc's figures are
/// computed as it defines them (quoted in `docs/simulation.md`), from one
/// sample per simulated second, and again from one sample every 5 s as the
/// original simulation's reporter took them; ours are labelled `ours_`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The scenario's name.
    pub scenario: String,
    /// The profile (`ours`, `original`).
    pub profile: String,
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
    /// Design doc: "hands out on average …% of all available capacity
    /// (after the initial startup learning mode)": mean Σ client has /
    /// capacity over every sample from `settle` on.
    pub doc_utilisation: Option<f64>,
    /// Design doc: times "the capacity handed out by the system rises above
    /// the capacity limit" (Σ client has > capacity after a sample that was
    /// not).
    pub shortfall_events: usize,
    /// Design doc: "the maximum capacity handed out", / capacity.
    pub max_over_capacity: f64,
    /// Design doc: "the average over capacity situation": mean Σ client
    /// has / capacity over the samples above capacity.
    pub mean_over_capacity: Option<f64>,
    /// `doc_utilisation` from one sample every 5 s (the original's reporter).
    pub doc_utilisation_5s: Option<f64>,
    /// `shortfall_events` from one sample every 5 s.
    pub shortfall_events_5s: usize,
    /// `max_over_capacity` from one sample every 5 s.
    pub max_over_capacity_5s: f64,
    /// Ours: mean Σ client has / capacity over the samples from `settle` on
    /// where Σ wants ≥ capacity.
    pub ours_utilisation: Option<f64>,
    /// Samples `ours_utilisation` was averaged over.
    pub utilisation_samples: usize,
    /// Longest re-convergence, seconds: for every mark, from the end of its
    /// disturbance (the spike; the new master elected; the node reachable
    /// again) until Σ client has is within [`BAND`] of min(Σ wants,
    /// capacity) and stays there for [`HOLD_S`] (or to the end of the run).
    pub reconvergence_s: Option<f64>,
    /// The same, measured from the start of each mark (an outage's own
    /// length counts).
    pub reconvergence_from_start_s: Option<f64>,
    /// Marks after which Σ has never settled in the band before the end
    /// (each counts the rest of the run as its re-convergence).
    pub unconverged_marks: usize,
    /// Mean Jain's index of has / fair-share target over clients, where
    /// demand exceeds capacity (sampled every 10 s).
    pub jain_fairness: Option<f64>,
    /// What the RPCs did.
    pub rpcs: RpcCounts,
    /// What the root carries: capacity RPCs its master answered per
    /// simulated second over the run, and its live leases and resources
    /// at the end (its state, and so its memory, grows with these).
    pub root: RootLoad,
    /// Wall-clock seconds the run took (not deterministic).
    pub wall_clock_s: f64,
    /// Peak resident memory of the simulator process, KiB (Linux).
    pub peak_rss_kib: Option<u64>,
}

/// The root's load (see [`Summary::root`]).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct RootLoad {
    /// Capacity RPCs the root's master answered per simulated second.
    pub rpcs_per_s: f64,
    /// Live leases in the root's core at the end.
    pub leases: usize,
    /// Resources with state in the root's core at the end.
    pub resources: usize,
}

/// The re-convergence band: within 2 % of min(Σ wants, capacity).
pub const BAND: f64 = 0.02;

/// How long Σ has must stay in the band to count as re-converged, seconds.
pub const HOLD_S: f64 = 60.0;

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

/// The design doc's shortfall figures and utilisation over `samples`
/// (ratios Σ has / capacity, from `settle` on for the utilisation).
struct Doc {
    utilisation: Option<f64>,
    events: usize,
    max: f64,
    mean_over: Option<f64>,
}

fn doc_figures<'a>(samples: impl Iterator<Item = &'a Sample>, cap: f64, settle: f64) -> Doc {
    let (mut util, mut over) = (Vec::new(), Vec::new());
    let (mut events, mut was_over, mut max) = (0, false, 0.0f64);
    for s in samples {
        let ratio = if cap > 0.0 { s.client_has / cap } else { 0.0 };
        max = max.max(ratio);
        let is_over = s.client_has > cap * (1.0 + 1e-9);
        if is_over {
            over.push(ratio);
            events += usize::from(!was_over);
        }
        was_over = is_over;
        if s.t >= settle {
            util.push(ratio);
        }
    }
    Doc {
        utilisation: mean(&util),
        events,
        max,
        mean_over: mean(&over),
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Per sample: in the band, and the index of the first sample out of it
/// at or after this one (`len` if none).
fn band_runs(samples: &[Sample], cap: f64) -> (Vec<bool>, Vec<usize>) {
    let inside: Vec<bool> = samples
        .iter()
        .map(|s| {
            let goal = s.client_wants.min(cap);
            (s.client_has - goal).abs() <= BAND * goal.max(1e-9)
        })
        .collect();
    let mut next_out = vec![samples.len(); samples.len()];
    for i in (0..samples.len()).rev() {
        next_out[i] = if !inside[i] {
            i
        } else {
            next_out.get(i + 1).copied().unwrap_or(samples.len())
        };
    }
    (inside, next_out)
}

/// Seconds from `from` until Σ has enters the band and stays for
/// [`HOLD_S`] (or to the end); `None` if it never does.
fn settle_after(samples: &[Sample], runs: &(Vec<bool>, Vec<usize>), from: f64) -> Option<f64> {
    let (inside, next_out) = runs;
    let mut i = samples.partition_point(|s| s.t < from);
    while i < samples.len() {
        if !inside[i] {
            i += 1;
            continue;
        }
        let out = next_out[i];
        if out == samples.len() || samples[out].t - samples[i].t >= HOLD_S {
            return Some(samples[i].t - from);
        }
        i = out + 1;
    }
    None
}

/// Longest re-convergence from each mark's end and from its start, and how
/// many marks never re-converged.
fn reconvergence(sim: &Sim) -> (Option<f64>, Option<f64>, usize) {
    let runs = band_runs(&sim.samples, sim.capacity);
    let end = sim.scenario.duration as f64;
    let (mut from_end, mut from_start, mut never) = (None::<f64>, None::<f64>, 0);
    for m in &sim.marks {
        let a = settle_after(&sim.samples, &runs, m.end);
        never += usize::from(a.is_none());
        let a = a.unwrap_or((end - m.end).max(0.0));
        let b = settle_after(&sim.samples, &runs, m.t).unwrap_or(end - m.t);
        from_end = Some(from_end.map_or(a, |x| x.max(a)));
        from_start = Some(from_start.map_or(b, |x| x.max(b)));
    }
    (from_end, from_start, never)
}

/// Computes the summary of a finished run.
pub fn summarize(sim: &Sim, seed: u64, wall_clock_s: f64) -> Summary {
    let cap = sim.capacity;
    let settle = sim.scenario.settle as f64;
    let doc = doc_figures(sim.samples.iter(), cap, settle);
    let every5 = sim
        .samples
        .iter()
        .filter(|s| (s.t as u64).is_multiple_of(5));
    let doc5 = doc_figures(every5, cap, settle);
    let mut util = Vec::new();
    let mut jains = Vec::new();
    for s in sim.samples.iter().filter(|s| s.t >= settle) {
        if s.client_wants >= cap {
            util.push(if cap > 0.0 { s.client_has / cap } else { 0.0 });
            if (s.t as u64).is_multiple_of(10) && !s.per_client.is_empty() {
                jains.extend(jain(&s.per_client, cap));
            }
        }
    }
    let (reconv, reconv_start, never) = reconvergence(sim);
    Summary {
        scenario: sim.scenario.name.clone(),
        profile: sim.scenario.profile.clone(),
        seed,
        simulated_s: sim.scenario.duration,
        clients: sim.scenario.clients_per_leaf * leaves(&sim.scenario.tree),
        nodes: sim.nodes.len(),
        events: sim.events_run,
        doc_utilisation: doc.utilisation,
        shortfall_events: doc.events,
        max_over_capacity: doc.max,
        mean_over_capacity: doc.mean_over,
        doc_utilisation_5s: doc5.utilisation,
        shortfall_events_5s: doc5.events,
        max_over_capacity_5s: doc5.max,
        ours_utilisation: mean(&util),
        utilisation_samples: util.len(),
        reconvergence_s: reconv,
        reconvergence_from_start_s: reconv_start,
        unconverged_marks: never,
        jain_fairness: mean(&jains),
        rpcs: sim.rpcs,
        root: RootLoad {
            rpcs_per_s: sim.nodes[0].served as f64 / sim.scenario.duration.max(1) as f64,
            leases: sim.nodes[0].lease_count(),
            resources: sim.nodes[0].resource_count(),
        },
        wall_clock_s,
        peak_rss_kib: peak_rss_kib(),
    }
}

/// Number of leaves of a tree given as fan-outs per level.
pub fn leaves(tree: &[usize]) -> usize {
    tree.iter().product::<usize>().max(1)
}
