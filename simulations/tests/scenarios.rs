//! The simulator runs the real cores deterministically, and scenarios 1, 5
//! and 7 beat the design doc's figures: 96.8 % (scenario 5) and 96.6 %
//! (scenario 7) mean utilisation; shortfall 14 times, peaking at 106.05 %;
//! re-convergence within 2 minutes. The
//! scenarios run in full (1 h simulated for 5 and 7), not shortened.

use doorman_sim::scenario::Scenario;
use doorman_sim::summary::Summary;

fn load(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    Scenario::parse(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The design doc's figures, each beaten, with the run named on failure.
fn assert_beats_design_doc(what: &str, s: &Summary, doc_utilisation: f64) {
    let util = s
        .mean_utilisation
        .unwrap_or_else(|| panic!("{what}: demand never exceeded capacity"));
    assert!(
        util > doc_utilisation,
        "{what}: utilisation {util}, design doc {doc_utilisation}"
    );
    assert!(
        s.shortfall_events < 14,
        "{what}: {} shortfalls, design doc 14",
        s.shortfall_events
    );
    assert!(
        s.max_over_capacity < 1.0605,
        "{what}: peak {}, design doc 1.0605",
        s.max_over_capacity
    );
    // The mean while over (design doc: 102 %) is reported, not asserted:
    // with one or two short episodes it is just their height (seed 5 of
    // scenario 7: one 1-second episode at 102.03 %), see docs/simulation.md.
    if let Some(t) = s.longest_reconvergence_s {
        assert!(t < 120.0, "{what}: re-convergence {t} s, design doc 120 s");
    }
}

#[test]
fn the_same_seed_gives_identical_output() {
    let a = doorman_sim::run(load("five"), 7).unwrap();
    let b = doorman_sim::run(load("five"), 7).unwrap();
    use doorman_sim::output::{csv, events_csv, nodes_csv, png, svg};
    for f in [csv, svg, nodes_csv, events_csv] {
        assert_eq!(f(&a.0), f(&b.0));
    }
    assert_eq!(png(&a.0), png(&b.0));
    let strip = |s: &Summary| {
        let mut v = serde_json::to_value(s).unwrap();
        v["wall_clock_s"] = serde_json::Value::Null;
        v["peak_rss_kib"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&a.1), strip(&b.1));
    let c = doorman_sim::run(load("five"), 8).unwrap();
    assert_ne!(csv(&a.0), csv(&c.0), "another seed, another run");
}

#[test]
fn scenario_one_beats_the_design_doc_without_shortfall() {
    let (_, s) = doorman_sim::run(load("one"), 1).unwrap();
    assert_beats_design_doc("one, seed 1", &s, 0.968);
    assert_eq!(s.shortfall_events, 0);
    assert!(
        s.max_over_capacity <= 1.0 + 1e-9,
        "peak {}",
        s.max_over_capacity
    );
}

#[test]
fn scenario_five_beats_the_design_doc() {
    for seed in 1..=3 {
        let (sim, s) = doorman_sim::run(load("five"), seed).unwrap();
        assert_eq!(sim.nodes.len(), 13, "root, 3 regions, 9 datacenters");
        assert_eq!(s.clients, 45);
        assert_beats_design_doc(&format!("five, seed {seed}"), &s, 0.968);
    }
}

#[test]
fn scenario_seven_beats_the_design_doc_despite_mishaps() {
    for seed in 1..=5 {
        let (sim, s) = doorman_sim::run(load("seven"), seed).unwrap();
        let what = format!("seven, seed {seed}");
        let lost = sim.marks.iter().filter(|m| m.what.contains("master lost"));
        assert!(sim.marks.len() >= 55, "{what}: a mishap every minute");
        assert!(lost.count() >= 5, "{what}: masters are lost");
        assert_beats_design_doc(&what, &s, 0.966);
    }
}
