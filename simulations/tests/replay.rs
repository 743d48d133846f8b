//! `doorman-sim run --replay-asks`: a node asks its parent when a real
//! run's did, and its refresh timer starts again from there (issue 46:
//! one seed, one history on both sides). The rules are in
//! `engine/replay.rs`.

use doorman_sim::engine::{AskTimes, Sim};
use doorman_sim::plan::Plan;
use doorman_sim::scenario::Scenario;

const SCENARIO: &str = r#"
name = "replay"
duration = 60
settle = 10
resource = "db"
tree = [1]
clients_per_leaf = 2
reelection_s = 3
rpc_delay_ms = [1, 5]
config = """
[[resources]]
identifier_glob = "db"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 5
"""

[demand]
initial = 30
change = 0.1
change_every = 10
"#;

fn run(asks: Option<&AskTimes>) -> Sim {
    let scenario = Scenario::parse(SCENARIO).unwrap();
    doorman_sim::run_replaying(scenario, 3, asks).unwrap().0
}

/// When node `name` got its answers, seconds since the start.
fn answered(sim: &Sim, name: &str) -> Vec<f64> {
    let node = sim.nodes.iter().position(|n| n.name == name).unwrap();
    let answers = sim.answers.as_ref().unwrap();
    answers
        .iter()
        .filter(|a| a.node == node)
        .map(|a| a.t)
        .collect()
}

fn asks(csv: &str) -> AskTimes {
    AskTimes::parse(csv).unwrap()
}

#[test]
fn a_listed_ask_off_the_nodes_own_phase_is_made_and_restarts_its_timer() {
    let own = answered(&run(None), "n0");
    // The listed times fall between the node's own asks (every 5 s).
    let listed = [own[3] + 2.5, own[7] + 1.9];
    let replay = asks(&format!(
        "t,who\n{:.3},n0\n{:.3},n0\n",
        listed[0], listed[1]
    ));
    let sim = run(Some(&replay));
    let got = answered(&sim, "n0");
    for t in listed {
        // Made when a node's 20 ms wait for an ask of its own is over,
        // answered after the simulated network's round trip (2–10 ms).
        let at = t + 0.02;
        assert!(
            got.iter().any(|&a| a > at && a < at + 0.02),
            "an answer just after {at:.3} s: {got:?}"
        );
        // The refresh timer starts again from the listed ask: the next
        // ask comes a refresh interval (5 s) after it.
        assert!(
            got.iter().any(|&a| a > at + 5.0 && a < at + 5.03),
            "an answer a refresh interval after {at:.3} s: {got:?}"
        );
    }
    let counts = sim.replay_counts().unwrap();
    let n = counts.nodes;
    assert_eq!((n.listed, n.after_window), (2, 2), "{counts:?}");
}

#[test]
fn replaying_a_runs_own_asks_changes_nothing() {
    let plain = run(None);
    let csv: String = answered(&plain, "n0")
        .iter()
        .map(|t| format!("{t:.3},n0\n"))
        .collect();
    let replayed = run(Some(&asks(&format!("t,who\n{csv}"))));
    let counts = replayed.replay_counts().unwrap().nodes;
    assert!(counts.listed > 10, "{counts:?}");
    assert_eq!(
        counts.own, counts.listed,
        "each matched by its own ask: {counts:?}"
    );
    assert_eq!(answered(&plain, "n0"), answered(&replayed, "n0"));
    let has = |s: &Sim| s.samples.iter().map(|x| x.client_has).collect::<Vec<_>>();
    assert_eq!(has(&plain), has(&replayed));
}

#[test]
fn the_replay_leaves_the_plan_as_it_was() {
    let replay = asks("t,who\n3.217,n0\n11.5,n0\n30.004,n0\n12.25,n0/c1\n");
    let plain = run(None);
    let replayed = run(Some(&replay));
    assert_ne!(answered(&plain, "n0"), answered(&replayed, "n0"));
    assert_eq!(Plan::of(&plain, 3), Plan::of(&replayed, 3));
}

#[test]
fn a_client_asks_at_its_listed_times() {
    let plain = run(None);
    // This client asks every 2 s (its leaf's refresh interval), at
    // 19.25 s among others. A client's listed ask goes at its time and
    // restarts its timer: 20.41 s, then its own at 22.41 s, then 23.61 s,
    // each more than the minimum interval (1 s) after the last.
    let replay = asks("t,who\n20.41,n0/c0\n23.61,n0/c0\n");
    let sim = run(Some(&replay));
    let c = sim.replay_counts().unwrap().clients;
    assert_eq!((c.listed, c.after_window, c.later), (2, 2, 0), "{c:?}");
    assert_eq!(sim.replay_counts().unwrap().nodes.listed, 0);
    // What the client holds moves with its asks: the runs differ.
    let has = |s: &Sim| s.samples.iter().map(|x| x.client_has).collect::<Vec<_>>();
    assert_ne!(has(&plain), has(&sim));
}

#[test]
fn a_listed_ask_inside_the_minimum_interval_goes_as_soon_as_it_may() {
    // The client asks on its own at 19.25 s (above); a listed ask at
    // 19.5 s may not go before 20.25 s, and then goes.
    let sim = run(Some(&asks("t,who\n19.5,n0/c0\n")));
    let c = sim.replay_counts().unwrap().clients;
    assert_eq!(
        (c.listed, c.after_window, c.later, c.dropped),
        (1, 0, 1, 0),
        "{c:?}"
    );
}

#[test]
fn after_a_failed_call_a_node_asks_again_when_the_real_one_did() {
    let cut = format!(
        "{SCENARIO}\n[[events]]\nat = 20\nkind = \"unreachable\"\nnode = \"n0\"\nuntil = 35\n"
    );
    let run_cut = |asks: Option<&AskTimes>| {
        let scenario = Scenario::parse(&cut).unwrap();
        doorman_sim::run_replaying(scenario, 3, asks).unwrap().0
    };
    let plain = answered(&run_cut(None), "n0");
    // The real node's answered asks: the same before the cut, then its
    // first after the cut at 37.3 s (its retries in between failed).
    let mut csv = String::from("t,who\n");
    for t in plain.iter().filter(|&&t| t < 20.0) {
        csv += &format!("{t:.3},n0\n");
    }
    csv += "37.3,n0\n";
    let got = answered(&run_cut(Some(&asks(&csv))), "n0");
    let after: Vec<f64> = got.into_iter().filter(|&t| t > 20.0).collect();
    // Asked when the listed ask's wait ends (37.32 s), answered after
    // the link's reconnect (Discovery and a new connection).
    assert!(
        after.first().is_some_and(|&t| t > 37.32 && t < 38.0),
        "the first answer after the cut follows the listed ask: {after:?}"
    );
    let own: Vec<&f64> = plain.iter().filter(|&&t| t > 20.0).collect();
    assert!(
        own.first().is_some_and(|&&t| t < 37.0),
        "on its own it retried sooner: {own:?}"
    );
}

#[test]
fn a_bad_ask_file_is_refused_with_its_line() {
    let err = |csv: &str| AskTimes::parse(csv).unwrap_err();
    assert!(
        err("time,who\n").contains("line 1"),
        "{}",
        err("time,who\n")
    );
    let e = err("t,who\n1.0,n0\nsoon,n0\n");
    assert!(e.contains("line 3") && e.contains("soon"), "{e}");
    let e = err("t,who\n1.0\n");
    assert!(e.contains("line 2"), "{e}");
    let scenario = Scenario::parse(SCENARIO).unwrap();
    let e = doorman_sim::run_replaying(scenario.clone(), 1, Some(&asks("t,who\n1,n9\n")))
        .err()
        .unwrap();
    assert!(e.to_string().contains("\"n9\""), "{e}");
    let e = doorman_sim::run_replaying(scenario, 1, Some(&asks("t,who\n1,root\n")))
        .err()
        .unwrap();
    assert!(e.to_string().contains("root"), "{e}");
}
