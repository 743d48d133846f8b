//! `doorman-sim run FILE [--profile P] [--seed N [--replay-asks CSV] |
//! --seeds A..B --jobs J] --out DIR`, `doorman-sim all [--profile P] --out DIR` and
//! `doorman-sim compare SIM REAL [--out DIR] [--check]`.
//!
//! Must not: compute figures (`summary.rs`, `seeds.rs` and `compare/` do).

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use doorman_sim::engine::AskTimes;
use doorman_sim::scenario::{Scenario, OURS};
use doorman_sim::summary::Summary;

/// The simulator's allocator (this binary only; the servers keep the
/// system's): with a million simulated clients glibc's malloc and free
/// took 15 % of the run (docs/simulation.md, "Scale").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "doorman-sim",
    about = "Simulate whole Doorman trees under virtual time"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one scenario and write timeseries.csv, plots, summary.json and
    /// mishaps.md; with --seeds, every seed into DIR/seed-N and the
    /// statistics over the seeds into DIR/summary.json and DIR/mishaps.md.
    Run {
        /// Scenario file (TOML).
        file: PathBuf,
        /// `ours`, or a profile of the file (`original`).
        #[arg(long, default_value = OURS)]
        profile: String,
        #[arg(long, default_value_t = 1, conflicts_with = "seeds")]
        seed: u64,
        /// A seed range, inclusive: `1..30`.
        #[arg(long, value_parser = doorman_sim::seeds::parse_range)]
        seeds: Option<std::vec::Vec<u64>>,
        /// Runs in parallel (threads).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// A real run's asks (`t,node`, `scripts/upstream-trace.py
        /// --asks`): those nodes ask their parents at these times instead
        /// of on their own timers (docs/sim-vs-real.md); writes
        /// replay.json with what the replay did.
        #[arg(long, conflicts_with = "seeds")]
        replay_asks: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Run every scenario in a directory (seed 1) and write summary.md.
    All {
        #[arg(long, default_value = "simulations/scenarios")]
        scenarios: PathBuf,
        #[arg(long, default_value = OURS)]
        profile: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Compare a simulated run with a real tree's run of the same schedule
    /// (its plan.json): print a Markdown report; with --out, also write
    /// compare.md, compare.json and a chart of both runs per seed.
    Compare {
        /// The simulated run's directory (with plan.json), or a directory
        /// of seed-N runs.
        sim: PathBuf,
        /// The real run's directory, laid out as SIM.
        real: PathBuf,
        #[arg(long)]
        out: Option<PathBuf>,
        /// Exit with status 1 when a target is missed.
        #[arg(long)]
        check: bool,
    },
}

/// `compare`: the report on stdout (and in `out`); with `check`, exit 1
/// when a target is missed, naming it.
fn compare(sim: &Path, real: &Path, out: Option<&Path>, check: bool) -> anyhow::Result<()> {
    use doorman_sim::compare;
    let c = compare::compare_dirs(sim, real)?;
    print!("{}", compare::markdown(&c));
    if let Some(dir) = out {
        compare::write(&c, dir)?;
    }
    if check && !c.passed() {
        for m in c.misses() {
            eprintln!("missed: {m}");
        }
        std::process::exit(1);
    }
    Ok(())
}

fn load(file: &Path, profile: &str) -> anyhow::Result<Scenario> {
    let text = std::fs::read_to_string(file)?;
    Scenario::parse_profile(&text, profile).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

fn run_one(file: &Path, profile: &str, seed: u64, out: &Path) -> anyhow::Result<Summary> {
    run_replaying(file, profile, seed, None, out)
}

/// One run, replaying the asks of the file `asks` when given.
fn run_replaying(
    file: &Path,
    profile: &str,
    seed: u64,
    asks: Option<&Path>,
    out: &Path,
) -> anyhow::Result<Summary> {
    let asks = match asks {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("--replay-asks {}: {e}", p.display()))?;
            let parsed = AskTimes::parse(&text)
                .map_err(|e| anyhow::anyhow!("--replay-asks {}: {e}", p.display()))?;
            Some(parsed)
        }
        None => None,
    };
    let scenario = load(file, profile)?;
    let (sim, summary) = doorman_sim::run_replaying(scenario, seed, asks.as_ref())?;
    doorman_sim::output::write_all(&sim, &summary, out)?;
    if let Some(counts) = sim.replay_counts() {
        let json = serde_json::to_string_pretty(&counts)?;
        eprintln!("doorman-sim: replayed asks: {json}");
        std::fs::write(out.join("replay.json"), json + "\n")?;
    }
    Ok(summary)
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.2} %", v * 100.0))
        .unwrap_or_else(|| "–".into())
}

fn secs(x: Option<f64>) -> String {
    x.map(|t| format!("{t:.0} s")).unwrap_or_else(|| "–".into())
}

/// The scenario files of a directory, in the design doc's order (one …
/// eight), then any others by name.
fn scenario_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    const ORDER: [&str; 8] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight",
    ];
    files.sort_by_key(|p| {
        let stem = p.file_stem().unwrap_or_default().to_string_lossy();
        let rank = ORDER.iter().position(|n| *n == stem).unwrap_or(ORDER.len());
        (rank, stem.to_string())
    });
    Ok(files)
}

fn all(scenarios: &Path, profile: &str, seed: u64, out: &Path) -> anyhow::Result<()> {
    let mut md = String::from("| scenario | clients | simulated | utilisation (doc) | shortfalls | peak | mean over | utilisation (ours) | re-convergence | Jain | wall clock |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for f in scenario_files(scenarios)? {
        let name = f
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(&f)?;
        if profile != OURS && Scenario::parse_profile(&text, profile).is_err() {
            eprintln!("{name}: no {profile} profile, skipped");
            continue;
        }
        let s = run_one(&f, profile, seed, &out.join(&name))?;
        md.push_str(&format!(
            "| {} | {} | {} s | {} | {} | {:.2} % | {} | {} | {} | {} | {:.2} s |\n",
            s.scenario,
            s.clients,
            s.simulated_s,
            pct(s.doc_utilisation),
            s.shortfall_events,
            s.max_over_capacity * 100.0,
            pct(s.mean_over_capacity),
            pct(s.ours_utilisation),
            secs(s.reconvergence_s),
            s.jain_fairness
                .map(|j| format!("{j:.3}"))
                .unwrap_or_else(|| "–".into()),
            s.wall_clock_s
        ));
        eprintln!("{name}: done in {:.1} s", s.wall_clock_s);
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("summary.md"), &md)?;
    print!("{md}");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run {
            file,
            profile,
            seed,
            seeds: Some(seeds),
            jobs,
            out,
            ..
        } => {
            let _ = seed;
            let scenario = load(&file, &profile)?;
            let s = doorman_sim::seeds::run_seeds(&scenario, &seeds, jobs, Some(&out))?;
            let json = serde_json::to_string_pretty(&s)?;
            std::fs::write(out.join("summary.json"), json + "\n")?;
            std::fs::write(
                out.join("mishaps.md"),
                doorman_sim::mishaps::report(&s.runs),
            )?;
            println!("{}", serde_json::to_string_pretty(&s.stats)?);
        }
        Command::Run {
            file,
            profile,
            seed,
            replay_asks,
            out,
            ..
        } => {
            let s = run_replaying(&file, &profile, seed, replay_asks.as_deref(), &out)?;
            let mishaps = doorman_sim::mishaps::report(std::slice::from_ref(&s));
            std::fs::write(out.join("mishaps.md"), mishaps)?;
            println!("{}", serde_json::to_string_pretty(&s)?);
        }
        Command::All {
            scenarios,
            profile,
            seed,
            out,
        } => all(&scenarios, &profile, seed, &out)?,
        Command::Compare {
            sim,
            real,
            out,
            check,
        } => compare(&sim, &real, out.as_deref(), check)?,
    }
    Ok(())
}
