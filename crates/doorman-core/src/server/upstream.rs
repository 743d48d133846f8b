//! The intermediate-server side of the core: a resource's capacity comes
//! from the parent's lease instead of the config. This module owns the
//! per-resource upstream state and the sans-IO upstream protocol: which
//! resources to ask for (one bulk GetServerCapacity, one band aggregate per
//! priority), and what to do with the answer or a failure.
//!
//! Rules:
//! * capacity = the parent's unexpired grant (0 without one), lowered by a
//!   matching local template if any (a local config can only narrow);
//! * leases handed out never outlive the upstream lease;
//! * refresh interval handed out = upstream lease refresh × decay_factor,
//!   floor 1 s;
//! * algorithm and safe capacity come from the parent's response; until the
//!   first answer a resource is "pending": FAIR_SHARE over capacity 0, in
//!   learning mode for at most [`PENDING_LEARNING`].
//!
//! Must not: do I/O or read the clock.

use std::sync::Arc;

use doorman_algorithms::Kind;
use doorman_lease::{Amount, Lease, Span, Time, DEFAULT_DECAY_FACTOR};

use super::grants::Grants;
use super::request::{UpstreamAsk, UpstreamGrant};
use super::{Node, ResourceShard};
use crate::config::{AlgorithmConfig, Template};
use crate::limits::{
    DEFAULT_MAX_CLIENTS_PER_SERVER, DEFAULT_OPEN_SERVER_SHARE, MAX_AMOUNT, MAX_BANDS,
};
use crate::schedule::{RefreshSchedule, EARLY_REFRESH_CHANGE, UNLEASED_UPSTREAM_RETRY};

/// Learning mode of a resource whose algorithm is not known yet (the
/// design doc's default lease length).
pub const PENDING_LEARNING: Span = Span::secs(60);

/// Never ask the parent about one resource more often than this.
pub const MIN_UPSTREAM_INTERVAL: Span = Span::secs(1);

/// How many of its requesters' refresh intervals a new master waits before
/// its first upstream request (see `UpstreamState::hold_for_claim`).
pub const HOLD_INTERVALS: i64 = 3;

/// Ask again after this when the parent's answer left a resource out (a
/// parent that has just taken office leaves a claim out until its own
/// parent has answered, usually within a second; the claim's lease may run
/// out meanwhile, so waiting longer cost the subtree its capacity: 5 s
/// left the clients of a leaf at 0 for 4 s after its parent failed over,
/// measured with the fault harness).
pub const UPSTREAM_RETRY: Span = Span::secs(1);

/// What a non-root resource knows about its parent.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamState {
    pub lease: Option<Lease>,
    pub parent_algorithm: Option<Arc<AlgorithmConfig>>,
    pub parent_safe: Option<f64>,
    /// The parent's last answer put the resource in shadow mode.
    pub parent_shadow: bool,
    /// This server runs every resource in shadow mode (its config's
    /// [`Config::shadows_all`](crate::config::Config::shadows_all)).
    pub shadow_all: bool,
    pub local: Option<Arc<Template>>,
    /// When to ask the parent again. A new master that is told about
    /// existing leases holds its first request (see `hold_for_claim`) so
    /// it never reports less demand than it inherited.
    pub schedule: RefreshSchedule,
    /// Σ wants sent in the last request.
    pub reported_wants: f64,
    /// Σ handed out (taken) sent in the last request.
    pub reported_outstanding: f64,
    /// A new master's hold: until all its claimants can have re-reported,
    /// and no later than the first claimed lease needs renewing.
    hold: FirstHold,
    /// The parent's word on what this node's predecessors can still have
    /// handed out (`UpstreamGrant::predecessor_out`), and Σ of the leases
    /// requesters claimed when they first came to this master while it
    /// learned: see [`UpstreamState::learning_bound`].
    predecessor_out: Option<f64>,
    /// Until when the parent's word holds (`UpstreamGrant::predecessor_until`).
    predecessor_until: Time,
    learning_claims: f64,
    /// This node's own grants from the parent still unexpired: what its
    /// sub-leases may be backed by (`Resource::keep_no_longer`).
    pub grants: Grants,
}

/// The two ends a new master's first upstream request is held between.
#[derive(Debug, Clone, Copy, Default)]
struct FirstHold {
    /// Every claimant can have re-reported by then.
    cover: Time,
    /// The earliest time a claimed lease needs renewing by.
    renew_by: Option<Time>,
}

impl UpstreamState {
    pub fn new(local: Option<Arc<Template>>, shadow_all: bool, now: Time) -> Self {
        UpstreamState {
            lease: None,
            parent_algorithm: None,
            parent_safe: None,
            parent_shadow: false,
            shadow_all,
            local,
            schedule: RefreshSchedule::new(now),
            reported_wants: 0.0,
            reported_outstanding: 0.0,
            hold: FirstHold::default(),
            predecessor_out: None,
            predecessor_until: Time::ZERO,
            learning_claims: 0.0,
            grants: Grants::default(),
        }
    }

    /// A requester came to this master for the first time while it
    /// learned, claiming `claimed` from a predecessor.
    pub fn note_first_claim(&mut self, claimed: Option<Amount>) {
        self.learning_claims += claimed.map_or(0.0, Amount::get);
    }

    /// What of the predecessors' sub-leases may still be out below this
    /// master beyond what it has handed out itself: the parent's word
    /// (`P`) less the claims its requesters brought here, until that word
    /// runs out. A report upward counts it, so the parent does not hand it
    /// to others while it is still out (found with the simulator: after a
    /// leaf's master was lost, its parent pushed the capacity to the
    /// leaf's siblings and the clients held 100.42 % of it).
    pub fn predecessors_unclaimed(&self, now: Time) -> f64 {
        match self.predecessor_out {
            Some(p) if now < self.predecessor_until => (p - self.learning_claims).max(0.0),
            _ => 0.0,
        }
    }

    /// While learning, with the parent's word on what the predecessors can
    /// still have out (`P`): Σ of this master's grants may reach the
    /// capacity less what of `P` has not been claimed yet. The requesters
    /// that claimed hold this master's leases instead of their old ones;
    /// the others hold at most `P` less those claims. Capacity the parent
    /// granted beyond `P` (a share that grew while this node failed over)
    /// is then handed out at once instead of after learning mode. `None`
    /// without that word (an original Doorman parent, a parent that is
    /// learning itself): claims are only echoed. A lie in a claim raises
    /// the bound by exactly what the lie is echoed, as before. Once the
    /// word has run out (`predecessor_until`: the grants the predecessors'
    /// sub-leases came from have ended) nothing of theirs is out, and the
    /// whole capacity may be handed out: clients whose leases ended with a
    /// hung predecessor's get their share at once, not when learning ends
    /// (measured with the fault harness: up to 10 s at 0 after a paused
    /// intermediate master).
    pub fn learning_bound(&self, now: Time) -> Option<f64> {
        let c = self.capacity(now);
        let out = |p: f64| if now < self.predecessor_until { p } else { 0.0 };
        self.predecessor_out
            .map(|p| c.min(c - out(p) + self.learning_claims).max(0.0))
    }

    /// When the next request to the parent is due and allowed.
    pub fn due(&self) -> Time {
        self.schedule.next_wakeup(MIN_UPSTREAM_INTERVAL)
    }

    /// A requester claims a lease it got from a previous master, comes
    /// back every `refresh` seconds, and its lease ends at `expiry`: hold
    /// the first upstream request until all such requesters can have
    /// re-reported, never past `limit` (the end of learning mode).
    /// Requesters that failed during the failover are in their retry
    /// backoff, so one refresh interval is not enough: wait three, plus a
    /// second. The parent keeps this node's previous lease (same node id)
    /// meanwhile. Until this node has a lease of its own it cannot renew a
    /// claim, so the hold also ends a refresh interval and a second before
    /// the first claimed lease does: the answer is then back before that
    /// requester's last chance to renew (found with the simulator: a node
    /// cut off and then failed over let claimed leases run out while it
    /// held, and their holders got nothing for the rest of learning mode).
    pub fn hold_for_claim(
        &mut self,
        master_since: Time,
        (refresh, expiry): (i64, Time),
        limit: Time,
    ) {
        if self.lease.is_some() || self.schedule.last_request().is_some() {
            return; // already asked the parent
        }
        let refresh = refresh.clamp(1, 3600);
        let h = &mut self.hold;
        h.cover = h
            .cover
            .max(master_since + Span::secs(HOLD_INTERVALS * refresh + 1));
        let by = expiry - Span::secs(refresh + 1);
        h.renew_by = Some(h.renew_by.map_or(by, |r| r.min(by)));
        let until = h.renew_by.map_or(h.cover, |r| h.cover.min(r));
        self.schedule.hold_first_request(until.min(limit));
    }

    /// The requesters' Σ wants is now `wants`: true if it moved by more
    /// than [`EARLY_REFRESH_CHANGE`] since the last request in a direction
    /// the lease held does not already cover (more wanted than held, or
    /// less wanted than held), so the parent should hear of it now. A
    /// recovering subtree then gets its capacity back within a second or two
    /// instead of one parent refresh interval, and a shrinking one frees
    /// capacity for others sooner.
    /// While learning, the demand reported is at least the lease held
    /// (see `keep_while_learning`), and so is the one compared here.
    pub fn demand_moved(&self, now: Time, wants: f64, learning: bool) -> bool {
        let held = self.valid_lease(now).map_or(0.0, |l| l.capacity);
        let wants = wants.min(MAX_AMOUNT);
        let wants = if learning { wants.max(held) } else { wants };
        let r = self.reported_wants;
        (wants > held && wants > r * (1.0 + EARLY_REFRESH_CHANGE))
            || (wants < held && wants < r * (1.0 - EARLY_REFRESH_CHANGE))
    }

    /// The last request reported more handed out than the lease now held
    /// (the parent shrank it, and the parent counts the excess as taken
    /// until told otherwise), and what is handed out, `taken`, has come
    /// down to the lease: the parent should hear of it now, so it can give
    /// the freed capacity to others without waiting for a refresh.
    pub fn outstanding_settled(&self, now: Time, taken: f64) -> bool {
        let held = self.valid_lease(now).map_or(0.0, |l| l.capacity);
        let slack = held * 1e-9;
        self.reported_outstanding > held + slack && taken <= held + slack
    }

    /// The unexpired upstream lease.
    pub fn valid_lease(&self, now: Time) -> Option<Lease> {
        self.lease.filter(|l| l.expiry > now)
    }

    /// Capacity to share now.
    pub fn capacity(&self, now: Time) -> f64 {
        let granted = self.valid_lease(now).map(|l| l.capacity).unwrap_or(0.0);
        match &self.local {
            Some(t) => granted.min(t.capacity),
            None => granted,
        }
    }

    /// The learning-mode length: the local template's, else the parent's,
    /// else [`PENDING_LEARNING`] until the parent has answered.
    pub fn learning_duration(&self) -> Span {
        match (&self.local, &self.parent_algorithm) {
            (Some(t), Some(p)) => Span::secs(
                t.algorithm
                    .learning_mode_duration
                    .min(p.learning_mode_duration),
            ),
            (Some(t), None) => Span::secs(t.algorithm.learning_mode_duration),
            (None, Some(p)) => Span::secs(p.learning_mode_duration),
            (None, None) => PENDING_LEARNING,
        }
    }

    /// The template this server applies: the parent's algorithm (or the
    /// pending default), with the upstream lease's refresh interval, lowered
    /// by a local template.
    pub fn template(&self, resource_id: &str) -> Arc<Template> {
        let mut alg = match &self.parent_algorithm {
            Some(p) => (**p).clone(),
            None => AlgorithmConfig {
                kind: Kind::FairShare,
                lease_length: PENDING_LEARNING.whole_secs(),
                refresh_interval: 1,
                learning_mode_duration: PENDING_LEARNING.whole_secs(),
                decay_factor: DEFAULT_DECAY_FACTOR,
                parameters: Vec::new(),
            },
        };
        if let Some(l) = self.lease {
            // Our clients refresh at our own refresh interval × decay.
            alg.refresh_interval = l.refresh_interval.max(1);
        }
        let mut safe = self.parent_safe;
        let mut capacity = self.lease.map(|l| l.capacity).unwrap_or(0.0);
        if let Some(t) = &self.local {
            alg.lease_length = alg.lease_length.min(t.algorithm.lease_length);
            alg.refresh_interval = alg.refresh_interval.min(t.algorithm.refresh_interval);
            capacity = capacity.min(t.capacity);
            safe = match (safe, t.safe_capacity) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        alg.refresh_interval = alg.refresh_interval.min(alg.lease_length).max(1);
        Arc::new(Template {
            index: usize::MAX,
            identifier_glob: match &self.local {
                Some(t) => format!("{} (parent, narrowed)", t.identifier_glob),
                None if self.parent_algorithm.is_some() => "(from parent)".to_string(),
                None => "(waiting for parent)".to_string(),
            },
            capacity,
            safe_capacity: safe,
            description: Some(format!("capacity for {resource_id} leased from the parent")),
            algorithm: Arc::new(alg),
            max_clients_per_server: self
                .local
                .as_ref()
                .map_or(DEFAULT_MAX_CLIENTS_PER_SERVER, |t| t.max_clients_per_server),
            open_server_share: self
                .local
                .as_ref()
                .map_or(DEFAULT_OPEN_SERVER_SHARE, |t| t.open_server_share),
            shadow: self.parent_shadow
                || self.shadow_all
                || self.local.as_ref().is_some_and(|t| t.shadow),
        })
    }
}

/// One (priority, Σ subclients, Σ wants) per band, highest first, always
/// acceptable to a parent: wants at most [`MAX_AMOUNT`], at most
/// [`MAX_BANDS`] bands (the lowest ones merged into the
/// last, which keeps the highest of their priorities).
pub(super) fn aggregate_bands(bands: &[doorman_algorithms::BandSummary]) -> Vec<(i64, i64, f64)> {
    let max = MAX_BANDS;
    let mut out: Vec<(i64, i64, f64)> = Vec::with_capacity(bands.len().min(max));
    for (i, b) in bands.iter().enumerate() {
        let n = b.subclients.round().clamp(1.0, i64::MAX as f64) as i64;
        let w = b.wants.min(MAX_AMOUNT);
        if i < max {
            out.push((b.priority, n, w));
        } else if let Some(last) = out.last_mut() {
            last.1 = last.1.saturating_add(n);
            last.2 = (last.2 + w).min(MAX_AMOUNT);
        }
    }
    out
}

/// A new master in learning mode has not heard from every requester yet
/// (some are still backing off after the failover), so the wants it knows
/// understate its node's demand. Until learning ends it asks for at least
/// the lease it holds, so the parent does not hand its predecessor's share
/// (still sub-leased below) to other nodes. The difference goes to the
/// highest band present: the unheard requesters' bands are unknown, and
/// this keeps the most.
pub(super) fn keep_while_learning(bands: &mut [(i64, i64, f64)], held: f64) {
    let known: f64 = bands.iter().map(|b| b.2).sum();
    if let Some(top) = bands.iter_mut().max_by_key(|b| b.0) {
        if held > known {
            top.2 = (top.2 + (held - known)).min(MAX_AMOUNT);
        }
    }
}

impl ResourceShard {
    /// When the upstream task should next wake.
    pub fn next_upstream_wakeup(&self, node: &Node) -> Option<Time> {
        if !node.is_master || !node.is_intermediate() {
            return None;
        }
        self.resources
            .values()
            .filter(|r| !r.shares.is_empty())
            .filter_map(|r| r.upstream.as_ref())
            .map(|u| u.schedule.next_wakeup(MIN_UPSTREAM_INTERVAL))
            .min()
    }

    /// True when a master intermediate has a resource with clients due for
    /// a request to the parent.
    pub fn upstream_due(&self, node: &Node, now: Time) -> bool {
        if !node.is_master || !node.is_intermediate() {
            return false;
        }
        self.resources.values().any(|r| {
            !r.shares.is_empty()
                && r.upstream
                    .as_ref()
                    .is_some_and(|u| u.schedule.due(now, MIN_UPSTREAM_INTERVAL))
        })
    }

    /// The asks for every resource with clients that the minimum interval
    /// allows (marked as sent), in table order.
    pub fn upstream_asks(&mut self, node: &Node, now: Time) -> Vec<UpstreamAsk> {
        if !node.is_master || !node.is_intermediate() {
            return Vec::new();
        }
        let (config, gen) = (&node.config, node.config_gen);
        self.resources
            .iter_mut()
            .filter(|(_, r)| !r.shares.is_empty())
            .filter_map(|(id, r)| {
                r.freshen(config, gen, id);
                r.upstream_ask(id, now)
            })
            .collect()
    }

    /// Applies the parent's answer to a request for `requested`.
    pub fn upstream_response(
        &mut self,
        node: &Node,
        now: Time,
        requested: &[String],
        grants: &[UpstreamGrant],
    ) {
        for id in requested {
            if let Some(u) = self.resources.get_mut(id).and_then(|r| r.upstream.as_mut()) {
                u.schedule.answered(now, UPSTREAM_RETRY);
            }
        }
        let learning = node.learning_clock();
        for g in grants {
            let Some(r) = self.resources.get_mut(&g.resource_id) else {
                continue;
            };
            let Some(u) = r.upstream.as_mut() else {
                continue;
            };
            let capacity = if g.lease.capacity.is_finite() && g.lease.capacity > 0.0 {
                g.lease.capacity
            } else {
                0.0
            };
            u.lease = Some(Lease {
                capacity,
                ..g.lease
            });
            self.latest_upstream_expiry = self.latest_upstream_expiry.max(g.lease.expiry);
            if let Some(a) = &g.algorithm {
                self.longest_parent_lease = self.longest_parent_lease.max(a.lease_length);
                u.parent_algorithm = Some(Arc::new(a.clone()));
            }
            if let Some(s) = g.safe_capacity.filter(|s| s.is_finite() && *s >= 0.0) {
                u.parent_safe = Some(s);
            }
            u.parent_shadow = g.shadow;
            u.schedule.granted(now, &g.lease, g.next_refresh_interval);
            u.grants.note_own(capacity, g.lease.expiry);
            // The largest word stands: a later, smaller one (after a
            // lapse, when the parent had forgotten more) does not make the
            // predecessors' leases still out any smaller.
            if let Some(p) = g.predecessor_out {
                u.predecessor_out = Some(u.predecessor_out.map_or(p, |q| q.max(p)));
                let until = g.predecessor_until.unwrap_or(Time::MAX);
                u.predecessor_until = u.predecessor_until.max(until);
            }
            // While still learning, the learning end follows the algorithm
            // now known; once learning has ended it never starts again.
            let learning_end = learning.end(u.learning_duration());
            if r.in_learning(now) {
                r.learning_until = learning_end;
            }
            r.refresh_upstream(now, &g.resource_id);
        }
    }

    /// The request for `requested` failed at `now`; try again after the
    /// `backoff` delay, but never later than the parent's refresh interval
    /// ([`Lease::retry_delay`]), or [`UNLEASED_UPSTREAM_RETRY`] for a
    /// resource without a lease from the parent.
    pub fn upstream_failure(&mut self, now: Time, requested: &[String], backoff: Span) {
        for id in requested {
            if let Some(u) = self.resources.get_mut(id).and_then(|r| r.upstream.as_mut()) {
                let backoff = match u.lease {
                    Some(_) => backoff,
                    None => backoff.min(UNLEASED_UPSTREAM_RETRY),
                };
                u.schedule.failed(now, u.lease.as_ref(), backoff);
            }
        }
    }
}
