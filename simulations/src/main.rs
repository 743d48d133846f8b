//! `doorman-sim run FILE --seed N --out DIR` and `doorman-sim all --out DIR`.
//!
//! Must not: compute figures (`summary.rs` does).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use doorman_sim::scenario::Scenario;

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
    /// Run one scenario and write timeseries.csv, plot.svg, summary.json.
    Run {
        /// Scenario file (TOML).
        file: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Run every scenario in a directory and write summary.md.
    All {
        #[arg(long, default_value = "simulations/scenarios")]
        scenarios: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
    },
}

fn run_one(
    file: &std::path::Path,
    seed: u64,
    out: &std::path::Path,
) -> anyhow::Result<doorman_sim::summary::Summary> {
    let text = std::fs::read_to_string(file)?;
    let scenario =
        Scenario::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let (sim, summary) = doorman_sim::run(scenario, seed)?;
    doorman_sim::output::write_all(&sim, &summary, out)?;
    Ok(summary)
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.2} %", v * 100.0))
        .unwrap_or_else(|| "–".into())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run { file, seed, out } => {
            let s = run_one(&file, seed, &out)?;
            println!("{}", serde_json::to_string_pretty(&s)?);
        }
        Command::All {
            scenarios,
            seed,
            out,
        } => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&scenarios)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            // The design doc's order (one … eight), then any others by name.
            const ORDER: [&str; 8] = [
                "one", "two", "three", "four", "five", "six", "seven", "eight",
            ];
            files.sort_by_key(|p| {
                let stem = p.file_stem().unwrap_or_default().to_string_lossy();
                let rank = ORDER.iter().position(|n| *n == stem).unwrap_or(ORDER.len());
                (rank, stem.to_string())
            });
            let mut md = String::from("| scenario | clients | simulated | mean utilisation | shortfalls | max over | mean over | longest re-convergence | Jain | wall clock |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for f in files {
                let name = f
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                let s = run_one(&f, seed, &out.join(&name))?;
                md.push_str(&format!(
                    "| {} | {} | {} s | {} | {} | {:.2} % | {} | {} | {} | {:.2} s |\n",
                    s.scenario,
                    s.clients,
                    s.simulated_s,
                    pct(s.mean_utilisation),
                    s.shortfall_events,
                    s.max_over_capacity * 100.0,
                    pct(s.mean_over_capacity),
                    s.longest_reconvergence_s
                        .map(|t| format!("{t:.0} s"))
                        .unwrap_or_else(|| "–".into()),
                    s.jain_fairness
                        .map(|j| format!("{j:.3}"))
                        .unwrap_or_else(|| "–".into()),
                    s.wall_clock_s
                ));
                eprintln!("{name}: done in {:.1} s", s.wall_clock_s);
            }
            std::fs::create_dir_all(&out)?;
            std::fs::write(out.join("summary.md"), &md)?;
            print!("{md}");
        }
    }
    Ok(())
}
