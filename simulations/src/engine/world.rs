//! What happens to the simulated world besides RPCs: demand changes,
//! scheduled scenario events, random mishaps (spikes, lost masters,
//! unreachable nodes), re-elections, and the per-second sample.
//!
//! Must not: decide anything about leases (the real cores do).

use doorman_algorithms::Time;
use doorman_core::client::Mode;

use super::{master_core, Ev, Mark, Sample, Sim};
use crate::scenario::EventKind;

impl Sim {
    /// Every client's wants move by up to ± the scenario's change.
    pub(super) fn demand_tick(&mut self) {
        let now = self.now;
        let ch = self.scenario.demand.change;
        for c in 0..self.clients.len() {
            let f = 1.0 + ch * (2.0 * self.rng.unit() - 1.0);
            let cl = &mut self.clients[c];
            cl.wants = (cl.wants * f).max(0.0);
        }
        let every = self.scenario.demand.change_every as i64;
        self.push(now + Time::secs(every), Ev::DemandTick);
    }

    /// A random mishap, then the next one.
    pub(super) fn mishap(&mut self) {
        let now = self.now;
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

    /// Another task of the node's job wins the election.
    pub(super) fn reelect(&mut self, node: usize) {
        let now = self.now;
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

    pub(super) fn apply(&mut self, kind: EventKind) {
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

    pub(super) fn sample(&mut self) {
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
