//! Scenario 7, gated on the worst seed (issue 17's goals, see
//! docs/simulation.md "Where it stands"), over seeds 1–30 and over seeds 31–90:
//! held-out seeds that no change was ever traced on, so that a fix fitted
//! to seeds 1–30 cannot pass the gate by luck (docs/simulation.md,
//! "Fifth round" in docs/notes/simulation-rounds-2.md).
//!
//! * `original` profile (the original simulation's parameters): beat the
//!   original simulation on every seed at once: peak ≤ 105 %, mean
//!   utilisation ≥ 97 % (design doc's definition), and fewer shortfall
//!   events than the original's fewest (5, measured under Python 2.7). All
//!   gated.
//! * `ours` profile: peak ≤ 102 % and utilisation ≥ 99 % (design doc's
//!   definition), gated; also what the design doc reports for its own
//!   scenario 7 run (fewer than 14 shortfall events). Not gated, because it
//!   is not reached (docs/simulation.md, "Where it stands"): re-convergence
//!   ≤ 30 s.

use std::ops::RangeInclusive;

use doorman_sim::scenario::Scenario;
use doorman_sim::seeds::{run_seeds, SeedsSummary};

const TRACED: RangeInclusive<u64> = 1..=30;
const HELD_OUT: RangeInclusive<u64> = 31..=90;

fn seven(profile: &str, seeds: RangeInclusive<u64>) -> SeedsSummary {
    let path = format!("{}/scenarios/seven.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let scenario = Scenario::parse_profile(&text, profile).unwrap();
    let seeds: Vec<u64> = seeds.collect();
    let r = run_seeds(&scenario, &seeds, 2, None).unwrap();
    assert_eq!(r.runs.len(), seeds.len());
    r
}

fn original_goals(r: &SeedsSummary) {
    for s in &r.runs {
        let what = format!("seven (original), seed {}", s.seed);
        assert!(
            s.clients == 45 && s.nodes == 13,
            "{what}: the original's tree"
        );
        assert!(
            s.max_over_capacity <= 1.05,
            "{what}: peak {}",
            s.max_over_capacity
        );
        assert!(
            s.shortfall_events < 5,
            "{what}: {} shortfall events",
            s.shortfall_events
        );
        let util = s.doc_utilisation.unwrap();
        assert!(util >= 0.97, "{what}: utilisation {util}, goal ≥ 97 %");
    }
}

fn ours_goals(r: &SeedsSummary) {
    for s in &r.runs {
        let what = format!("seven (ours), seed {}", s.seed);
        let util = s.doc_utilisation.unwrap();
        assert!(util >= 0.99, "{what}: utilisation {util}, goal ≥ 99 %");
        assert!(
            s.shortfall_events < 14,
            "{what}: {} shortfall events",
            s.shortfall_events
        );
        assert!(
            s.max_over_capacity <= 1.02,
            "{what}: peak {}, goal ≤ 102 %",
            s.max_over_capacity
        );
    }
    let lost = r
        .runs
        .iter()
        .all(|s| s.rpcs.refused > 0 && s.rpcs.timed_out > 0);
    assert!(lost, "crashed masters and cut-off nodes cost RPCs");
}

#[test]
fn original_profile_worst_seed_beats_the_original_peak_and_shortfalls() {
    original_goals(&seven("original", TRACED));
}

#[test]
fn ours_profile_worst_seed_peaks_within_102_percent_and_uses_99_percent() {
    ours_goals(&seven("ours", TRACED));
}

#[test]
fn original_profile_goals_hold_on_held_out_seeds() {
    original_goals(&seven("original", HELD_OUT));
}

#[test]
fn ours_profile_goals_hold_on_held_out_seeds() {
    ours_goals(&seven("ours", HELD_OUT));
}
