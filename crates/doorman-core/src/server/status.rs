//! A serialisable snapshot of the core for the status page, the JSON API
//! and metrics, taken in steps (`sweep.rs`): each step is O(resources in
//! the step + leases shown).
//!
//! Must not: change leases, grants or learning mode.

use serde::Serialize;

use doorman_lease::Time;

use super::resource::Resource;
use super::Node;
use crate::config::Template;

/// The whole server.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// This server's id.
    pub server_id: String,
    /// Is it the master?
    pub is_master: bool,
    /// The master's address, if known.
    pub master_address: Option<String>,
    /// When it became master (seconds since epoch), if it is.
    pub master_since: Option<f64>,
    /// When the snapshot was taken (seconds since epoch), on the lease
    /// clock (the wall clock as it read when the process started,
    /// advanced by the monotonic clock).
    pub now: f64,
    /// The wall clock when the snapshot was taken, ms since the epoch (set
    /// by the shell): how far off the host's wall clock is, which the
    /// lease clock does not follow.
    pub wall_clock_ms: Option<i64>,
    /// "root" or "intermediate".
    pub role: &'static str,
    /// Where the config came from.
    pub config_source: String,
    /// The config's one-line summary.
    pub config_summary: String,
    /// Which config version runs (set by the shell: hash, version, pusher).
    pub config_version: Option<String>,
    /// Its level in the tree: 0 at the root, the parent's plus one below
    /// (set by the shell; unknown until a parent of ours says its level).
    pub level: Option<u32>,
    /// The link to the parent (set by the shell; none at the root).
    pub parent_link: Option<LinkStatus>,
    /// The election session is alive (set by the shell; always,
    /// standalone).
    pub election_session_up: bool,
    /// The templates in file order.
    pub templates: Vec<TemplateStatus>,
    /// Resources with state.
    pub resources: Vec<ResourceStatus>,
    /// Requests for resources no template matched.
    pub unmatched_requests: u64,
    /// Live leases over all resources.
    pub leases: usize,
}

/// An intermediate server's link to its parent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LinkStatus {
    /// Calls made so far.
    pub calls: u64,
    /// The last call failed.
    pub failing: bool,
    /// Unix time of the last successful answer.
    pub last_success_unix: Option<f64>,
    /// The last failure, if the last call failed.
    pub last_error: Option<String>,
}

/// One template.
#[derive(Debug, Clone, Serialize)]
pub struct TemplateStatus {
    /// Its glob.
    pub identifier_glob: String,
    /// Its capacity.
    pub capacity: f64,
    /// Configured safe capacity.
    pub safe_capacity: Option<f64>,
    /// Algorithm kind.
    pub kind: String,
    /// Lease length, s.
    pub lease_length: i64,
    /// Refresh interval at the root, s.
    pub refresh_interval: i64,
    /// Learning mode duration, s.
    pub learning_mode_duration: i64,
    /// Description.
    pub description: Option<String>,
    /// Shadow mode: granted as usual, enforced by nobody.
    pub shadow: bool,
}

/// One resource.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceStatus {
    /// Its id.
    pub id: String,
    /// The template it matched.
    pub template: String,
    /// Algorithm kind.
    pub kind: String,
    /// Capacity being shared.
    pub capacity: f64,
    /// Safe capacity sent to clients.
    pub safe_capacity: f64,
    /// In learning mode?
    pub learning: bool,
    /// Seconds of learning mode left.
    pub learning_remaining: f64,
    /// Shadow mode: granted as usual, enforced by nobody.
    pub shadow: bool,
    /// Number of requesters with a lease.
    pub requesters: usize,
    /// Σ subclients.
    pub subclients: f64,
    /// Σ wants.
    pub wants: f64,
    /// Σ has (capacity handed out).
    pub has: f64,
    /// Per band, highest first.
    pub bands: Vec<BandStatus>,
    /// Per requester (at most the number asked for).
    pub leases: Vec<LeaseStatus>,
    /// True when `leases` was cut short.
    pub leases_truncated: bool,
    /// Intermediate servers: the lease from the parent.
    pub upstream: Option<UpstreamStatus>,
}

/// An intermediate server's lease on a resource from its parent.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    /// Capacity granted by the parent (before local narrowing).
    pub capacity: f64,
    /// Seconds until it expires (negative: expired; absent: none yet).
    pub expires_in: Option<f64>,
    /// Refresh interval of that lease, s.
    pub refresh_interval: Option<i64>,
    /// True once the parent has sent the algorithm.
    pub algorithm_from_parent: bool,
}

/// One priority band of a resource.
#[derive(Debug, Clone, Serialize)]
pub struct BandStatus {
    /// Priority.
    pub priority: i64,
    /// Demands in the band.
    pub demands: usize,
    /// Σ subclients.
    pub subclients: f64,
    /// Σ wants.
    pub wants: f64,
}

/// One requester's lease on a resource.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseStatus {
    /// "client" or "server".
    pub kind: &'static str,
    /// Its id.
    pub id: String,
    /// Capacity held.
    pub has: f64,
    /// Σ wants.
    pub wants: f64,
    /// Its steady-state target.
    pub target: f64,
    /// Σ subclients.
    pub subclients: f64,
    /// Highest priority among its bands.
    pub priority: i64,
    /// Seconds until the lease expires.
    pub expires_in: f64,
    /// Seconds since its last request.
    pub last_request_ago: f64,
    /// For servers: what they report having handed out.
    pub outstanding: Option<f64>,
    /// For a client whose grant was lowered and that has not shown it got
    /// it: the higher lease it may still hold, counted as taken.
    pub lowered_from: Option<f64>,
    /// Seconds until that higher lease ends.
    pub lowered_ends_in: Option<f64>,
}

/// The per-resource figures `/metrics` exports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceGauge {
    /// Its id.
    pub id: String,
    /// Capacity being shared.
    pub capacity: f64,
    /// Σ has (capacity handed out).
    pub has: f64,
    /// Σ wants.
    pub wants: f64,
    /// Number of requesters with a lease.
    pub requesters: usize,
    /// In learning mode?
    pub learning: bool,
    /// The template it matched (its glob).
    pub template: String,
    /// Seconds of learning mode left (0 outside it).
    pub learning_remaining: f64,
    /// Shadow mode.
    pub shadow: bool,
    /// Σ wants per priority band (what an intermediate asks its parent).
    pub bands: Vec<(i64, f64)>,
    /// Intermediate servers: the lease from the parent.
    pub upstream: Option<UpstreamGauge>,
}

/// An intermediate server's lease on one resource, for `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamGauge {
    /// Capacity the parent granted (0 before its first answer).
    pub granted: f64,
    /// Seconds until that lease expires (negative: expired; absent: none
    /// yet).
    pub expires_in: Option<f64>,
}

impl Node {
    /// Everything but the resources and the counters (and so `leases` =
    /// 0): cheap, O(templates). Fill `resources` with
    /// [`ResourceShard::status_step`](super::ResourceShard::status_step).
    pub fn status_header(&self, now: Time) -> Status {
        Status {
            server_id: self.opts.server_id.clone(),
            is_master: self.is_master,
            master_address: self.master_address().map(str::to_string),
            master_since: self.is_master.then(|| self.master_since.as_secs_f64()),
            now: now.as_secs_f64(),
            role: match self.opts.role {
                super::Role::Root => "root",
                super::Role::Intermediate => "intermediate",
            },
            config_source: self.config.source().to_string(),
            config_summary: self.config.summary(),
            config_version: None,
            wall_clock_ms: None,
            level: None,
            parent_link: None,
            election_session_up: true,
            templates: self
                .config
                .templates()
                .iter()
                .map(|t| template_status(t))
                .collect(),
            resources: Vec::new(),
            unmatched_requests: 0,
            leases: 0,
        }
    }
}

impl Status {
    /// Sorts the resources by id and counts their leases (after the last
    /// status step).
    pub fn finish(&mut self) {
        self.resources.sort_by(|a, b| a.id.cmp(&b.id));
        self.leases = self.resources.iter().map(|r| r.requesters).sum();
    }
}

fn template_status(t: &Template) -> TemplateStatus {
    TemplateStatus {
        identifier_glob: t.identifier_glob.clone(),
        capacity: t.capacity,
        safe_capacity: t.safe_capacity,
        kind: t.algorithm.kind.to_string(),
        lease_length: t.algorithm.lease_length,
        refresh_interval: t.algorithm.refresh_interval,
        learning_mode_duration: t.algorithm.learning_mode_duration,
        description: t.description.clone(),
        shadow: t.shadow,
    }
}

pub(super) fn resource_gauge(id: &str, r: &mut Resource, now: Time) -> ResourceGauge {
    let totals = r.shares.totals();
    ResourceGauge {
        id: id.to_string(),
        capacity: r.shares.capacity(),
        has: totals.has,
        wants: totals.wants,
        requesters: totals.requesters,
        learning: r.in_learning(now),
        template: r.template.identifier_glob.clone(),
        learning_remaining: (r.learning_until - now).as_secs_f64().max(0.0),
        shadow: r.template.shadow,
        bands: r
            .shares
            .bands()
            .iter()
            .map(|b| (b.priority, b.wants))
            .collect(),
        upstream: r.upstream.as_ref().map(|u| UpstreamGauge {
            granted: u.lease.map(|l| l.capacity).unwrap_or(0.0),
            expires_in: u.lease.map(|l| (l.expiry - now).as_secs_f64()),
        }),
    }
}

pub(super) fn resource_status(
    id: &str,
    r: &mut Resource,
    now: Time,
    max_leases: usize,
) -> ResourceStatus {
    let totals = r.shares.totals();
    let bands = r
        .shares
        .bands()
        .into_iter()
        .map(|b| BandStatus {
            priority: b.priority,
            demands: b.demands,
            subclients: b.subclients,
            wants: b.wants,
        })
        .collect();
    let leases = lease_statuses(r, now, max_leases);
    ResourceStatus {
        id: id.to_string(),
        template: r.template.identifier_glob.clone(),
        kind: r.template.algorithm.kind.to_string(),
        capacity: r.shares.capacity(),
        safe_capacity: r.shares.safe_capacity(r.template.safe_capacity),
        learning: r.in_learning(now),
        learning_remaining: (r.learning_until - now).as_secs_f64().max(0.0),
        shadow: r.template.shadow,
        requesters: totals.requesters,
        subclients: totals.subclients,
        wants: totals.wants,
        has: totals.has,
        bands,
        leases_truncated: totals.requesters > leases.len(),
        leases,
        upstream: r.upstream.as_ref().map(|u| UpstreamStatus {
            capacity: u.lease.map(|l| l.capacity).unwrap_or(0.0),
            expires_in: u.lease.map(|l| (l.expiry - now).as_secs_f64()),
            refresh_interval: u.lease.map(|l| l.refresh_interval),
            algorithm_from_parent: u.parent_algorithm.is_some(),
        }),
    }
}

fn lease_statuses(r: &mut Resource, now: Time, max_leases: usize) -> Vec<LeaseStatus> {
    let ids: Vec<_> = r.shares.ids().take(max_leases).collect();
    let mut leases = Vec::with_capacity(ids.len());
    for rid in ids {
        let target = r.shares.target(rid);
        let demands = r.shares.demands(rid);
        let Some(rec) = r.shares.get(rid) else {
            continue;
        };
        let lowered = (rec.lowered_until > now).then_some(rec.lowered_until);
        leases.push(LeaseStatus {
            kind: rec.who.kind(),
            id: rec.who.display_id(),
            has: r.shares.has(rid),
            wants: demands.iter().map(|d| d.2).sum(),
            target,
            subclients: demands.iter().map(|d| d.1).sum(),
            priority: demands.first().map(|d| d.0).unwrap_or(0),
            expires_in: (rec.expiry - now).as_secs_f64(),
            last_request_ago: (now - rec.last_request).as_secs_f64(),
            outstanding: rec.outstanding(),
            lowered_from: lowered.map(|_| r.shares.taken(rid)),
            lowered_ends_in: lowered.map(|until| (until - now).as_secs_f64()),
        });
    }
    leases
}
