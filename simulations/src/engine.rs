//! The discrete-event engine: a virtual clock, an event queue ordered by
//! (time, sequence), and the real cores: one `ServerCore` per node (its
//! master), one `ClientCore` per client. RPCs are events delivered after a
//! random delay; expiries cross the "wire" in whole seconds, as in
//! production. Everything random comes from one seeded generator, so the
//! same seed gives the same run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use doorman_algorithms::{Amount, Demand, Lease, Time};
use doorman_client::{
    Backoff, ClientCore, CoreOptions as ClientOptions, Fallback, GrantItem, Mode,
};
use doorman_server::config::Config;
use doorman_server::core::{
    CapacityRequest, CoreOptions, Grant, ResourceAsk, Role, ServerCore, UpstreamGrant, Who,
};

use crate::scenario::{EventKind, Scenario};

/// Deterministic xorshift64* generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[derive(Debug)]
enum From {
    Client(usize),
    Node(usize),
}

#[derive(Debug)]
enum Ev {
    ClientWake(usize, u64),
    ClientResponse(usize, Vec<String>, Option<Vec<GrantItem>>),
    Request(usize, From, CapacityRequest),
    UpstreamWake(usize, u64),
    UpstreamResponse(usize, Vec<String>, Option<Vec<UpstreamGrant>>),
    DemandTick,
    Sample,
    Scheduled(usize),
    Mishap,
    Reelect(usize),
}

struct Entry {
    at: Time,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One node of the tree: a job of `tasks` replicas, one of which is master.
/// Only the master's core exists: standby replicas hold no lease state, so
/// a new master starts from nothing. Each task has its own server id
/// (`<node>/t<task>`); towards the parent all of them use the node's id, as
/// `doorman server --node-id` (default: the election key) does.
pub struct Node {
    pub name: String,
    pub depth: usize,
    pub parent: Option<usize>,
    core: ServerCore,
    /// The node id: what its parent sees, whichever task is master.
    id: Arc<str>,
    role: Role,
    config: Arc<Config>,
    tasks: usize,
    master_task: usize,
    up: bool,
    unreachable_until: Time,
    wake_gen: u64,
    backoff: Backoff,
}

struct SimClient {
    core: ClientCore,
    id: Arc<str>,
    leaf: usize,
    wants: f64,
    wake_gen: u64,
    backoff: Backoff,
}

/// One row of the time series.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    pub t: f64,
    /// Per depth (0 = root): capacity, Σ wants of requesters, Σ has handed out.
    pub levels: Vec<(f64, f64, f64)>,
    /// Per node (in `Sim::nodes` order): capacity, Σ wants, Σ has.
    pub nodes: Vec<(f64, f64, f64)>,
    pub client_wants: f64,
    pub client_has: f64,
    /// Clients' has and wants (for fairness), only when asked.
    #[serde(skip)]
    pub per_client: Vec<(f64, f64)>,
}

/// A marker on the plot.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Mark {
    pub t: f64,
    pub what: String,
}

/// The whole simulated world.
pub struct Sim {
    pub scenario: Scenario,
    pub capacity: f64,
    now: Time,
    start: Time,
    seq: u64,
    queue: BinaryHeap<Reverse<Entry>>,
    rng: Rng,
    pub nodes: Vec<Node>,
    clients: Vec<SimClient>,
    pub samples: Vec<Sample>,
    pub marks: Vec<Mark>,
    keep_per_client: bool,
    pub events_run: u64,
}

const RPC_TIMEOUT: Time = Time::from_millis(5000);

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
        let mut nodes: Vec<Node> = Vec::new();
        let tasks = scenario.tasks.max(1);
        let mk = |name: String, depth: usize, parent: Option<usize>, rng: &mut Rng| {
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
            let (core, _) = master_core(role, &name, 0, &config, start);
            Node {
                id: Arc::from(name.as_str()),
                name,
                depth,
                parent,
                core,
                role,
                config,
                tasks,
                master_task: 0,
                up: true,
                unreachable_until: Time::ZERO,
                wake_gen: 0,
                backoff: Backoff::new(
                    std::time::Duration::from_millis(100),
                    std::time::Duration::from_secs(30),
                    rng.next_u64(),
                ),
            }
        };
        nodes.push(mk("root".into(), 0, None, &mut rng));
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
                    nodes.push(mk(name, d + 1, Some(p), &mut rng));
                    next.push(nodes.len() - 1);
                }
            }
            level = next;
        }
        let mut clients = Vec::new();
        for &leaf in &level {
            for i in 0..scenario.clients_per_leaf {
                let id = format!("{}/c{i}", nodes[leaf].name);
                let mut core = ClientCore::new(
                    id.clone(),
                    ClientOptions {
                        min_refresh_interval: Time::secs(1),
                        fallback: Fallback::Pessimistic,
                        retry_interval: Time::secs(5),
                    },
                );
                core.add(&scenario.resource, 0, scenario.demand.initial, start);
                clients.push(SimClient {
                    core,
                    id: Arc::from(id.as_str()),
                    leaf,
                    wants: scenario.demand.initial,
                    wake_gen: 0,
                    backoff: Backoff::new(
                        std::time::Duration::from_millis(100),
                        std::time::Duration::from_secs(30),
                        rng.next_u64(),
                    ),
                });
            }
        }
        let keep_per_client = clients.len() <= 10_000;
        let mut sim = Sim {
            capacity,
            now: start,
            start,
            seq: 0,
            queue: BinaryHeap::new(),
            rng,
            nodes,
            clients,
            samples: Vec::new(),
            marks: Vec::new(),
            keep_per_client,
            events_run: 0,
            scenario,
        };
        for c in 0..sim.clients.len() {
            // Clients start spread over the first second.
            let at = start + Time::from_millis(sim.rng.below(1000) as i64);
            sim.push(at, Ev::ClientWake(c, 0));
        }
        if sim.scenario.demand.change_every > 0 {
            sim.push(
                start + Time::secs(sim.scenario.demand.change_every as i64),
                Ev::DemandTick,
            );
        }
        sim.push(start, Ev::Sample);
        for i in 0..sim.scenario.events.len() {
            let at = start + Time::secs(sim.scenario.events[i].at as i64);
            sim.push(at, Ev::Scheduled(i));
        }
        if let Some(m) = &sim.scenario.mishaps {
            let at = start + Time::secs((m.start.max(m.every)) as i64);
            sim.push(at, Ev::Mishap);
        }
        Ok(sim)
    }

    fn push(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Entry {
            at,
            seq: self.seq,
            ev,
        }));
    }

    fn delay(&mut self) -> Time {
        let [lo, hi] = self.scenario.rpc_delay_ms;
        Time::from_millis((lo + self.rng.below(hi - lo + 1)) as i64)
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        (self.now - self.start).as_secs_f64()
    }

    /// Runs to the end of the scenario.
    pub fn run(&mut self) {
        let end = self.start + Time::secs(self.scenario.duration as i64);
        while let Some(Reverse(e)) = self.queue.pop() {
            if e.at > end {
                break;
            }
            self.now = e.at;
            self.events_run += 1;
            self.handle(e.ev);
        }
    }

    fn reachable(&self, node: usize) -> bool {
        let n = &self.nodes[node];
        n.up && self.now >= n.unreachable_until
    }

    fn schedule_client(&mut self, c: usize) {
        let now = self.now;
        let cl = &mut self.clients[c];
        cl.wake_gen += 1;
        let gen = cl.wake_gen;
        if let Some(t) = cl.core.next_wakeup(now) {
            self.push(t.max(now), Ev::ClientWake(c, gen));
        }
    }

    fn schedule_upstream(&mut self, node: usize, at: Option<Time>) {
        let n = &mut self.nodes[node];
        n.wake_gen += 1;
        let gen = n.wake_gen;
        let at = at.or_else(|| n.core.next_upstream_wakeup());
        if let Some(t) = at {
            let t = t.max(self.now);
            self.push(t, Ev::UpstreamWake(node, gen));
        }
    }

    fn handle(&mut self, ev: Ev) {
        let now = self.now;
        match ev {
            Ev::ClientWake(c, gen) => {
                if self.clients[c].wake_gen != gen {
                    return;
                }
                let res = self.scenario.resource.clone();
                let cl = &mut self.clients[c];
                cl.core.set_wants(&res, cl.wants, now);
                if let Some(items) = cl.core.poll_request(now) {
                    let ids: Vec<String> = items.iter().map(|i| i.resource_id.clone()).collect();
                    let req = CapacityRequest {
                        who: Who::Client(cl.id.clone()),
                        resources: items
                            .iter()
                            .map(|i| ResourceAsk {
                                resource_id: i.resource_id.clone(),
                                demands: vec![Demand::client(i.priority, amount(i.wants))],
                                claimed_has: i.has.map(|l| amount(l.capacity)),
                                claimed_refresh: i.has.map(|l| l.refresh_interval),
                                outstanding: None,
                            })
                            .collect(),
                    };
                    let leaf = cl.leaf;
                    let d = self.delay();
                    if self.reachable(leaf) {
                        self.push(now + d, Ev::Request(leaf, From::Client(c), req));
                    } else {
                        self.push(now + RPC_TIMEOUT, Ev::ClientResponse(c, ids, None));
                    }
                }
                self.schedule_client(c);
            }
            Ev::Request(node, from, req) => {
                let result = if self.reachable(node) {
                    self.nodes[node].core.get_capacity(now, &req).ok()
                } else {
                    None
                };
                if self.nodes[node].core.take_upstream_wake() {
                    self.schedule_upstream(node, Some(now));
                }
                let d = self.delay();
                let ids: Vec<String> = req
                    .resources
                    .iter()
                    .map(|r| r.resource_id.clone())
                    .collect();
                match from {
                    From::Client(c) => {
                        let grants = result.map(|g| g.iter().map(client_grant).collect());
                        self.push(now + d, Ev::ClientResponse(c, ids, grants));
                    }
                    From::Node(child) => {
                        let grants = result.map(|g| g.iter().map(upstream_grant).collect());
                        self.push(now + d, Ev::UpstreamResponse(child, ids, grants));
                    }
                }
            }
            Ev::ClientResponse(c, ids, grants) => {
                let cl = &mut self.clients[c];
                match grants {
                    Some(g) => {
                        cl.backoff.reset();
                        cl.core.on_response(now, &ids, &g);
                    }
                    None => {
                        let d = cl.backoff.next_delay();
                        cl.core.on_failure(now, &ids, Time::from_duration(d));
                    }
                }
                self.schedule_client(c);
            }
            Ev::UpstreamWake(node, gen) => {
                if self.nodes[node].wake_gen != gen || !self.nodes[node].up {
                    return;
                }
                let Some(parent) = self.nodes[node].parent else {
                    return;
                };
                if let Some(asks) = self.nodes[node].core.upstream_request(now) {
                    let ids: Vec<String> = asks.iter().map(|a| a.resource_id.clone()).collect();
                    let req = CapacityRequest {
                        who: Who::Server(self.nodes[node].id.clone()),
                        resources: asks
                            .iter()
                            .map(|a| ResourceAsk {
                                resource_id: a.resource_id.clone(),
                                demands: a
                                    .bands
                                    .iter()
                                    .filter_map(|&(p, n, w)| Demand::new(p, n, w).ok())
                                    .collect(),
                                claimed_has: a.has.map(|l| amount(l.capacity)),
                                claimed_refresh: a.has.map(|l| l.refresh_interval),
                                outstanding: Some(amount(a.outstanding)),
                            })
                            .collect(),
                    };
                    let d = self.delay();
                    if self.reachable(parent) {
                        self.push(now + d, Ev::Request(parent, From::Node(node), req));
                    } else {
                        self.push(now + RPC_TIMEOUT, Ev::UpstreamResponse(node, ids, None));
                    }
                }
                self.schedule_upstream(node, None);
            }
            Ev::UpstreamResponse(node, ids, grants) => {
                let n = &mut self.nodes[node];
                match grants {
                    Some(g) => {
                        n.backoff.reset();
                        n.core.upstream_response(now, &ids, &g);
                    }
                    None => {
                        let d = n.backoff.next_delay();
                        n.core.upstream_failure(now, &ids, Time::from_duration(d));
                    }
                }
                self.schedule_upstream(node, None);
            }
            Ev::DemandTick => {
                let ch = self.scenario.demand.change;
                for c in 0..self.clients.len() {
                    let f = 1.0 + ch * (2.0 * self.rng.unit() - 1.0);
                    let cl = &mut self.clients[c];
                    cl.wants = (cl.wants * f).max(0.0);
                }
                let every = self.scenario.demand.change_every as i64;
                self.push(now + Time::secs(every), Ev::DemandTick);
            }
            Ev::Sample => {
                self.sample();
                self.push(now + Time::secs(1), Ev::Sample);
            }
            Ev::Scheduled(i) => {
                let kind = self.scenario.events[i].what.clone();
                self.apply(kind);
            }
            Ev::Mishap => {
                let Some(m) = self.scenario.mishaps.clone() else {
                    return;
                };
                let kind = match self.rng.below(3) {
                    0 => EventKind::Spike {
                        clients: 1,
                        wants: f64::NAN, // +m.spike to a random client
                    },
                    1 => EventKind::MasterLost {
                        node: self.random_node(),
                    },
                    _ => {
                        let secs = 1 + self.rng.below(m.outage_max.max(1));
                        EventKind::Unreachable {
                            node: self.random_node(),
                            until: (self.elapsed() as u64) + secs,
                        }
                    }
                };
                if let EventKind::Spike { .. } = kind {
                    let c = self.rng.below(self.clients.len() as u64) as usize;
                    self.clients[c].wants += m.spike;
                    self.mark(format!(
                        "spike +{} at client {}",
                        m.spike, self.clients[c].id
                    ));
                } else {
                    self.apply(kind);
                }
                self.push(now + Time::secs(m.every as i64), Ev::Mishap);
            }
            Ev::Reelect(node) => {
                // Another task of the job wins (with one task, the lost one
                // restarts): a new server id, fresh state, learning mode.
                let n = &mut self.nodes[node];
                n.up = true;
                n.master_task = (n.master_task + 1) % n.tasks;
                let (core, task_id) = master_core(n.role, &n.name, n.master_task, &n.config, now);
                n.core = core;
                let name = format!("{} ({task_id})", n.name);
                self.mark(format!("{name}: new master elected"));
                self.schedule_upstream(node, Some(now));
            }
        }
    }

    fn random_node(&mut self) -> String {
        let i = self.rng.below(self.nodes.len() as u64) as usize;
        self.nodes[i].name.clone()
    }

    fn mark(&mut self, what: String) {
        self.marks.push(Mark {
            t: self.elapsed(),
            what,
        });
    }

    fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    fn apply(&mut self, kind: EventKind) {
        let now = self.now;
        match kind {
            EventKind::Spike { clients, wants } => {
                for c in 0..clients.min(self.clients.len()) {
                    self.clients[c].wants = wants;
                }
                self.mark(format!("{clients} client(s) spike to {wants}"));
            }
            EventKind::MasterLost { node } => {
                if let Some(i) = self.node(&node) {
                    if self.nodes[i].up {
                        self.nodes[i].up = false;
                        self.nodes[i].core.step_down(None);
                        let delay = Time::secs(self.scenario.reelection_s as i64);
                        self.push(now + delay, Ev::Reelect(i));
                        self.mark(format!("{node}: master lost"));
                    }
                }
            }
            EventKind::Unreachable { node, until } => {
                if let Some(i) = self.node(&node) {
                    let until_t = self.start + Time::secs(until as i64);
                    self.nodes[i].unreachable_until = self.nodes[i].unreachable_until.max(until_t);
                    self.mark(format!("{node}: unreachable until {until} s"));
                }
            }
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let depth = self.nodes.iter().map(|n| n.depth).max().unwrap_or(0);
        let mut levels = vec![(0.0, 0.0, 0.0); depth + 1];
        let mut per_node = Vec::with_capacity(self.nodes.len());
        for n in &mut self.nodes {
            let st = n.core.status(now, 0);
            let row = st
                .resources
                .first()
                .map_or((0.0, 0.0, 0.0), |r| (r.capacity, r.wants, r.has));
            let l = &mut levels[n.depth];
            l.0 += row.0;
            l.1 += row.1;
            l.2 += row.2;
            per_node.push(row);
        }
        let res = &self.scenario.resource;
        let mut wants = 0.0;
        let mut has = 0.0;
        let mut per = Vec::new();
        for cl in &self.clients {
            let h = match cl.core.capacity(res, now) {
                Some((c, Mode::Lease)) => c,
                _ => 0.0,
            };
            wants += cl.wants;
            has += h;
            if self.keep_per_client {
                per.push((h, cl.wants));
            }
        }
        self.samples.push(Sample {
            t: self.elapsed(),
            levels,
            nodes: per_node,
            client_wants: wants,
            client_has: has,
            per_client: per,
        });
    }
}

/// Task `task` of `node` just elected master: a fresh core in learning
/// mode, and its server id `<node>/t<task>`.
fn master_core(
    role: Role,
    node: &str,
    task: usize,
    config: &Arc<Config>,
    now: Time,
) -> (ServerCore, String) {
    let server_id = format!("{node}/t{task}");
    let options = CoreOptions {
        role,
        server_id: server_id.clone(),
        level: 0,
        min_request_interval: Time::ZERO,
    };
    let mut core = ServerCore::new(options, config.clone());
    core.become_master(now);
    (core, server_id)
}

fn amount(x: f64) -> Amount {
    Amount::new("value", if x.is_finite() { x.max(0.0) } else { 0.0 }).unwrap_or(Amount::ZERO)
}

/// A lease after a trip over the wire (expiry in whole seconds).
fn wire(l: &Lease) -> Lease {
    doorman_proto::lease_from_wire(&doorman_proto::lease_to_wire(l))
}

fn client_grant(g: &Grant) -> GrantItem {
    GrantItem {
        resource_id: g.resource_id.clone(),
        lease: wire(&g.lease),
        safe_capacity: Some(g.safe_capacity),
    }
}

fn upstream_grant(g: &Grant) -> UpstreamGrant {
    UpstreamGrant {
        resource_id: g.resource_id.clone(),
        lease: wire(&g.lease),
        algorithm: g.algorithm_known.then(|| (*g.algorithm).clone()),
        safe_capacity: Some(g.safe_capacity),
    }
}
