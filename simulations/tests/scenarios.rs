//! The simulator runs the real cores deterministically, and scenarios 1 and 5
//! beat the design doc's figures (96.8 % utilisation in scenario 5, shortfall
//! peak 106.05 %, re-convergence within 2 minutes).

use doorman_sim::scenario::Scenario;

fn load(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    Scenario::parse(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn the_same_seed_gives_identical_output() {
    let a = doorman_sim::run(load("five"), 7).unwrap();
    let b = doorman_sim::run(load("five"), 7).unwrap();
    assert_eq!(
        doorman_sim::output::csv(&a.0),
        doorman_sim::output::csv(&b.0)
    );
    assert_eq!(
        doorman_sim::output::svg(&a.0),
        doorman_sim::output::svg(&b.0)
    );
    let strip = |s: &doorman_sim::summary::Summary| {
        let mut v = serde_json::to_value(s).unwrap();
        v["wall_clock_s"] = serde_json::Value::Null;
        v["peak_rss_kib"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&a.1), strip(&b.1));
    let c = doorman_sim::run(load("five"), 8).unwrap();
    assert_ne!(
        doorman_sim::output::csv(&a.0),
        doorman_sim::output::csv(&c.0),
        "another seed, another run"
    );
}

#[test]
fn scenario_one_hands_out_its_capacity_without_shortfall() {
    let (_, s) = doorman_sim::run(load("one"), 1).unwrap();
    let util = s
        .mean_utilisation
        .expect("demand exceeds capacity at times");
    assert!(util >= 0.99, "utilisation {util}");
    assert_eq!(s.shortfall_events, 0);
    assert!(
        s.max_over_capacity <= 1.0 + 1e-9,
        "peak {}",
        s.max_over_capacity
    );
}

#[test]
fn scenario_five_beats_the_design_doc() {
    let (sim, s) = doorman_sim::run(load("five"), 1).unwrap();
    assert_eq!(sim.nodes.len(), 13, "root, 3 regions, 9 datacenters");
    assert_eq!(s.clients, 45);
    let util = s.mean_utilisation.expect("demand exceeds capacity");
    assert!(util > 0.968, "design doc: 96.8 %; got {util}");
    assert!(
        s.max_over_capacity < 1.0605,
        "design doc peak: 106.05 %; got {}",
        s.max_over_capacity
    );
    if let Some(t) = s.longest_reconvergence_s {
        assert!(t < 120.0, "design doc: within 2 minutes; got {t} s");
    }
}

#[test]
fn scenario_seven_hands_out_more_than_the_design_doc_despite_mishaps() {
    // Utilisation beats the design doc's 96.6 % on every seed tried (1–5:
    // 97.9–98.3 %). The shortfall peak does not yet on every seed (see
    // docs/simulation.md), so it is reported, not asserted here.
    let (sim, s) = doorman_sim::run(load("seven"), 1).unwrap();
    assert!(
        sim.marks.len() >= 50,
        "a mishap every minute: {}",
        sim.marks.len()
    );
    let util = s.mean_utilisation.expect("demand exceeds capacity");
    assert!(util > 0.966, "design doc: 96.6 %; got {util}");
}
