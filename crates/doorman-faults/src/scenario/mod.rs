//! `doorman-faults scenario`: a simulator scenario run on real processes
//! (docs/sim-vs-real.md). It reads
//! the schedule the simulator realised for one seed (`plan.json` of a
//! `doorman-sim run`), starts the scenario's tree (every node `tasks`
//! replicas electing through etcd with the scenario's `reelection_s` as
//! their election TTL; every client its own process on our Rust client
//! library, the clients of a leaf sharing one host), replays the plan in
//! real time (`replay.rs`), reads every node's master once a second
//! (`sample.rs`), and writes the simulator's files (`timeseries.csv`,
//! `nodes.csv`, `events.csv`, a copy of `plan.json`) and `real.json`, so
//! `doorman-sim compare` reads the real run beside the simulated one.
//!
//! Must not: compare or judge (`doorman-sim compare` does).

mod replay;
mod sample;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args as ClapArgs;
use doorman_sim::engine::RPC_TIMEOUT;
use doorman_sim::plan::{Plan, PlanKind};
use doorman_sim::scenario::Scenario;

use crate::clock::mono;
use crate::run::{programs, ServerPrograms};
use crate::tree::{ClientSpec, Kind, Layout, Node, Terms};
use crate::world::World;

/// `scenario`'s options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The scenario file (`simulations/scenarios/*.toml`).
    pub file: PathBuf,
    /// Its profile.
    #[arg(long, default_value = "ours")]
    pub profile: String,
    /// The simulated run to replay: the directory holding its `plan.json`
    /// (`doorman-sim run FILE --seed N --out DIR`).
    #[arg(long)]
    pub sim: PathBuf,
    /// The servers' programs.
    #[command(flatten)]
    pub servers: ServerPrograms,
    /// Where the real run's files go.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs the scenario's plan on real processes and writes its files.
pub async fn run(a: Args) -> anyhow::Result<bool> {
    let plan = read_plan(&a.sim)?;
    let scenario = load(&a.file, &a.profile)?;
    check(&plan, &scenario)?;
    let programs = programs(&a.servers, None, None)?;
    let layout = layout(&plan, &scenario)?;
    std::fs::create_dir_all(&a.out)?;
    eprintln!(
        "doorman-faults: scenario {} ({}), seed {}, {} s, {} nodes, {} clients; logs in {}",
        plan.scenario,
        plan.profile,
        plan.seed,
        plan.duration,
        plan.nodes.len(),
        plan.clients.len(),
        a.out.display()
    );
    let mut world = World::start(layout, programs, &a.out, (std::process::id(), plan.seed))?;
    let t0 = start_clients(&mut world).await?;
    let https = world.layout.nodes.iter().enumerate();
    let https = https.map(|(n, _)| world.replicas(n).map(|s| s.http).collect());
    let poller = tokio::spawn(sample::poll(
        https.collect(),
        plan.resource.clone(),
        t0,
        plan.duration,
    ));
    let done = replay::replay(&mut world, &plan, t0).await;
    let views = poller.await.context("the poller failed")?;
    world.stop();
    let done = done?;
    sample::write(&a.out, &plan, &world, (t0, &views), &done)?;
    std::fs::copy(a.sim.join("plan.json"), a.out.join("plan.json"))?;
    eprintln!("doorman-faults: wrote {}", a.out.display());
    Ok(true)
}

/// The simulator's start, on the real tree. The simulated masters take
/// office at 0 s, and the timers a master starts then (its refresh
/// schedule, its horizon checks) run from there; so every client process
/// is started first, held until its `start_ms` after `t0`
/// (`--start-at-mono`), then the servers just before `t0`, so that each
/// node elects its master within a second before it. Returns `t0`.
async fn start_clients(w: &mut World) -> anyhow::Result<f64> {
    let t0 = mono() + CLIENTS_START_MARGIN;
    w.start_clients_at(t0)?;
    let servers_at = t0 - SERVERS_LEAD;
    if mono() > servers_at {
        bail!(
            "starting the clients took longer than {CLIENTS_START_MARGIN} s less {SERVERS_LEAD} s"
        );
    }
    tokio::time::sleep(std::time::Duration::from_secs_f64(servers_at - mono())).await;
    w.start_held_servers()?;
    let deadline = mono() + MASTERS_WITHIN;
    for n in 0..w.layout.nodes.len() {
        while crate::faults::master(w, n).await.is_none() {
            if mono() > deadline {
                bail!(
                    "node {} had no master within {MASTERS_WITHIN} s",
                    w.layout.nodes[n].name
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let late = mono() - t0;
    if late > 0.0 {
        eprintln!("doorman-faults: every node had a master {late:.2} s after t0 (the simulator's are in office at 0 s)");
    }
    Ok(t0)
}

/// How long every node may take to elect its first master.
const MASTERS_WITHIN: f64 = 60.0;

/// Time to start every client process before the run's `t0` (32 clients
/// start in about half a second on a 2-core machine).
const CLIENTS_START_MARGIN: f64 = 3.0;

/// The servers start this long before `t0`: starting the 14 replicas of
/// `real-tree` takes about 0.6 s and an election about 30 ms (the logs of
/// a run), so every node's master takes office in the second before `t0`.
const SERVERS_LEAD: f64 = 1.0;

fn read_plan(dir: &Path) -> anyhow::Result<Plan> {
    let file = dir.join("plan.json");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}", file.display()))
}

fn load(file: &Path, profile: &str) -> anyhow::Result<Scenario> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Scenario::parse_profile(&text, profile).with_context(|| format!("{}", file.display()))
}

/// The plan belongs to the scenario and can be replayed.
fn check(plan: &Plan, s: &Scenario) -> anyhow::Result<()> {
    if plan.scenario != s.name || plan.profile != s.profile {
        bail!(
            "the plan is of scenario {} ({}), not {} ({})",
            plan.scenario,
            plan.profile,
            s.name,
            s.profile
        );
    }
    if !plan.demand_recorded {
        bail!("the plan has no demand (too many clients for a recorded run)");
    }
    if plan.marks.iter().any(|m| m.kind == PlanKind::Election) {
        bail!("the plan holds elections, which the real tree cannot replay: set mishaps.weights.election = 0");
    }
    Ok(())
}

/// The scenario's tree: its nodes with `tasks` replicas each, its clients
/// (Rust, one process each, one host per leaf), its config.
fn layout(plan: &Plan, s: &Scenario) -> anyhow::Result<Layout> {
    let index = |name: &str| plan.nodes.iter().position(|n| n.name == name);
    let mut nodes = Vec::new();
    for n in &plan.nodes {
        let parent = match &n.parent {
            Some(p) => Some(index(p).with_context(|| format!("plan: no node {p}"))?),
            None => None,
        };
        nodes.push(Node {
            name: n.name.clone(),
            parent,
            replicas: s.tasks,
            faultable: true,
        });
    }
    let mut wants = vec![0.0; plan.clients.len()];
    for &(_, c, w) in plan.demand.iter().take_while(|d| d.0 <= 0.0) {
        if let Some(x) = wants.get_mut(c) {
            *x = w;
        }
    }
    let starts = plan.clients.iter().map(|c| f64::from(c.start_ms) / 1e3);
    let starts = starts.collect();
    let mut clients = Vec::new();
    for (c, w) in plan.clients.iter().zip(wants) {
        let leaf = index(&c.leaf).with_context(|| format!("plan: no node {}", c.leaf))?;
        clients.push(ClientSpec {
            name: c.id.replace('/', "-"),
            id: c.id.clone(),
            host: format!("{}-clients", c.leaf),
            wants: w,
            kind: Kind::Rust,
            leaf,
            proxied: false,
        });
    }
    // The deadlines the simulator gives its clients: the library's
    // default, less where the leases' refresh interval halves it.
    let rpc_timeout_ms = RPC_TIMEOUT.as_millis() as u64;
    let terms = Terms {
        capacity: plan.capacity,
        ttl: s.reelection_s.max(1),
        rpc_timeout_ms,
        ..Terms::default()
    };
    Ok(Layout {
        nodes,
        clients,
        terms,
        config: Some(s.config.clone()),
        resource: plan.resource.clone(),
        mass: None,
        clocks: Vec::new(),
        secure: false,
        liar: None,
        client_starts: Some(starts),
    })
}
