//! Every simulated master runs the server's cleanup once a second, so a
//! node nobody can reach still forgets its requesters' leases as they
//! end, as a real server does (issue 36: against the real tree, a cut-off
//! region's books dropped to 0 within the second, the simulated one kept
//! them for the whole outage).

use doorman_sim::scenario::Scenario;

const SCENARIO: &str = r#"
name = "cleanup"
duration = 90
settle = 10
resource = "db"
tree = [2]
clients_per_leaf = 2
reelection_s = 3
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

[[events]]
at = 30
kind = "unreachable"
node = "n0"
until = 85
"#;

#[test]
fn a_cut_off_node_forgets_its_requesters_leases_as_they_end() {
    let scenario = Scenario::parse(SCENARIO).unwrap();
    let (sim, _) = doorman_sim::run(scenario, 1).unwrap();
    let n0 = sim.nodes.iter().position(|n| n.name == "n0").unwrap();
    let at = |t: f64| sim.samples.iter().find(|s| s.t >= t).unwrap();
    let (_, wants, has) = at(25.0).nodes[n0];
    assert!(
        wants > 59.0 && has > 49.0,
        "before the cut n0's clients hold leases: {wants} {has}"
    );
    // Cut off at 30 s: its clients' 20 s leases end by 50 s, and the
    // next cleanup forgets them although no request reaches n0.
    let (_, wants, has) = at(52.0).nodes[n0];
    assert_eq!((wants, has), (0.0, 0.0), "n0's books at 52 s");
}
