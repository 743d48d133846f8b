//! What happens to the simulated world besides RPCs: demand changes,
//! scheduled scenario events, random mishaps (spikes, elections, lost
//! masters, unreachable nodes) and the elections that end a lost master.
//!
//! Everything here draws from the world's own generator (`Sim::world`),
//! never from the one the network and backoffs use, so a seed gives the
//! same demand and the same mishaps whatever the cores do: a design change
//! is compared on the same hour.
//!
//! Must not: decide anything about leases (the real cores do).

use doorman_core::server::Sharded;
use doorman_lease::Span;

use super::build::backoff;
use super::{keep_horizon, master_core, Ev, Mark, MarkKind, Sim};
use crate::scenario::{EventKind, Mishaps};

/// The kinds of random mishap, in the order their weights are drawn.
#[derive(Debug, Clone, Copy)]
enum Mishap {
    Spike,
    Election,
    MasterLost,
    Unreachable,
}

fn pick(m: &Mishaps, r: u64) -> Option<Mishap> {
    let w = &m.weights;
    let kinds = [
        (w.spike, Mishap::Spike),
        (w.election, Mishap::Election),
        (w.master_lost, Mishap::MasterLost),
        (w.unreachable, Mishap::Unreachable),
    ];
    let mut acc = 0;
    kinds.into_iter().find_map(|(weight, k)| {
        acc += weight;
        (r < acc).then_some(k)
    })
}

impl Sim {
    /// Every client's wants move by up to ± the scenario's change; each
    /// client's loop wakes (the library's `set_wants` wakes it).
    pub(super) fn demand_tick(&mut self) {
        let now = self.now();
        let ch = self.scenario.demand.change;
        for c in 0..self.clients.len() {
            let f = 1.0 + ch * (2.0 * self.world.unit() - 1.0);
            self.set_wants(c, (self.clients[c].wants * f).max(0.0));
        }
        let every = self.scenario.demand.change_every as i64;
        self.push(now + Span::secs(every), Ev::DemandTick);
    }

    /// A random mishap, then the next one.
    pub(super) fn mishap(&mut self) {
        let now = self.now();
        let Some(m) = self.scenario.mishaps.clone() else {
            return;
        };
        let r = self.world.below(m.weights.total());
        match pick(&m, r) {
            Some(Mishap::Spike) => {
                let c = self.world.below(self.clients.len() as u64) as usize;
                self.set_wants(c, self.clients[c].wants + m.spike);
                let what = format!("spike +{} at client {}", m.spike, self.clients[c].id);
                self.mark(what, 0, MarkKind::Spike, (None, Some(c)));
            }
            Some(Mishap::Election) => {
                let node = self.random_node();
                let task = self.world.below(self.nodes[node].tasks as u64) as usize;
                let (name, depth) = (&self.nodes[node].name, self.nodes[node].depth);
                let what = format!("{name}: master election (task {task} wins)");
                self.mark(what, 0, MarkKind::Election(depth), (Some(node), None));
                self.elect(node, task);
            }
            Some(Mishap::MasterLost) => {
                let node = self.random_node();
                let [lo, hi] = m.master_lost_s.unwrap_or([self.scenario.reelection_s; 2]);
                let secs = lo + self.world.below(hi.saturating_sub(lo) + 1);
                self.lose_master(node, secs);
            }
            Some(Mishap::Unreachable) => {
                let node = self.random_node();
                let secs = 1 + self.world.below(m.outage_max.max(1));
                let name = self.nodes[node].name.clone();
                self.unreachable(node, name, secs);
            }
            None => {}
        }
        self.push(now + Span::secs(m.every as i64), Ev::Mishap);
    }

    /// The node's master crashes: its task refuses connections, the
    /// standbys still name it (its election lease has not run out), and
    /// after `secs` a random task of the job wins the election.
    fn lose_master(&mut self, node: usize, secs: u64) {
        let now = self.now();
        let name = self.nodes[node].name.clone();
        let kind = MarkKind::MasterLost(self.nodes[node].depth);
        let Some(task) = self.nodes[node].master else {
            let what = format!("{name}: master lost again (has none)");
            self.mark(what, 0, kind, (Some(node), None));
            return;
        };
        let what = format!("{name}: master lost for {secs} s");
        let i = self.mark(what, secs, kind, (Some(node), None));
        let n = &mut self.nodes[node];
        n.dead = Some(task);
        n.master = None;
        n.core.step_down(None);
        n.link.reset();
        n.lost_mark = Some(i);
        self.push(now + Span::secs(secs as i64), Ev::Elect(node));
    }

    /// The election a lost master scheduled: a random task wins.
    pub(super) fn elect_random(&mut self, node: usize) {
        let task = self.world.below(self.nodes[node].tasks as u64) as usize;
        self.elect(node, task);
    }

    /// Task `task` wins its job's election. If it already is master nothing
    /// changes; otherwise the old master (if any) steps down, and the new
    /// one starts with fresh state in learning mode, a new connection to
    /// its parent and a new backoff. A crashed task has restarted by then.
    fn elect(&mut self, node: usize, task: usize) {
        let now = self.now();
        let elapsed = self.elapsed();
        if let Some(i) = self.nodes[node].lost_mark.take() {
            self.marks[i].end = elapsed;
        }
        if self.nodes[node].master == Some(task) {
            return;
        }
        let b = backoff(&mut self.rng);
        let n = &mut self.nodes[node];
        let (core, _) = master_core(
            n.role,
            (&n.name, task),
            &n.config,
            n.shards,
            now,
            &mut n.horizon,
        );
        n.core = core;
        n.master = Some(task);
        n.view = Some(task);
        n.dead = None;
        n.link.reset();
        n.stream = Default::default();
        n.pusher.seen = None;
        n.backoff = b;
        n.poke = false;
        n.replay.new_master(self.replay.as_mut());
        self.schedule_upstream(node, Some(now));
    }

    /// Every master forgets expired leases and empty resources, as the
    /// server's cleanup task does every second (`ServerOptions::
    /// cleanup_interval`): a node nobody asks (one cut off) then sees its
    /// requesters' leases end, and reports what is left when it is back
    /// (found against the real tree, docs/simulation.md, "The simulator
    /// against the real tree").
    pub(super) fn cleanup(&mut self) {
        let now = self.now();
        for n in self.nodes.iter_mut().filter(|n| n.master.is_some()) {
            n.core.cleanup(now);
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].master.is_some() {
                self.moved(i);
            }
        }
        self.push(now + Span::secs(1), Ev::Cleanup);
    }

    /// Every master moves its node's horizon record on when due (the
    /// server's periodic check; the write itself takes no time here).
    pub(super) fn keep_horizons(&mut self) {
        for node in 0..self.nodes.len() {
            self.upstream_answered(node);
        }
    }

    /// The parent answered `node`: its master moves its record on at once,
    /// when due (`doorman-etcd` wakes its horizon keeper on every answer,
    /// to follow the new lease before a child asks; its periodic check,
    /// `keep_horizons`, is the same step for every node).
    pub(super) fn upstream_answered(&mut self, node: usize) {
        let now = self.now();
        let n = &mut self.nodes[node];
        if n.master.is_some() {
            keep_horizon(&mut n.core, now, &mut n.horizon);
        }
    }

    fn unreachable(&mut self, node: usize, name: String, secs: u64) {
        let until = self.now() + Span::secs(secs as i64);
        let n = &mut self.nodes[node];
        n.unreachable_until = n.unreachable_until.max(until);
        let kind = MarkKind::CutOff(n.depth);
        let what = format!("{name}: unreachable for {secs} s");
        self.mark(what, secs, kind, (Some(node), None));
    }

    fn random_node(&mut self) -> usize {
        self.world.below(self.nodes.len() as u64) as usize
    }

    /// Records a mark lasting `secs`, about a node and a client, if any;
    /// returns its index.
    fn mark(
        &mut self,
        what: String,
        secs: u64,
        kind: MarkKind,
        (node, client): (Option<usize>, Option<usize>),
    ) -> usize {
        let t = self.elapsed();
        self.marks.push(Mark {
            t,
            end: t + secs as f64,
            what,
            kind,
            node,
            client,
        });
        self.marks.len() - 1
    }

    fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub(super) fn apply(&mut self, kind: EventKind) {
        match kind {
            EventKind::Spike { clients, wants } => {
                for c in 0..clients.min(self.clients.len()) {
                    self.set_wants(c, wants);
                }
                let what = format!("{clients} client(s) spike to {wants}");
                let one = (clients == 1 && !self.clients.is_empty()).then_some(0);
                self.mark(what, 0, MarkKind::Spike, (None, one));
            }
            EventKind::MasterLost { node } => {
                if let Some(i) = self.node(&node) {
                    self.lose_master(i, self.scenario.reelection_s);
                }
            }
            EventKind::Unreachable { node, until } => {
                if let Some(i) = self.node(&node) {
                    let secs = until.saturating_sub(self.elapsed() as u64);
                    self.unreachable(i, node, secs);
                }
            }
        }
    }
}
