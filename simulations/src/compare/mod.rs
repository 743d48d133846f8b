//! `doorman-sim compare`: a simulated run against a real tree's run of the
//! same schedule (the fault harness replays `plan.json` on real processes
//! and writes the same CSVs), second by second and in summary, against the
//! targets of `targets.rs`, with a chart of both (`chart.rs`) and a
//! Markdown report (`report.rs`).
//!
//! The capacity, settle, duration and marks come from the simulated run's
//! `plan.json`; both runs are measured with the same rules as
//! `summary.json` and `mishaps.md` ([`Band`], [`ours_utilisation`],
//! [`doc_figures`], [`seed_dips`], [`quantile`]).
//!
//! Must not: define a figure a second way (the band, utilisation, peak and
//! quantile rules live in `summary.rs` and `mishaps.rs`) or change a run.

mod chart;
mod marks;
mod report;
mod targets;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::{MarkKind, Sample};
use crate::mishaps::{by_kind, longest, quantile, seed_dips};
use crate::plan::Plan;
use crate::runs::{read_run, ReadError, Run};
use crate::summary::{doc_figures, ours_utilisation, over_capacity, Band, Timeline};

pub use chart::svg;
pub use marks::MARK_WINDOW_S;
pub use report::markdown;
pub use targets::{
    Row, Unit, DIPS_MIN, DIPS_SHARE, MARK_EDGE_S, NEW_OVER_S, OUT_OF_BAND_MIN_S, OUT_OF_BAND_SHARE,
    PEAK_PP, UTILISATION_PP,
};

/// Why two runs could not be compared.
#[derive(Debug)]
pub enum CompareError {
    /// A run's file could not be read.
    Read(ReadError),
    /// The simulated run has no `plan.json`.
    NoPlan(PathBuf),
    /// The simulated run's `plan.json` has a mark the figures cannot use.
    BadPlan {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The directories do not hold runs to pair.
    Layout(String),
    /// An output file could not be written.
    Write {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::Read(e) => e.fmt(f),
            CompareError::NoPlan(file) => write!(
                f,
                "{}: not found; the simulated run's plan.json gives the capacity, settle, \
                 duration and marks (a run of this doorman-sim writes it)",
                file.display()
            ),
            CompareError::BadPlan { file, what } => write!(f, "{}: {what}", file.display()),
            CompareError::Layout(what) => f.write_str(what),
            CompareError::Write { file, source } => write!(f, "{}: {source}", file.display()),
        }
    }
}

impl std::error::Error for CompareError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CompareError::Read(e) => Some(e),
            CompareError::Write { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ReadError> for CompareError {
    fn from(e: ReadError) -> Self {
        CompareError::Read(e)
    }
}

/// What both runs are measured against: the simulated run's plan.
#[derive(Debug, Clone)]
pub struct Context {
    /// The root's capacity.
    pub capacity: f64,
    /// Seconds before utilisation and dips count.
    pub settle: f64,
    /// The run's length, seconds.
    pub duration: f64,
    /// Every mark as (start, end, kind).
    pub marks: Vec<(f64, f64, MarkKind)>,
}

impl Context {
    /// The context of a plan read from `file`; a node's mark without its
    /// depth is an error.
    pub fn of(plan: &Plan, file: &Path) -> Result<Context, CompareError> {
        let marks = plan.marks.iter().enumerate().map(|(i, m)| {
            let kind = m.mark_kind().ok_or_else(|| CompareError::BadPlan {
                file: file.to_path_buf(),
                what: format!("mark {i} ({:?}) has no depth", m.what),
            })?;
            Ok((m.t, m.end, kind))
        });
        Ok(Context {
            capacity: plan.capacity,
            settle: plan.settle as f64,
            duration: plan.duration as f64,
            marks: marks.collect::<Result<_, CompareError>>()?,
        })
    }

    fn timeline(&self, samples: &[Sample]) -> Timeline {
        Timeline {
            band: Band::of(samples, self.capacity, self.duration),
            gapless: Band::default(),
            marks: self.marks.clone(),
            settle: self.settle,
            duration: self.duration,
        }
    }
}

/// Re-convergence after the marks of one kind (seconds from each mark's
/// end, [`Band::reconvergence`]).
#[derive(Debug, Clone, Serialize)]
pub struct KindReconvergence {
    /// The kind (`region master lost`, …).
    pub kind: String,
    /// Marks of this kind.
    pub marks: usize,
    /// Median ([`quantile`] 0.5).
    pub median_s: f64,
    /// 90th percentile ([`quantile`] 0.9).
    pub p90_s: f64,
    /// The longest.
    pub worst_s: f64,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    /// Mean Σ has / capacity from settle where Σ wants ≥ capacity
    /// (`summary.json`'s `ours_utilisation`).
    pub utilisation: Option<f64>,
    /// Samples it was averaged over.
    pub utilisation_samples: usize,
    /// Largest Σ has / capacity over the whole run.
    pub peak: f64,
    /// Seconds with Σ has above capacity.
    pub over_capacity_s: usize,
    /// Seconds out of the band from settle.
    pub out_of_band_s: usize,
    /// Dips out of the band from settle.
    pub dips: usize,
    /// The lowest ratio Σ has / min(Σ wants, capacity) in a dip.
    pub deepest_dip: Option<f64>,
    /// The longest dip, seconds.
    pub longest_dip_s: usize,
    /// Re-convergence by kind of mark, in `mishaps.md`'s order.
    pub reconvergence: Vec<KindReconvergence>,
}

/// The figures of one run's samples.
pub fn figures(samples: &[Sample], cx: &Context) -> Figures {
    let (cap, settle) = (cx.capacity, cx.settle);
    let doc = doc_figures(samples.iter(), cap, settle);
    let (utilisation, utilisation_samples) = ours_utilisation(samples, cap, settle);
    let tl = cx.timeline(samples);
    let dips: Vec<_> = seed_dips(&tl).into_iter().map(|(d, _)| d).collect();
    let reconvergence = by_kind([&tl])
        .into_iter()
        .map(|(k, v)| KindReconvergence {
            kind: k.0.to_string(),
            marks: v.len(),
            median_s: quantile(&v, 0.5),
            p90_s: quantile(&v, 0.9),
            worst_s: longest(&v),
        })
        .collect();
    Figures {
        utilisation,
        utilisation_samples,
        peak: doc.max,
        over_capacity_s: doc.over,
        out_of_band_s: dips.iter().map(|d| d.secs).sum(),
        dips: dips.len(),
        deepest_dip: dips.iter().map(|d| d.lowest).reduce(f64::min),
        longest_dip_s: dips.iter().map(|d| d.secs).max().unwrap_or(0),
        reconvergence,
    }
}

/// The two runs second by second: Σ has / capacity at the whole seconds
/// both have a row for.
#[derive(Debug, Clone, Serialize)]
pub struct PerSecond {
    /// Seconds both runs have.
    pub seconds: usize,
    /// Mean |real − simulated|.
    pub mean_abs_diff: Option<f64>,
    /// Largest |real − simulated|.
    pub max_abs_diff: Option<f64>,
    /// The second of the largest.
    pub max_at: Option<f64>,
    /// Seconds at which the real run is above capacity and the simulated
    /// run is not (or has no row).
    pub real_over_alone: Vec<f64>,
}

/// Whole seconds of the samples (rounded), to their index.
fn by_second(samples: &[Sample]) -> HashMap<i64, usize> {
    let at = |(i, s): (usize, &Sample)| (s.t.round() as i64, i);
    samples.iter().enumerate().map(at).collect()
}

/// Compares `sim` and `real` second by second.
pub fn per_second(sim: &[Sample], real: &[Sample], cap: f64) -> PerSecond {
    let ratio = |s: &Sample| if cap > 0.0 { s.client_has / cap } else { 0.0 };
    let sim_at = by_second(sim);
    let (mut diffs, mut max_at, mut alone) = (Vec::new(), None::<(f64, f64)>, Vec::new());
    for r in real {
        let s = sim_at.get(&(r.t.round() as i64)).map(|&i| &sim[i]);
        if over_capacity(r, cap) && !s.is_some_and(|s| over_capacity(s, cap)) {
            alone.push(r.t);
        }
        let Some(s) = s else { continue };
        let d = (ratio(r) - ratio(s)).abs();
        diffs.push(d);
        if max_at.is_none_or(|(m, _)| d > m) {
            max_at = Some((d, r.t));
        }
    }
    PerSecond {
        seconds: diffs.len(),
        mean_abs_diff: (!diffs.is_empty()).then(|| diffs.iter().sum::<f64>() / diffs.len() as f64),
        max_abs_diff: max_at.map(|m| m.0),
        max_at: max_at.map(|m| m.1),
        real_over_alone: alone,
    }
}

/// One seed's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct SeedComparison {
    /// The seed.
    pub seed: u64,
    /// The chart's file name in the output directory.
    pub chart: String,
    /// The simulated run's figures.
    pub sim: Figures,
    /// The real run's figures.
    pub real: Figures,
    /// Second by second.
    pub per_second: PerSecond,
    /// The report's rows, each against its target where it has one.
    pub rows: Vec<Row>,
    /// The simulated run (its plan is present).
    #[serde(skip)]
    pub sim_run: Run,
    /// The real run.
    #[serde(skip)]
    pub real_run: Run,
    /// The simulated run's plan.
    #[serde(skip)]
    pub plan: Plan,
}

impl SeedComparison {
    /// Whether every target is met.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.ok != Some(false))
    }
}

/// Compares two runs read back; `chart` names the chart's file.
pub fn compare_runs(sim: Run, real: Run, chart: String) -> Result<SeedComparison, CompareError> {
    let file = sim.dir.join("plan.json");
    let plan = sim.plan.clone().ok_or(CompareError::NoPlan(file.clone()))?;
    let cx = Context::of(&plan, &file)?;
    let (s, r) = (figures(&sim.samples, &cx), figures(&real.samples, &cx));
    let per = per_second(&sim.samples, &real.samples, cx.capacity);
    let (st, rt) = (cx.timeline(&sim.samples), cx.timeline(&real.samples));
    let mut rows = targets::rows(&s, &r, &per, marks::dipping(&st, &rt));
    rows.extend(marks::rows(&st, &rt));
    rows.push(marks::unapplied_row(&marks::unapplied(&real.dir)));
    Ok(SeedComparison {
        seed: plan.seed,
        chart,
        rows,
        sim: s,
        real: r,
        per_second: per,
        sim_run: sim,
        real_run: real,
        plan,
    })
}

/// Every seed compared.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The simulated run's directory.
    pub sim_dir: PathBuf,
    /// The real run's directory.
    pub real_dir: PathBuf,
    /// Per seed present in both, by seed.
    pub seeds: Vec<SeedComparison>,
    /// Seeds only the simulated directory has (not compared).
    pub only_sim: Vec<u64>,
    /// Seeds only the real directory has (not compared).
    pub only_real: Vec<u64>,
}

impl Comparison {
    /// Whether every seed meets every target.
    pub fn passed(&self) -> bool {
        self.seeds.iter().all(SeedComparison::passed)
    }

    /// Every missed target, one line each.
    pub fn misses(&self) -> Vec<String> {
        let miss = |s: &SeedComparison| {
            let seed = s.seed;
            let rows = s.rows.iter().filter(|r| r.ok == Some(false));
            rows.map(move |r| format!("seed {seed}: {}", r.describe()))
                .collect::<Vec<_>>()
        };
        self.seeds.iter().flat_map(miss).collect()
    }
}

/// The `seed-N` subdirectories of `dir`, by seed.
fn seed_dirs(dir: &Path) -> Result<BTreeMap<u64, PathBuf>, CompareError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ReadError::Io {
        file: dir.to_path_buf(),
        source,
    })?;
    let seed = |p: &Path| {
        let name = p.file_name()?.to_str()?;
        name.strip_prefix("seed-")?.parse::<u64>().ok()
    };
    let dirs = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| Some((seed(&p)?, p)));
    Ok(dirs.collect())
}

/// Compares `sim` with `real`: two run directories, or two directories of
/// `seed-N` runs (each seed present in both).
pub fn compare_dirs(sim: &Path, real: &Path) -> Result<Comparison, CompareError> {
    let one = |d: &Path| d.join("timeseries.csv").is_file();
    let (pairs, only_sim, only_real) = match (one(sim), one(real)) {
        (true, true) => (vec![(None, sim.into(), real.into())], vec![], vec![]),
        (false, false) => seed_pairs(sim, real)?,
        _ => {
            return Err(CompareError::Layout(format!(
                "{} and {}: one is a run (it has timeseries.csv), the other is not; give two \
                 runs or two directories of seed-N runs",
                sim.display(),
                real.display()
            )))
        }
    };
    let mut seeds = Vec::new();
    for (seed, s, r) in pairs {
        let chart = seed.map_or("compare.svg".into(), |n| format!("seed-{n}.svg"));
        let mut c = compare_runs(read_run(&s)?, read_run(&r)?, chart)?;
        c.seed = seed.unwrap_or(c.seed);
        seeds.push(c);
    }
    Ok(Comparison {
        sim_dir: sim.into(),
        real_dir: real.into(),
        seeds,
        only_sim,
        only_real,
    })
}

/// A seed's number (`None` for a lone run) and its two directories.
type Pair = (Option<u64>, PathBuf, PathBuf);

/// The pairs, the seeds only the simulated directory has, those only the
/// real one has.
type Pairing = (Vec<Pair>, Vec<u64>, Vec<u64>);

/// The seeds both directories have, and those only one has.
fn seed_pairs(sim: &Path, real: &Path) -> Result<Pairing, CompareError> {
    let (s, mut r) = (seed_dirs(sim)?, seed_dirs(real)?);
    let mut pairs = Vec::new();
    let mut only_sim = Vec::new();
    for (n, sd) in s {
        match r.remove(&n) {
            Some(rd) => pairs.push((Some(n), sd, rd)),
            None => only_sim.push(n),
        }
    }
    if pairs.is_empty() {
        return Err(CompareError::Layout(format!(
            "{} and {}: no run (timeseries.csv) and no seed-N directory in both",
            sim.display(),
            real.display()
        )));
    }
    Ok((pairs, only_sim, r.into_keys().collect()))
}

fn write_file(file: PathBuf, text: &str) -> Result<(), CompareError> {
    std::fs::write(&file, text).map_err(|source| CompareError::Write { file, source })
}

/// Writes `compare.md`, `compare.json` and each seed's chart into `dir`.
pub fn write(c: &Comparison, dir: &Path) -> Result<(), CompareError> {
    std::fs::create_dir_all(dir).map_err(|source| CompareError::Write {
        file: dir.to_path_buf(),
        source,
    })?;
    write_file(dir.join("compare.md"), &markdown(c))?;
    let json = serde_json::to_string_pretty(c).unwrap_or_else(|e| format!("\"{e}\""));
    write_file(dir.join("compare.json"), &(json + "\n"))?;
    for s in &c.seeds {
        write_file(dir.join(&s.chart), &svg(s))?;
    }
    Ok(())
}
