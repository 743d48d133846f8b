//! Fair shares, computed independently of the algorithm crate: what the
//! server counts of each request, water-filling per priority band, and the
//! refresh rounds after which every honest client must hold its share.

use std::collections::HashMap;
use std::sync::Arc;

use doorman_core::server::{Sharded, Who};
use doorman_lease::Span;
use proptest::prelude::*;

use super::world::{lease, World};
use super::{DB, HONEST, LEASE, MAX_CLIENTS, REFRESH};

/// What a requester last asked for, to compute its share: per priority
/// band (priority, subclients, wants), as the server counts it (bands of
/// one priority merged, subclients bounded by `max_clients_per_server`,
/// highest bands first, each at least one).
pub(crate) type LastAsk = Vec<(i64, f64, f64)>;

pub(crate) fn counted(demands: &[doorman_lease::Demand]) -> LastAsk {
    let mut sorted: Vec<_> = demands
        .iter()
        .map(|d| (d.priority(), d.subclients() as f64, d.wants()))
        .collect();
    sorted.sort_by_key(|d| std::cmp::Reverse(d.0));
    let total: f64 = sorted.iter().map(|d| d.1).sum();
    if total > MAX_CLIENTS {
        let mut left = MAX_CLIENTS;
        for d in &mut sorted {
            d.1 = d.1.min(left).max(1.0);
            left = (left - d.1).max(0.0);
        }
    }
    let mut merged: LastAsk = Vec::new();
    for (p, s, w) in sorted {
        match merged.last_mut() {
            Some(m) if m.0 == p => {
                m.1 += s;
                m.2 += w;
            }
            _ => merged.push((p, s, w)),
        }
    }
    merged
}

impl World {
    /// Everyone holding a grant on `db` refreshes, a refresh interval
    /// apart, for a lease length and two intervals (fakes with their
    /// bands, claiming what they hold and reporting it handed out; liars
    /// with their lies): the first pass shrinks whoever holds more than
    /// its share; a shrunk server's sub-leases stay counted until it
    /// reports them gone, which it does in the second; a shrunk client's
    /// higher lease until it shows it got the lower one, or, for a liar
    /// that goes on claiming it, until that lease ends (at most a lease
    /// after the round began); by the last every requester has asked with
    /// the capacity free. Outside learning mode every honest client then
    /// holds its water-filled share.
    pub(crate) fn round(&mut self) -> Result<(), TestCaseError> {
        let learning_at_start =
            self.now + Span::secs(REFRESH) < self.master_since + Span::secs(LEASE);
        for _pass in 0..(LEASE / REFRESH + 2) {
            // A refresh interval after whatever came before (a repeat
            // inside the minimum request interval decides nothing).
            self.now += Span::secs(REFRESH);
            let clients: Vec<_> = self
                .asked
                .iter()
                .filter(|(k, _)| self.holding(&k.0, &k.1).is_some() && k.1 == DB)
                .map(|(_, v)| v.0.clone())
                .collect();
            for mut req in clients {
                let who = Who::Client(Arc::from(req.client_id.as_str()));
                let held = self.holding(&who, DB);
                if req.resource[0].has.is_none()
                    || req.client_id.starts_with("honest")
                    || req.client_id.starts_with("new")
                {
                    req.resource[0].has = held.map(lease);
                }
                self.send_client(req)?;
            }
            let servers: Vec<_> = self
                .asked_server
                .iter()
                .filter(|(k, _)| self.holding(&k.0, &k.1).is_some())
                .map(|(_, v)| v.0.clone())
                .collect();
            for mut req in servers {
                let who = Who::Server(Arc::from(req.server_id.as_str()));
                // An honest refresh: the lease held, and as handed out
                // below it what it holds (a made-up `outstanding` is bounded
                // by the lease it could have come from, and checked by the
                // invariant; here it would only delay the share by up to a
                // lease, `outstanding_beyond_a_grant_ends_with_its_lease`).
                let held = self.holding(&who, DB);
                req.resource[0].has = held.map(lease);
                req.resource[0].outstanding = Some(held.map_or(0.0, |h| h.capacity));
                self.send_server(req)?;
            }
        }
        if learning_at_start || self.db.is_none() {
            return Ok(());
        }
        let shares = self.shares();
        for i in 0..HONEST {
            let who = Who::Client(Arc::from(format!("honest-{i}")));
            let (Some(h), Some(share)) = (self.holding(&who, DB), shares.get(&who)) else {
                continue;
            };
            prop_assert!(
                (h.capacity - share).abs() <= 1e-6 * share.max(1.0),
                "honest-{i} holds {} of its share {share}: {}; shares {shares:?}",
                h.capacity,
                self.diagnosis()
            );
        }
        Ok(())
    }

    /// For a failure's message: what the core holds for `db` and the last
    /// decisions.
    fn diagnosis(&mut self) -> String {
        let st = self.core.status(self.now, usize::MAX);
        let db = st.resources.iter().filter(|r| r.id == DB);
        let seen: Vec<_> = db
            .clone()
            .flat_map(|r| {
                r.leases
                    .iter()
                    .map(|l| (l.id.clone(), l.has, l.target, l.wants))
            })
            .collect();
        let learning = db.clone().any(|r| r.learning);
        let last = &self.log[self.log.len().saturating_sub(30)..];
        format!(
            "learning {learning}, core {seen:?}; last decisions:\n{}",
            last.join("\n")
        )
    }

    /// FAIR_SHARE over the requesters present on `db`: bands served from
    /// the highest priority down, each water-filling what the bands above
    /// left (docs/algorithms.md, "Targets").
    pub(crate) fn shares(&self) -> HashMap<Who, f64> {
        let mut pieces: Vec<(Who, i64, f64, f64)> = Vec::new();
        let clients = self.asked.iter().map(|(k, v)| (k, &v.1));
        let servers = self.asked_server.iter().map(|(k, v)| (k, &v.1));
        for ((who, r), bands) in clients.chain(servers) {
            if r == DB && self.holding(who, DB).is_some() {
                pieces.extend(bands.iter().map(|&(p, s, w)| (who.clone(), p, s, w)));
            }
        }
        let mut priorities: Vec<i64> = pieces.iter().map(|p| p.1).collect();
        priorities.sort_unstable_by(|a, b| b.cmp(a));
        priorities.dedup();
        let mut left = self.db.unwrap_or(0.0);
        let mut out: HashMap<Who, f64> = HashMap::new();
        for p in priorities {
            let band: Vec<&(Who, i64, f64, f64)> = pieces.iter().filter(|x| x.1 == p).collect();
            let level = water_level(band.iter().map(|x| (x.2, x.3)), left);
            let mut given = 0.0;
            for (who, _, s, w) in band {
                let g = w.min(level * s);
                given += g;
                *out.entry(who.clone()).or_default() += g;
            }
            left = (left - given).max(0.0);
        }
        out
    }
}

/// The level `L` at which Σ min(w, L·s) over `(s, w)` is `capacity`
/// (infinite when everyone fits).
fn water_level(demands: impl Iterator<Item = (f64, f64)> + Clone, capacity: f64) -> f64 {
    let total = |level: f64| demands.clone().map(|(s, w)| w.min(level * s)).sum::<f64>();
    if demands.clone().map(|d| d.1).sum::<f64>() <= capacity {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (0.0, capacity.max(1.0));
    while total(hi) < capacity {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if total(mid) < capacity {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}
