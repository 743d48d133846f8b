//! Building the simulated world from a scenario: the tree of nodes (each a
//! job of tasks whose master runs a real `ServerCore`), the clients (each a
//! real `ClientCore`) and the first events.
//!
//! Must not: draw random numbers in any other order than the engine always
//! has (the same seed must give the same run).

use std::sync::Arc;

use doorman_core::client::{ClientCore, CoreOptions as ClientOptions, Fallback};
use doorman_core::config::Config;
use doorman_core::server::{Role, Who};
use doorman_core::Backoff;
use doorman_lease::{Span, Time};

use super::{
    master_core, queue, Caller, Ev, Link, Node, Rng, Sim, SimClient, WantsChange, WANTS_LOG_CLIENTS,
};
use crate::scenario::Scenario;

/// The backoff of every simulated client and upstream link: the real
/// defaults (100 ms doubling to 30 s).
/// Mixed into the seed for the world's generator (demand and mishaps),
/// so it never draws the same sequence as the network's.
const WORLD_STREAM: u64 = 0xD1B5_4A32_D192_ED03;

pub(super) fn backoff(rng: &mut Rng) -> Backoff {
    Backoff::new(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(30),
        rng.next_u64(),
    )
}

/// One node: the root gets the scenario's config, the others none.
fn node(
    name: String,
    depth: usize,
    parent: Option<usize>,
    cfg: &Arc<Config>,
    (tasks, shards): (usize, usize),
    start: Time,
    rng: &mut Rng,
) -> Node {
    let role = if parent.is_none() {
        Role::Root
    } else {
        Role::Intermediate
    };
    let config = if parent.is_none() {
        cfg.clone()
    } else {
        Arc::new(Config::empty())
    };
    let mut horizon = None;
    let (core, _) = master_core(role, (&name, 0), &config, shards, start, &mut horizon);
    Node {
        id: Arc::from(name.as_str()),
        name,
        depth,
        parent,
        core,
        role,
        config,
        tasks,
        shards,
        master: Some(0),
        view: Some(0),
        dead: None,
        lost_mark: None,
        unreachable_until: Time::ZERO,
        wake_gen: 0,
        poke: false,
        replay: Default::default(),
        link: Link::new(tasks),
        stream: Default::default(),
        pusher: Default::default(),
        backoff: backoff(rng),
        served: 0,
        horizon,
    }
}

/// The nodes, parents first, and the indices of the leaves.
fn tree(
    scenario: &Scenario,
    cfg: &Arc<Config>,
    start: Time,
    rng: &mut Rng,
) -> (Vec<Node>, Vec<usize>) {
    let size = (scenario.tasks.max(1), scenario.shards.max(1));
    let mut nodes = vec![node("root".into(), 0, None, cfg, size, start, rng)];
    let mut level = vec![0usize];
    for (d, fan) in scenario.tree.iter().enumerate() {
        let mut next = Vec::new();
        for &p in &level {
            for i in 0..*fan {
                let name = if p == 0 {
                    format!("n{i}")
                } else {
                    format!("{}.{i}", nodes[p].name)
                };
                nodes.push(node(name, d + 1, Some(p), cfg, size, start, rng));
                next.push(nodes.len() - 1);
            }
        }
        level = next;
    }
    (nodes, level)
}

/// `clients_per_leaf` clients under each leaf, asking for the resource.
fn clients(
    scenario: &Scenario,
    nodes: &[Node],
    leaves: &[usize],
    start: Time,
    rng: &mut Rng,
) -> Vec<SimClient> {
    let mut clients = Vec::new();
    for &leaf in leaves {
        for i in 0..scenario.clients_per_leaf {
            let id = format!("{}/c{i}", nodes[leaf].name);
            let mut core = ClientCore::new(
                id.clone(),
                ClientOptions {
                    min_refresh_interval: Span::secs(1),
                    fallback: Fallback::Pessimistic,
                    ..ClientOptions::default()
                },
            );
            core.add(&scenario.resource, 0, scenario.demand.initial, start);
            clients.push(SimClient {
                core,
                id: Arc::from(id.as_str()),
                leaf,
                wants: scenario.demand.initial,
                start_ms: 0,
                wake_gen: 0,
                link: Link::new(scenario.tasks.max(1)),
                stream: Default::default(),
                backoff: backoff(rng),
                replay: Default::default(),
            });
        }
    }
    clients
}

impl Sim {
    /// Builds the tree and the clients.
    pub fn new(scenario: Scenario, seed: u64) -> anyhow::Result<Sim> {
        let cfg = Arc::new(Config::parse(&scenario.config, "scenario config")?);
        let capacity = cfg
            .find(&scenario.resource)
            .map(|t| t.capacity)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no template in config matches resource {}",
                    scenario.resource
                )
            })?;
        let start = Time::from_secs(1_700_000_000);
        let mut rng = Rng::new(seed);
        let world = Rng::new(seed ^ WORLD_STREAM);
        let (mut nodes, leaves) = tree(&scenario, &cfg, start, &mut rng);
        let clients = clients(&scenario, &nodes, &leaves, start, &mut rng);
        for (i, c) in clients.iter().enumerate() {
            let who = Who::Client(c.id.clone());
            nodes[c.leaf].pusher.holders.insert(who, Caller::Client(i));
        }
        for i in 0..nodes.len() {
            if let Some(p) = nodes[i].parent {
                let who = Who::Server(nodes[i].id.clone());
                nodes[p].pusher.holders.insert(who, Caller::Node(i));
            }
        }
        let keep_per_client = clients.len() <= 10_000;
        let wants_log = (clients.len() <= WANTS_LOG_CLIENTS).then(|| {
            (0..clients.len())
                .map(|client| WantsChange {
                    t: 0.0,
                    client,
                    wants: scenario.demand.initial,
                })
                .collect()
        });
        let answers = wants_log.as_ref().map(|_| Vec::new());
        let mut sim = Sim {
            capacity,
            start,
            queue: queue::Queue::new(start),
            rng,
            world,
            nodes,
            clients,
            samples: Vec::new(),
            marks: Vec::new(),
            wants_log,
            answers,
            keep_per_client,
            events_run: 0,
            rpcs: Default::default(),
            replay: None,
            scenario,
        };
        sim.first_events();
        Ok(sim)
    }

    /// Clients' first wake-ups, demand changes, samples, scheduled events
    /// and mishaps.
    fn first_events(&mut self) {
        let start = self.start;
        for c in 0..self.clients.len() {
            // Clients start spread over the first second.
            let ms = self.rng.below(1000);
            self.clients[c].start_ms = ms as u32;
            self.push(start + Span::from_millis(ms as i64), Ev::ClientWake(c, 0));
        }
        if self.scenario.demand.change_every > 0 {
            let every = Span::secs(self.scenario.demand.change_every as i64);
            self.push(start + every, Ev::DemandTick);
        }
        self.push(start, Ev::Sample);
        // Half a second off the samples: a sample never ties with a pass.
        self.push(start + Span::from_millis(500), Ev::Cleanup);
        for i in 0..self.scenario.events.len() {
            let at = start + Span::secs(self.scenario.events[i].at as i64);
            self.push(at, Ev::Scheduled(i));
        }
        if let Some(m) = &self.scenario.mishaps {
            let at = start + Span::secs((m.start.max(m.every)) as i64);
            self.push(at, Ev::Mishap);
        }
    }
}
