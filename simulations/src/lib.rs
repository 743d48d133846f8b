//! doorman-sim: a deterministic discrete-event simulation of whole Doorman
//! trees under a virtual clock, running the real server core
//! (`doorman_core::server`), algorithms and client core
//! (`doorman_core::client`). See `docs/simulation.md`.
//!
//! Must not: read the real clock or use randomness other than the seeded generators.

pub mod compare;
pub mod engine;
pub mod mishaps;
pub mod output;
pub mod plan;
pub mod plot;
#[cfg(feature = "plot")]
pub mod raster;
pub mod runs;
pub mod scenario;
pub mod seeds;
pub mod summary;

use std::time::Instant;

/// Runs a scenario with a seed; returns the finished simulation and its summary.
pub fn run(
    scenario: scenario::Scenario,
    seed: u64,
) -> anyhow::Result<(engine::Sim, summary::Summary)> {
    run_replaying(scenario, seed, None)
}

/// [`run`], with the listed nodes asking their parents at the times of
/// `asks` (a real run's: `engine::AskTimes`) instead of on their own
/// timers.
pub fn run_replaying(
    scenario: scenario::Scenario,
    seed: u64,
    asks: Option<&engine::AskTimes>,
) -> anyhow::Result<(engine::Sim, summary::Summary)> {
    let t = Instant::now();
    let mut sim = engine::Sim::new(scenario, seed)?;
    if let Some(asks) = asks {
        sim.replay_asks(asks)
            .map_err(|e| anyhow::anyhow!("--replay-asks: {e}"))?;
    }
    sim.run();
    let summary = summary::summarize(&mut sim, seed, t.elapsed().as_secs_f64());
    Ok((sim, summary))
}
