//! `plan.json` records the schedule a run realised (replaying its demand
//! gives each client's final wants; every mark is there), and
//! `doorman-sim compare` finds no difference between a run and itself,
//! misses the utilisation target when the "real" run holds 5 % of
//! capacity less, misses the over-capacity target on one second above
//! capacity the simulated run does not have, and reading a malformed
//! `timeseries.csv` names the line.

use std::path::{Path, PathBuf};
use std::process::Command;

use doorman_sim::compare::{compare_dirs, Comparison};
use doorman_sim::engine::{MarkKind, Sim};
use doorman_sim::plan::{Plan, PlanKind};
use doorman_sim::runs::{read_plan, read_run};
use doorman_sim::scenario::Scenario;

/// Five minutes of a root and two leaves, six clients wanting more than
/// the capacity, demand moving every 10 s, scheduled events and a mishap
/// of any kind every 30 s.
const SHORT: &str = r#"
name = "short"
duration = 300
settle = 60
resource = "db"
tree = [2]
tasks = 2
clients_per_leaf = 3
reelection_s = 5
config = """
[[resources]]
identifier_glob = "db"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 30
refresh_interval = 5
"""

[demand]
initial = 25
change_every = 10
change = 0.2

[[events]]
at = 100
kind = "spike"
clients = 2
wants = 60

[[events]]
at = 150
kind = "master_lost"
node = "n0"

[[events]]
at = 200
kind = "unreachable"
node = "n1"
until = 220

[mishaps]
every = 30
spike = 25
outage_max = 10
start = 60
weights = { spike = 2, election = 1, master_lost = 1, unreachable = 1 }
"#;

const SEED: u64 = 3;

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("doorman-sim-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the short scenario into `dir`.
fn short_run(dir: &Path) -> Sim {
    let (sim, summary) = doorman_sim::run(Scenario::parse(SHORT).unwrap(), SEED).unwrap();
    doorman_sim::output::write_all(&sim, &summary, dir).unwrap();
    sim
}

/// A copy of the run in `from` at `to`, with `clients_has` of each row
/// (t, has) replaced by `has(t, has)`.
fn copy_with(from: &Path, to: &Path, has: impl Fn(f64, f64) -> f64) {
    std::fs::create_dir_all(to).unwrap();
    for f in ["plan.json", "nodes.csv", "timeseries.csv"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(from.join("timeseries.csv")).unwrap();
    let mut out: Vec<String> = vec![text.lines().next().unwrap().into()];
    for line in text.lines().skip(1) {
        let mut fields: Vec<String> = line.split(',').map(String::from).collect();
        let t: f64 = fields[0].parse().unwrap();
        let last = fields.last_mut().unwrap();
        *last = format!("{:.3}", has(t, last.parse().unwrap()));
        out.push(fields.join(","));
    }
    std::fs::write(to.join("timeseries.csv"), out.join("\n") + "\n").unwrap();
}

fn misses_of(c: &Comparison) -> Vec<String> {
    assert_eq!(c.seeds.len(), 1);
    c.misses()
}

/// `doorman-sim compare SIM REAL --check`'s exit status.
fn check_status(sim: &Path, real: &Path) -> Option<i32> {
    let out = Command::new(env!("CARGO_BIN_EXE_doorman-sim"))
        .arg("compare")
        .args([sim, real])
        .arg("--check")
        .output()
        .unwrap();
    out.status.code()
}

#[test]
fn the_plan_replays_the_demand_and_lists_every_mark() {
    let dir = scratch("plan");
    let sim = short_run(&dir);
    let plan = read_plan(&dir.join("plan.json")).unwrap();
    assert_eq!(
        plan,
        Plan::of(&sim, SEED),
        "plan.json reads back as written"
    );
    let clients: Vec<(&str, usize, f64)> = sim.clients().collect();
    assert_eq!(plan.clients.len(), 6);
    assert_eq!(
        (plan.capacity, plan.settle, plan.duration),
        (100.0, 60, 300)
    );
    // One entry per client at 0, in the clients' order, then time order.
    for (i, &(t, c, w)) in plan.demand[..clients.len()].iter().enumerate() {
        assert_eq!((t, c, w), (0.0, i, 25.0));
    }
    assert!(plan.demand.windows(2).all(|w| w[0].0 <= w[1].0));
    let mut wants = vec![f64::NAN; clients.len()];
    for &(_, c, w) in &plan.demand {
        wants[c] = w;
    }
    let end: Vec<f64> = clients.iter().map(|c| c.2).collect();
    assert_eq!(wants, end, "replaying the demand gives the final wants");
    // 30 demand ticks (10 s … 300 s) for every client, 2 clients in the
    // scheduled spike, one per random spike.
    let spikes = sim
        .marks
        .iter()
        .filter(|m| m.kind == MarkKind::Spike)
        .count()
        - 1;
    assert!(spikes > 0, "the seed has a random spike");
    assert_eq!(plan.demand.len(), 6 * 31 + 2 + spikes);
    assert!(
        plan.demand.contains(&(100.0, 1, 60.0)),
        "the scheduled spike"
    );
    assert_eq!(plan.marks.len(), sim.marks.len());
    for (p, m) in plan.marks.iter().zip(&sim.marks) {
        assert_eq!((p.t, p.end, &p.what), (m.t, m.end, &m.what));
        assert_eq!(p.mark_kind(), Some(m.kind));
        let node = m.node.map(|n| sim.nodes[n].name.clone());
        assert_eq!((&p.node, p.client), (&node, m.client));
    }
    let kinds: Vec<PlanKind> = plan.marks.iter().map(|m| m.kind).collect();
    for k in [PlanKind::Spike, PlanKind::MasterLost, PlanKind::CutOff] {
        assert!(kinds.contains(&k), "{k:?} among the marks");
    }
    let lost = plan.marks.iter().find(|m| m.t == 150.0).unwrap();
    assert_eq!((lost.node.as_deref(), lost.depth), (Some("n0"), Some(1)));
    assert_eq!(lost.end, 155.0, "the re-election ended it");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_compared_with_itself_differs_nowhere() {
    let dir = scratch("self");
    let runs =
        doorman_sim::seeds::run_seeds(&Scenario::parse(SHORT).unwrap(), &[1, 2], 2, Some(&dir))
            .unwrap();
    assert_eq!(runs.runs.len(), 2);
    let c = compare_dirs(&dir, &dir).unwrap();
    assert_eq!(c.seeds.iter().map(|s| s.seed).collect::<Vec<_>>(), [1, 2]);
    for s in &c.seeds {
        assert!(s.per_second.seconds >= 300);
        assert_eq!(s.per_second.max_abs_diff, Some(0.0));
        assert_eq!(s.per_second.mean_abs_diff, Some(0.0));
        assert!(s.sim.utilisation_samples > 0);
        for r in &s.rows {
            assert!(r.difference.is_none_or(|d| d == 0.0), "{}", r.describe());
            assert_ne!(r.ok, Some(false), "{}", r.describe());
        }
        let summary = runs.runs.iter().find(|r| r.seed == s.seed).unwrap();
        let util = summary.ours_utilisation.unwrap();
        assert!((s.sim.utilisation.unwrap() - util).abs() < 1e-6);
    }
    assert!(c.passed() && c.misses().is_empty());
    let out = dir.join("out");
    doorman_sim::compare::write(&c, &out).unwrap();
    for f in ["compare.md", "compare.json", "seed-1.svg", "seed-2.svg"] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    assert_eq!(
        check_status(&dir.join("seed-1"), &dir.join("seed-1")),
        Some(0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn five_percent_less_misses_the_utilisation_target() {
    let dir = scratch("less");
    short_run(&dir.join("sim"));
    let (sim, real) = (dir.join("sim"), dir.join("real"));
    copy_with(
        &sim,
        &real,
        |t, has| if t >= 60.0 { has - 5.0 } else { has },
    );
    let c = compare_dirs(&sim, &real).unwrap();
    let u = &c.seeds[0].rows[0];
    assert_eq!(
        (u.figure.as_str(), u.ok),
        ("utilisation (ours)", Some(false))
    );
    let d = u.difference.unwrap();
    assert!((d + 0.05).abs() < 1e-3, "5 pp less: {d}");
    assert!(misses_of(&c)
        .iter()
        .any(|m| m.contains("utilisation (ours)")));
    assert_eq!(check_status(&sim, &real), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_second_above_capacity_the_simulation_does_not_have_misses() {
    let dir = scratch("over");
    let sim_run = short_run(&dir.join("sim"));
    let (sim, real) = (dir.join("sim"), dir.join("real"));
    let at = sim_run
        .samples
        .iter()
        .find(|s| s.t >= 60.0 && s.client_has <= 100.0)
        .map(|s| s.t)
        .unwrap();
    copy_with(&sim, &real, |t, has| if t == at { 100.5 } else { has });
    let c = compare_dirs(&sim, &real).unwrap();
    assert_eq!(c.seeds[0].per_second.real_over_alone, vec![at]);
    let misses = misses_of(&c);
    assert_eq!(misses.len(), 1, "{misses:?}");
    assert!(misses[0].contains("above capacity where the simulated run is not"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_timeseries_names_its_line() {
    let dir = scratch("bad");
    short_run(&dir);
    let file = dir.join("timeseries.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "4,100.000,oops";
    std::fs::write(&file, lines.join("\n")).unwrap();
    let e = read_run(&dir).unwrap_err().to_string();
    assert!(e.contains("timeseries.csv, line 5"), "{e}");
    let e = compare_dirs(&dir, &dir).unwrap_err().to_string();
    assert!(e.contains("timeseries.csv, line 5"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
