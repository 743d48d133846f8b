//! The per-second sample: each node's master's view (capacity, Σ wants of
//! its requesters, Σ has handed out), summed per tree level, and the
//! clients' Σ wants and Σ has under valid leases.
//!
//! Must not: change the world.

use doorman_core::client::Mode;
use doorman_core::server::Sharded;

use super::{Sample, Sim};

impl Sim {
    pub(super) fn sample(&mut self) {
        let now = self.now();
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
