//! The figures of a run, computed from the time series (one sample per
//! simulated second) and the marks (demand shifts and mishaps): the design
//! doc's, as it defines them, and ours beside them.
//!
//! Must not: change the run; every figure is derived from the samples.

use doorman_algorithms::{Kind, Shares};
use doorman_lease::{Amount, Demand};
use serde::Serialize;

use crate::engine::{MarkKind, RpcCounts, Sample, Sim};

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
    /// The band and the marks, for the figures by kind of mishap.
    #[serde(skip)]
    pub timeline: Timeline,
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
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    /// Mean Σ has / capacity from `settle` on.
    pub utilisation: Option<f64>,
    /// Times Σ has rose above capacity ([`over_capacity`]).
    pub events: usize,
    /// Largest Σ has / capacity (0 at least).
    pub max: f64,
    /// Mean Σ has / capacity over the samples above capacity.
    pub mean_over: Option<f64>,
    /// Samples above capacity.
    pub over: usize,
}

/// Whether Σ client has is above capacity (beyond rounding).
pub fn over_capacity(s: &Sample, cap: f64) -> bool {
    s.client_has > cap * (1.0 + 1e-9)
}

/// The design doc's figures ([`Doc`]) over `samples`.
pub fn doc_figures<'a>(samples: impl Iterator<Item = &'a Sample>, cap: f64, settle: f64) -> Doc {
    let (mut util, mut over) = (Vec::new(), Vec::new());
    let (mut events, mut was_over, mut max) = (0, false, 0.0f64);
    for s in samples {
        let ratio = if cap > 0.0 { s.client_has / cap } else { 0.0 };
        max = max.max(ratio);
        let is_over = over_capacity(s, cap);
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
        over: over.len(),
    }
}

/// Ours: mean Σ client has / capacity over the samples from `settle` on
/// where Σ wants ≥ capacity ([`Summary::ours_utilisation`]), and how many
/// samples that was.
pub fn ours_utilisation(samples: &[Sample], cap: f64, settle: f64) -> (Option<f64>, usize) {
    let util: Vec<f64> = samples
        .iter()
        .filter(|s| s.t >= settle && s.client_wants >= cap)
        .map(|s| if cap > 0.0 { s.client_has / cap } else { 0.0 })
        .collect();
    (mean(&util), util.len())
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A sum per sample (Σ client has, or [`handed_over_at_once`]) against the
/// band: the one rule of re-convergence, used here and by `mishaps.rs`.
#[derive(Debug, Clone, Default)]
pub struct Band {
    /// Each sample's time, seconds since the start.
    t: Vec<f64>,
    /// The sum / min(Σ wants, capacity) per sample.
    ratio: Vec<f64>,
    /// Whether the sample is within [`BAND`].
    inside: Vec<bool>,
    /// Per sample, the index of the first sample out of the band at or
    /// after it (`len` if none).
    next_out: Vec<usize>,
    /// The end of the run, seconds.
    end: f64,
}

impl Band {
    /// The band of a run's samples: Σ client has.
    pub fn of(samples: &[Sample], cap: f64, end: f64) -> Band {
        Band::of_sum(samples, cap, end, |s| s.client_has)
    }

    /// The band of `sum` per sample against the same goal (min(Σ wants,
    /// capacity)).
    pub fn of_sum(samples: &[Sample], cap: f64, end: f64, sum: impl Fn(&Sample) -> f64) -> Band {
        let goal = |s: &Sample| s.client_wants.min(cap);
        let inside = samples
            .iter()
            .map(|s| (sum(s) - goal(s)).abs() <= BAND * goal(s).max(1e-9))
            .collect();
        let mut b = Band {
            t: samples.iter().map(|s| s.t).collect(),
            ratio: samples.iter().map(|s| sum(s) / goal(s).max(1e-9)).collect(),
            inside,
            next_out: Vec::new(),
            end,
        };
        b.index();
        b
    }

    fn index(&mut self) {
        let n = self.inside.len();
        self.next_out = vec![n; n];
        for i in (0..n).rev() {
            self.next_out[i] = if !self.inside[i] {
                i
            } else {
                self.next_out.get(i + 1).copied().unwrap_or(n)
            };
        }
    }

    /// Seconds from `from` until Σ has enters the band and stays for
    /// [`HOLD_S`] (or to the end); `None` if it never does.
    pub fn settle_after(&self, from: f64) -> Option<f64> {
        let n = self.t.len();
        let mut i = self.t.partition_point(|&t| t < from);
        while i < n {
            if !self.inside[i] {
                i += 1;
                continue;
            }
            let out = self.next_out[i];
            if out == n || self.t[out] - self.t[i] >= HOLD_S {
                return Some(self.t[i] - from);
            }
            i = out + 1;
        }
        None
    }

    /// The re-convergence from `from`: [`Band::settle_after`], or the rest
    /// of the run if Σ has never settles.
    pub fn reconvergence(&self, from: f64) -> f64 {
        self.settle_after(from)
            .unwrap_or((self.end - from).max(0.0))
    }

    /// The runs of samples out of the band from `from` on, as (first
    /// index, last index + 1).
    pub fn dips(&self, from: f64) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        let mut i = self.t.partition_point(|&t| t < from);
        while i < self.t.len() {
            if self.inside[i] {
                i = self.next_out[i];
                continue;
            }
            let first = i;
            while i < self.t.len() && !self.inside[i] {
                i += 1;
            }
            runs.push((first, i));
        }
        runs
    }

    /// The time and ratio of sample `i`.
    pub fn sample(&self, i: usize) -> (f64, f64) {
        (self.t[i], self.ratio[i])
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.t.len()
    }

    /// No samples.
    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// The same band with the samples of `runs` counted as inside (what
    /// re-convergence would be without those dips).
    pub fn without(&self, runs: &[(usize, usize)]) -> Band {
        let mut b = self.clone();
        for &(a, z) in runs {
            b.inside[a..z].fill(true);
        }
        b.index();
        b
    }
}

/// Σ client has if every unit idle in a node's books (its capacity less
/// what it has handed out) were held by a client that wants it, up to
/// min(Σ wants, capacity): the most that hand-overs without a gap between
/// giver and taker could give (docs/simulation.md, "Scheduled
/// hand-overs"). Capacity a node counts as taken by a subtree whose
/// leases have run out is not idle in any book, and is not added.
pub fn handed_over_at_once(s: &Sample, cap: f64) -> f64 {
    let idle: f64 = s.nodes.iter().map(|&(c, _, h)| (c - h).max(0.0)).sum();
    let short = (s.client_wants.min(cap) - s.client_has).max(0.0);
    s.client_has + idle.min(short)
}

/// What `mishaps.rs` reads of a run: its band and its marks.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Σ has against the band.
    pub band: Band,
    /// [`handed_over_at_once`] against the band.
    pub gapless: Band,
    /// Every mark, as (start, end, kind), seconds since the start.
    pub marks: Vec<(f64, f64, MarkKind)>,
    /// The scenario's `settle`: dips before it are the start-up.
    pub settle: f64,
    /// Simulated seconds.
    pub duration: f64,
}

/// Longest re-convergence from each mark's end and from its start, and how
/// many marks never re-converged.
fn reconvergence(sim: &Sim, band: &Band) -> (Option<f64>, Option<f64>, usize) {
    let (mut from_end, mut from_start, mut never) = (None::<f64>, None::<f64>, 0);
    for m in &sim.marks {
        never += usize::from(band.settle_after(m.end).is_none());
        let a = band.reconvergence(m.end);
        let b = band.reconvergence(m.t);
        from_end = Some(from_end.map_or(a, |x| x.max(a)));
        from_start = Some(from_start.map_or(b, |x| x.max(b)));
    }
    (from_end, from_start, never)
}

/// Computes the summary of a finished run.
pub fn summarize(sim: &mut Sim, seed: u64, wall_clock_s: f64) -> Summary {
    let cap = sim.capacity;
    let settle = sim.scenario.settle as f64;
    let doc = doc_figures(sim.samples.iter(), cap, settle);
    let every5 = sim
        .samples
        .iter()
        .filter(|s| (s.t as u64).is_multiple_of(5));
    let doc5 = doc_figures(every5, cap, settle);
    let (utilisation, utilisation_samples) = ours_utilisation(&sim.samples, cap, settle);
    let mut jains = Vec::new();
    for s in sim.samples.iter().filter(|s| s.t >= settle) {
        if s.client_wants >= cap && (s.t as u64).is_multiple_of(10) && !s.per_client.is_empty() {
            jains.extend(jain(&s.per_client, cap));
        }
    }
    let duration = sim.scenario.duration as f64;
    let band = Band::of(&sim.samples, cap, duration);
    let (reconv, reconv_start, never) = reconvergence(sim, &band);
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
        ours_utilisation: utilisation,
        utilisation_samples,
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
        timeline: Timeline {
            band,
            gapless: Band::of_sum(&sim.samples, cap, duration, |s| handed_over_at_once(s, cap)),
            marks: sim.marks.iter().map(|m| (m.t, m.end, m.kind)).collect(),
            settle,
            duration,
        },
    }
}

/// Number of leaves of a tree given as fan-outs per level.
pub fn leaves(tree: &[usize]) -> usize {
    tree.iter().product::<usize>().max(1)
}

#[cfg(test)]
mod tests {
    use super::{handed_over_at_once, Band, Sample};

    fn sample(t: f64, client_has: f64, nodes: Vec<(f64, f64, f64)>) -> Sample {
        Sample {
            t,
            levels: Vec::new(),
            nodes,
            client_wants: 150.0,
            client_has,
            per_client: Vec::new(),
        }
    }

    /// Σ has per second for a capacity of 100 and wants above it.
    fn band(has: &[f64]) -> Band {
        let samples: Vec<Sample> = has
            .iter()
            .enumerate()
            .map(|(i, &h)| sample(i as f64, h, Vec::new()))
            .collect();
        Band::of(&samples, 100.0, has.len() as f64)
    }

    #[test]
    fn gapless_hand_overs_add_what_is_idle_in_the_books_up_to_the_goal() {
        // A root of 100 that handed out 90 to a leaf, which handed out 80.
        let s = sample(0.0, 80.0, vec![(100.0, 150.0, 90.0), (90.0, 150.0, 80.0)]);
        assert_eq!(handed_over_at_once(&s, 100.0), 100.0);
        let s = sample(0.0, 80.0, vec![(100.0, 150.0, 95.0), (95.0, 150.0, 90.0)]);
        assert_eq!(handed_over_at_once(&s, 100.0), 90.0, "10 lost, 10 idle");
        let s = sample(0.0, 80.0, vec![(100.0, 150.0, 30.0)]);
        assert_eq!(handed_over_at_once(&s, 100.0), 100.0, "never past the goal");
        let over = Sample {
            client_wants: 50.0,
            ..sample(0.0, 60.0, vec![(100.0, 50.0, 70.0)])
        };
        assert_eq!(
            handed_over_at_once(&over, 100.0),
            60.0,
            "held above the goal stays"
        );
        // A node that has handed out more than it has (a shrunk grant)
        // adds nothing, and takes nothing from the others' idle.
        let s = sample(0.0, 80.0, vec![(100.0, 150.0, 110.0), (110.0, 150.0, 90.0)]);
        assert_eq!(handed_over_at_once(&s, 100.0), 100.0);
        let samples = [
            sample(0.0, 80.0, vec![(100.0, 150.0, 80.0)]),
            sample(1.0, 80.0, vec![(100.0, 150.0, 90.0)]),
        ];
        let b = Band::of_sum(&samples, 100.0, 2.0, |s| handed_over_at_once(s, 100.0));
        assert_eq!(
            b.dips(0.0),
            vec![(1, 2)],
            "only the 10 lost leaves the band"
        );
    }

    #[test]
    fn re_convergence_waits_for_a_whole_hold_in_the_band() {
        // Out at 0-4, in at 5-9, out at 10, then in to the end (200 s).
        let mut has = vec![100.0; 200];
        has[..5].fill(50.0);
        has[10] = 97.5;
        let b = band(&has);
        assert_eq!(
            b.settle_after(0.0),
            Some(11.0),
            "the dip at 10 restarts the hold"
        );
        assert_eq!(b.settle_after(12.0), Some(0.0));
        assert_eq!(b.dips(0.0), vec![(0, 5), (10, 11)]);
        assert_eq!(b.dips(6.0), vec![(10, 11)], "from settle on");
        assert_eq!(b.sample(10), (10.0, 0.975));
        // Without the second dip, the first one alone counts.
        assert_eq!(b.without(&[(10, 11)]).settle_after(0.0), Some(5.0));
    }

    #[test]
    fn a_run_that_never_settles_counts_the_rest_of_it() {
        let mut has = vec![100.0; 100];
        has[70] = 50.0;
        let b = band(&has);
        // From 20 on, no 60 s in the band before the end: the hold is cut
        // short by the end only after the last dip.
        assert_eq!(b.settle_after(20.0), Some(51.0));
        let mut has = vec![100.0; 100];
        has[99] = 50.0;
        let b = band(&has);
        assert_eq!(b.settle_after(50.0), None);
        assert_eq!(b.reconvergence(50.0), 50.0, "the rest of the run");
    }
}
