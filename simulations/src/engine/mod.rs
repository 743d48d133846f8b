//! The discrete-event engine: a virtual clock, an event queue ordered by
//! time (`queue.rs`), and the real cores: one `ServerCore` per node (its
//! master), one `ClientCore` per client. RPCs are events delivered after a
//! random delay; expiries cross the "wire" in whole seconds, as in
//! production. Everything random comes from the seed (two generators: the
//! world's and the network's, `build.rs`), so the same seed gives the same
//! run.
//!
//! This file owns the world's types and the dispatch; building
//! the world is in `build.rs`; what a caller does with its cores (when to
//! ask, what to do with the answer) in `rpc.rs`; the connection to a node
//! (Discovery, redirects, deadlines, one call at a time) in `link.rs`; a
//! server task answering an RPC in `serve.rs`; scenario events, mishaps and
//! elections in `world.rs`; the per-second sample in `sample.rs`.
//!
//! Must not: read the real clock or use anything random but [`Rng`].

use std::sync::Arc;

use doorman_core::client::{ClientCore, GrantItem};
use doorman_core::config::Config;
use doorman_core::convert::UpstreamAnswer;
use doorman_core::server::{
    take_office, CoreOptions, Grant, HorizonRecord, Role, ServerCore, Sharded, UpstreamGrant,
};
use doorman_core::Backoff;
use doorman_lease::{Amount, Span, Time};

use crate::scenario::Scenario;

mod build;
mod link;
mod queue;
mod replay;
mod rng;
mod rpc;
mod sample;
mod serve;
mod stream;
pub mod tcp;
mod world;

pub use link::{Link, Reply, RpcMsg};
pub use replay::{AskTimes, Counts as ReplayCount, ReplayCounts};
pub use rng::Rng;
pub use rpc::RpcCounts;

/// Who makes an RPC: a client, or an intermediate node's master asking its
/// parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A client (index into the clients).
    Client(usize),
    /// A node's master (index into `Sim::nodes`).
    Node(usize),
}

#[derive(Debug)]
enum Ev {
    ClientWake(usize, u64),
    UpstreamWake(usize, u64),
    /// An RPC reaches task `task` of node `node`.
    Arrive {
        caller: Caller,
        epoch: u64,
        node: usize,
        task: usize,
        /// When it was first sent, and on a new connection.
        sent: (Time, bool),
        msg: RpcMsg,
    },
    /// An RPC's outcome reaches its caller.
    Reply {
        caller: Caller,
        epoch: u64,
        task: usize,
        reply: Reply,
    },
    DemandTick,
    /// Every master's periodic cleanup (`Sim::cleanup`).
    Cleanup,
    Sample,
    Scheduled(usize),
    Mishap,
    /// An election in a node's job, scheduled by a lost master.
    Elect(usize),
    /// A node's pusher looks at what moved (`true`: a push held back by
    /// the rule is due).
    PushPass(usize, bool),
    /// A pushed grant reaches its holder, from (task, the holder's link
    /// epoch).
    Pushed(Caller, (usize, u64, u64), Grant),
    /// The window after a caller's listed ask is over (`replay.rs`).
    ReplayAsk(Caller, usize),
}

/// One node of the tree: a job of `tasks` replicas, at most one of which is
/// master. Only the master's core exists: standby replicas hold no lease
/// state (a new master starts from nothing) and answer Discovery and every
/// capacity RPC with the master they believe in (a redirect), as
/// `doorman server` does. Each task has its own address (`<node>/t<task>`);
/// towards its parent all of them use the node's id, as `doorman server
/// --node-id` (default: the election key) does.
pub struct Node {
    /// The node's name in the scenario (`root`, `n1`, `n1.2`, …).
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
    /// Shards of each master's core.
    shards: usize,
    /// The task that is master, if any.
    master: Option<usize>,
    /// The master the standbys name (the election key's value): the dead
    /// master's until its election lease runs out.
    view: Option<usize>,
    /// A crashed task: it refuses connections until the next election.
    dead: Option<usize>,
    /// The mark of the master loss not yet ended by an election.
    lost_mark: Option<usize>,
    unreachable_until: Time,
    wake_gen: u64,
    /// A wake-up asked for while the upstream call was busy.
    poke: bool,
    replay: replay::Pinned,
    /// The master's connection to the parent.
    link: Link,
    /// Its lease stream to the parent.
    stream: stream::Stream,
    /// The master's pusher to its own holders.
    pusher: stream::Pusher,
    backoff: Backoff,
    /// The node's horizon record: no lease any of its masters handed out
    /// expires after its time (none before the first master writes one),
    /// and the server id of the master that wrote it.
    horizon: Option<(Time, String)>,
    /// Capacity RPCs its masters answered (GetCapacity from clients,
    /// GetServerCapacity from children).
    pub served: u64,
}

impl Node {
    /// Live leases in the master's core (its state grows with these).
    pub fn lease_count(&mut self) -> usize {
        self.core.lease_count()
    }

    /// Resources with state in the master's core.
    pub fn resource_count(&mut self) -> usize {
        self.core.resource_count()
    }
}

struct SimClient {
    core: ClientCore,
    id: Arc<str>,
    leaf: usize,
    wants: f64,
    /// Its first wake-up, ms after the start (a draw of the generator).
    start_ms: u32,
    wake_gen: u64,
    link: Link,
    stream: stream::Stream,
    backoff: Backoff,
    replay: replay::Pinned,
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

/// A marker on the plot: a mishap or scheduled event.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Mark {
    /// Seconds since the start.
    pub t: f64,
    /// When the disturbance ended (a new master elected, the node reachable
    /// again); `t` for an instant event such as a spike.
    pub end: f64,
    /// What happened.
    pub what: String,
    /// Its kind, for the figures by kind (`mishaps.rs`).
    pub kind: MarkKind,
    /// The node it is about (index into `Sim::nodes`), if any.
    pub node: Option<usize>,
    /// The client it is about (index into the clients), if exactly one.
    pub client: Option<usize>,
}

/// One setting of a client's wants (`plan.json`'s demand): its initial
/// wants, a demand change, a spike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WantsChange {
    /// Seconds since the start.
    pub t: f64,
    /// The client (index into the clients).
    pub client: usize,
    /// Its wants from then on.
    pub wants: f64,
}

/// A node's master got an answer from its parent: `upstream.csv`, to trace
/// when each node renewed beside the real tree's (whose servers log it:
/// "the parent answered", `doorman_server::upstream` at debug).
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// Seconds since the start.
    pub t: f64,
    /// The node (index into the nodes).
    pub node: usize,
    /// The resource, what it granted, and how long the lease lasts from
    /// `t`, seconds.
    pub grant: (String, f64, f64),
}

/// Runs with more clients than this record no [`Sim::wants_log`]: a
/// million clients whose wants change every 10 s would log 60 million
/// changes (1.4 GiB) and write gigabytes of `plan.json`, for a schedule
/// no real tree is run with.
pub const WANTS_LOG_CLIENTS: usize = 10_000;

/// The kind of a mark. Nodes are named by depth as in scenario 7's tree:
/// 0 the root, 1 a region, 2 and deeper a datacenter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum MarkKind {
    /// Clients' wants jump (a spike mishap or a scheduled spike).
    Spike,
    /// A node at this depth cut off from its parent and its requesters.
    CutOff(usize),
    /// A node at this depth loses its master until a new one is elected.
    MasterLost(usize),
    /// A node at this depth holds an election (its master may change).
    Election(usize),
}

impl std::fmt::Display for MarkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = |d: usize| ["root", "region", "datacenter"][d.min(2)];
        match *self {
            MarkKind::Spike => write!(f, "spike"),
            MarkKind::CutOff(d) => write!(f, "{} cut off", level(d)),
            MarkKind::MasterLost(d) => write!(f, "{} master lost", level(d)),
            MarkKind::Election(d) => write!(f, "{} election", level(d)),
        }
    }
}

/// The whole simulated world.
pub struct Sim {
    /// The scenario run.
    pub scenario: Scenario,
    /// The root's capacity.
    pub capacity: f64,
    start: Time,
    queue: queue::Queue<Ev>,
    /// Network delays, backoff jitter, client start times: draws whose
    /// number depends on what the cores do.
    rng: Rng,
    /// Demand changes, mishaps and election winners: drawn in an order
    /// that does not depend on what the cores do (see `world.rs`).
    world: Rng,
    /// Every node, parents before children.
    pub nodes: Vec<Node>,
    clients: Vec<SimClient>,
    /// One sample per simulated second.
    pub samples: Vec<Sample>,
    /// The scenario's events, as they happened.
    pub marks: Vec<Mark>,
    /// Every setting of a client's wants, in time order, from each
    /// client's initial wants at 0 on; `None` for a run of more than
    /// [`WANTS_LOG_CLIENTS`] clients.
    pub wants_log: Option<Vec<WantsChange>>,
    /// Every answer a node's master got from its parent (`None` with no
    /// `wants_log`).
    pub answers: Option<Vec<Answered>>,
    keep_per_client: bool,
    /// Events processed.
    pub events_run: u64,
    /// What the RPCs did.
    pub rpcs: RpcCounts,
    /// What a replay of a real run's asks did (`None`: no replay).
    replay: Option<ReplayCounts>,
}

/// The longest deadline of an RPC: the client library's default
/// `rpc_timeout` and the server's default `parent_timeout`
/// (`doorman_core::schedule::DEFAULT_RPC_TIMEOUT`); a call renewing leases
/// gets half their refresh interval when that is shorter
/// (`doorman_core::schedule::deadline_for`), as in production.
pub const RPC_TIMEOUT: Span = doorman_core::schedule::DEFAULT_RPC_TIMEOUT;

/// The server's default minimum interval between two decisions for one
/// requester (`doorman server --min-request-interval`, default 1 s).
pub const MIN_REQUEST_INTERVAL: Span = Span::secs(1);

impl Sim {
    /// Queues `ev` for `at` (now, if `at` has passed).
    fn push(&mut self, at: Time, ev: Ev) {
        self.queue.push(at, ev);
    }

    fn delay(&mut self) -> Span {
        let [lo, hi] = self.scenario.rpc_delay_ms;
        Span::from_millis((lo + self.rng.below(hi - lo + 1)) as i64)
    }

    /// The simulated time: the time of the event being handled (the
    /// queue's clock, which only the queue moves).
    fn now(&self) -> Time {
        self.queue.now()
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        (self.now() - self.start).as_secs_f64()
    }

    /// Each client's id, leaf (index into `nodes`) and wants now, in the
    /// clients' order.
    pub fn clients(&self) -> impl Iterator<Item = (&str, usize, f64)> + '_ {
        self.clients.iter().map(|c| (&*c.id, c.leaf, c.wants))
    }

    /// When each client first woke, ms after the start (what a real run
    /// replays, `plan.json`'s `start_ms`).
    pub fn client_starts(&self) -> impl Iterator<Item = u32> + '_ {
        self.clients.iter().map(|c| c.start_ms)
    }

    /// Sets client `c`'s wants, logs the change and wakes its loop (the
    /// library's `set_wants` wakes it).
    fn set_wants(&mut self, c: usize, wants: f64) {
        let t = self.elapsed();
        self.clients[c].wants = wants;
        if let Some(log) = self.wants_log.as_mut() {
            log.push(WantsChange {
                t,
                client: c,
                wants,
            });
        }
        self.poke_client(c);
    }

    /// Runs to the end of the scenario.
    pub fn run(&mut self) {
        let end = self.start + Span::secs(self.scenario.duration as i64);
        while let Some((at, ev)) = self.queue.pop() {
            if at > end {
                break;
            }
            self.events_run += 1;
            self.handle(ev);
        }
    }

    /// Runs one event.
    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::ClientWake(c, gen) => self.client_wake(c, gen),
            Ev::UpstreamWake(node, gen) => self.upstream_wake(node, gen),
            Ev::Arrive {
                caller,
                epoch,
                node,
                task,
                sent,
                msg,
            } => self.arrive((caller, epoch), (node, task), sent, msg),
            Ev::Reply {
                caller,
                epoch,
                task,
                reply,
            } => self.reply(caller, epoch, task, reply),
            Ev::DemandTick => self.demand_tick(),
            Ev::Cleanup => self.cleanup(),
            Ev::Sample => {
                self.keep_horizons();
                self.sample();
                self.push(self.now() + Span::secs(1), Ev::Sample);
            }
            Ev::Scheduled(i) => {
                let kind = self.scenario.events[i].what.clone();
                self.apply(kind);
            }
            Ev::Mishap => self.mishap(),
            Ev::Elect(node) => self.elect_random(node),
            Ev::PushPass(node, held) => self.push_pass(node, held),
            Ev::Pushed(caller, from, g) => self.pushed(caller, from, g),
            Ev::ReplayAsk(caller, i) => self.replay_ask(caller, i),
        }
    }

    /// True while the node is cut off the network (both ways).
    fn partitioned(&self, node: usize) -> bool {
        self.now() < self.nodes[node].unreachable_until
    }
}

/// Task `task` of `node` just elected master: a fresh core, and its
/// server id `<node>/t<task>`. It takes office as `doorman server` does
/// (`doorman_core::server::take_office`, called by `election/etcd.rs`):
/// learning until the leases its predecessors recorded in `horizon` (the
/// node's horizon record; none before the node's first master: learning
/// lasts its full duration) have ended, and before it serves it records
/// its own horizon, never earlier than the one there. Every task sees
/// every leader take office here, so the last leader seen is the record's
/// writer.
fn master_core(
    role: Role,
    (node, task): (&str, usize),
    config: &Arc<Config>,
    shards: usize,
    now: Time,
    horizon: &mut Option<(Time, String)>,
) -> (ServerCore, String) {
    let server_id = format!("{node}/t{task}");
    let options = CoreOptions {
        role,
        server_id: server_id.clone(),
        min_request_interval: MIN_REQUEST_INTERVAL,
        shadow_all: false,
    };
    let mut core = ServerCore::with_shards(options, config.clone(), shards);
    let record = horizon
        .as_ref()
        .map(|(until, writer)| HorizonRecord::Within {
            left: (*until > now).then(|| *until - now),
            writer: writer.as_bytes().to_vec(),
        });
    let last_leader = horizon.as_ref().map(|(_, writer)| writer.as_bytes());
    let office = take_office(record.as_ref(), last_leader, core.fresh_horizon(now), now);
    *horizon = Some((office.bound, server_id.clone()));
    core.become_master_after(now, office.predecessors, Some(office.bound));
    (core, server_id)
}

/// Moves a master's horizon record on when it is due (see
/// `doorman_core::server::Sharded::horizon_due`).
fn keep_horizon(core: &mut ServerCore, now: Time, horizon: &mut Option<(Time, String)>) {
    if let Some(h) = core.horizon_due(now) {
        if let Some((until, _)) = horizon.as_mut() {
            *until = h;
        }
        core.set_lease_bound(Some(h));
    }
}

fn amount(x: f64) -> Amount {
    Amount::new("value", if x.is_finite() { x.max(0.0) } else { 0.0 }).unwrap_or(Amount::ZERO)
}

/// A grant as our client library keeps it after the wire, for the call
/// that began at `sent_at` (`doorman_core::convert::answer_received`).
fn client_grant(g: &Grant, sent_at: Time) -> GrantItem {
    doorman_core::convert::answer_received(g, sent_at)
}

/// A grant as an intermediate of ours keeps it after the wire, for the
/// call that began at `sent_at` and was answered at `received_at`: the
/// server's own rule (`doorman_core::convert::UpstreamAnswer`).
fn upstream_grant(g: &Grant, at: (Time, Time)) -> UpstreamGrant {
    UpstreamAnswer::sent(g).received(at)
}
