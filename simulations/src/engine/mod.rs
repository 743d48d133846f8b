//! The discrete-event engine: a virtual clock, an event queue ordered by
//! (time, sequence), and the real cores: one `ServerCore` per node (its
//! master), one `ClientCore` per client. RPCs are events delivered after a
//! random delay; expiries cross the "wire" in whole seconds, as in
//! production. Everything random comes from one seeded generator, so the
//! same seed gives the same run.
//!
//! This file owns the world's types, the queue and the dispatch; building
//! the world is in `build.rs`, the RPCs between clients and servers in
//! `rpc.rs`, scenario events, mishaps and sampling in `world.rs`.
//!
//! Must not: read the real clock or use anything random but [`Rng`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use doorman_algorithms::{Amount, Lease, Time};
use doorman_core::client::{ClientCore, GrantItem};
use doorman_core::config::Config;
use doorman_core::server::{CapacityRequest, CoreOptions, Grant, Role, ServerCore, UpstreamGrant};
use doorman_core::Backoff;

use crate::scenario::Scenario;

mod build;
mod rpc;
mod world;

/// Deterministic xorshift64* generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
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
    /// Uniform in [0, n) (0 when n is 0).
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
    /// The node's name in the scenario (`root`, `leaf-3`, …).
    pub name: String,
    /// Depth in the tree (0 = root).
    pub depth: usize,
    /// Index of the parent node in `Sim::nodes` (none for the root).
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
    /// Seconds since the start.
    pub t: f64,
    /// Per depth (0 = root): capacity, Σ wants of requesters, Σ has handed out.
    pub levels: Vec<(f64, f64, f64)>,
    /// Per node (in `Sim::nodes` order): capacity, Σ wants, Σ has.
    pub nodes: Vec<(f64, f64, f64)>,
    /// Σ wants of all clients.
    pub client_wants: f64,
    /// Σ capacity the clients hold under valid leases (a client in
    /// fallback counts 0).
    pub client_has: f64,
    /// Clients' has and wants (for fairness), only when asked.
    #[serde(skip)]
    pub per_client: Vec<(f64, f64)>,
}

/// A marker on the plot.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Mark {
    /// Seconds since the start.
    pub t: f64,
    /// What happened.
    pub what: String,
}

/// The whole simulated world.
pub struct Sim {
    /// The scenario run.
    pub scenario: Scenario,
    /// The root's capacity.
    pub capacity: f64,
    now: Time,
    start: Time,
    seq: u64,
    queue: BinaryHeap<Reverse<Entry>>,
    rng: Rng,
    /// Every node, parents before children.
    pub nodes: Vec<Node>,
    clients: Vec<SimClient>,
    /// One sample per simulated second.
    pub samples: Vec<Sample>,
    /// The scenario's events, as they happened.
    pub marks: Vec<Mark>,
    keep_per_client: bool,
    /// Events processed.
    pub events_run: u64,
}

const RPC_TIMEOUT: Time = Time::from_millis(5000);

impl Sim {
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

    /// Runs one event.
    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::ClientWake(c, gen) => self.client_wake(c, gen),
            Ev::Request(node, from, req) => self.request(node, from, req),
            Ev::ClientResponse(c, ids, grants) => self.client_response(c, ids, grants),
            Ev::UpstreamWake(node, gen) => self.upstream_wake(node, gen),
            Ev::UpstreamResponse(node, ids, grants) => self.upstream_response(node, ids, grants),
            Ev::DemandTick => self.demand_tick(),
            Ev::Sample => {
                self.sample();
                self.push(self.now + Time::secs(1), Ev::Sample);
            }
            Ev::Scheduled(i) => {
                let kind = self.scenario.events[i].what.clone();
                self.apply(kind);
            }
            Ev::Mishap => self.mishap(),
            Ev::Reelect(node) => self.reelect(node),
        }
    }

    fn reachable(&self, node: usize) -> bool {
        let n = &self.nodes[node];
        n.up && self.now >= n.unreachable_until
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
    l.as_received()
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
