//! The state every boundary of a running server shares: the core in its
//! shards (each behind its own lock), the metrics, the clock, the wake-up
//! of the upstream task, the parent link's state and the election
//! session's. Whole-server reads and cleanup go through
//! [`ServerState::sweep`], which takes one shard's lock for one bounded
//! step at a time, so a scrape or a status page of 100 000 resources never
//! holds requests up for more than a step.
//!
//! Must not: decide anything (the core does), do I/O, or hold a shard's
//! lock for more than one step of whole-server work.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use doorman_core::action::Action;
use doorman_core::refusal::RequestRefusal;
use doorman_core::server::{
    CapacityRequest, Grant, Node, NotReady, Refusal, ResourceShard, Sharded, Status,
};
use doorman_lease::Time;
use doorman_transport::auth::{Auth, AuthError};
use doorman_transport::tls::{Port, TlsEvents};

use crate::config_version::ConfigVersion;
use crate::core_locks::LockedCore;
use crate::metrics::{Metrics, ResourceSeries, Scrape};
use crate::moved::Moved;
use crate::parent_link::ParentLink;

/// Where the server gets the time from (the lease clock in production).
pub use doorman_net::clock::Clock;

/// Why a server is not ready (`/readyz` answers 503 with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unready {
    /// The core's reason (config, mastership, upstream leases).
    #[error(transparent)]
    Core(#[from] NotReady),
    /// A parent that has not answered since start (its last error).
    #[error("{0}")]
    Parent(String),
}

/// State shared by the gRPC service, the HTTP endpoints and background tasks.
pub struct ServerState {
    core: LockedCore,
    /// Wakes the upstream task (a new resource must be asked for at once).
    pub upstream_wake: tokio::sync::Notify,
    /// Wakes the election's horizon keeper: the parent answered, and an
    /// intermediate's record must follow its new lease before a child
    /// asks (see `Mastership::upstream_answered`).
    pub horizon_wake: tokio::sync::Notify,
    /// The server's metrics.
    pub metrics: Metrics,
    /// The clock.
    pub clock: Clock,
    /// How callers are identified besides client certificates.
    pub auth: Auth,
    /// Which config runs (none while waiting for one, or inline).
    config_version: Mutex<Option<ConfigVersion>>,
    /// The link to the parent; `None` at a root.
    pub parent_link: Option<ParentLink>,
    /// The election session is alive (an etcd election clears it while it
    /// has no session; standalone it stays set).
    pub session_up: AtomicBool,
    /// `/metrics` per template (default) or per resource.
    pub series: ResourceSeries,
    /// The level in the tree; `u32::MAX` while unknown.
    level: AtomicU32,
    /// The resources whose grants may have moved, for the lease streams.
    pub moved: Moved,
    /// The tree below this server, as its children report it.
    pub subtree: crate::subtree::Subtree,
}

/// The TLS boundary's events, counted in this server's metrics.
impl TlsEvents for ServerState {
    fn handshake_failed(&self, port: Port, reason: &'static str) {
        self.metrics.tls_handshake_failed(port.name(), reason);
    }

    fn reloaded(&self, ok: bool) {
        self.metrics.tls_reload(ok);
    }
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState").finish_non_exhaustive()
    }
}

impl ServerState {
    /// Wraps a core.
    pub fn new(core: LockedCore, metrics: Metrics, clock: Clock) -> Self {
        ServerState {
            core,
            upstream_wake: tokio::sync::Notify::new(),
            horizon_wake: tokio::sync::Notify::new(),
            metrics,
            clock,
            config_version: Mutex::new(None),
            auth: Auth::default(),
            parent_link: None,
            session_up: AtomicBool::new(true),
            series: ResourceSeries::default(),
            level: AtomicU32::new(u32::MAX),
            moved: Moved::default(),
            subtree: Default::default(),
        }
    }

    /// The core (each of its calls takes the locks it needs; its entry
    /// points are [`Sharded`]'s).
    pub fn core(&self) -> &LockedCore {
        &self.core
    }

    /// Records which config now runs, in metrics and for the status page.
    pub fn set_config_version(&self, v: ConfigVersion) {
        self.metrics.config_version(&v);
        *self
            .config_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(v);
    }

    /// Which config runs, as the status page shows it.
    pub fn config_version(&self) -> Option<ConfigVersion> {
        self.config_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Its level in the tree (0: the root), if known.
    pub fn level(&self) -> Option<u32> {
        Some(self.level.load(Ordering::Relaxed)).filter(|l| *l != u32::MAX)
    }

    /// Sets its level in the tree.
    pub fn set_level(&self, level: u32) {
        self.level.store(level.min(u32::MAX - 1), Ordering::Relaxed);
    }

    /// The current time.
    pub fn now(&self) -> Time {
        (self.clock)()
    }

    /// Runs a capacity request through the core, if the config's access
    /// rules let `caller` do `action` on each of its resources (else each
    /// one they refuse, by its index in `req`), and wakes the
    /// upstream task if it created a resource the parent must be asked
    /// about.
    pub fn decide(
        &self,
        caller: Option<&str>,
        action: Action,
        req: &CapacityRequest,
    ) -> Result<Result<Vec<Grant>, Refusal>, RequestRefusal> {
        let ids = req.resources.iter().map(|r| r.resource_id.as_str());
        self.may(caller, action, ids)?;
        Ok(self.decide_in_process(req))
    }

    /// Every one of `ids` the access rules do not let `caller` do `action`
    /// on, if any.
    pub fn may<'a>(
        &self,
        caller: Option<&str>,
        action: Action,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), RequestRefusal> {
        let denials = self.core().config().acl().denials(caller, action, ids);
        denials.map_or(Ok(()), Err)
    }

    /// Runs a request of this server's own (a front-end that checked its
    /// callers' access itself, such as Envoy's rate limit services)
    /// through the core ([`Sharded::decide`]: one lock per shard and
    /// step), waking the upstream task if needed.
    pub fn decide_in_process(&self, req: &CapacityRequest) -> Result<Vec<Grant>, Refusal> {
        let decided = self.core().decide(self.now(), req);
        if decided.wake_upstream {
            self.upstream_wake.notify_one();
        }
        if decided.moved {
            self.moved
                .note(req.resources.iter().map(|r| r.resource_id.as_str()));
        }
        decided.grants
    }

    /// May `caller` read the status pages? `Err(why)` if not.
    pub fn may_read(&self, caller: Option<&str>) -> Result<(), RequestRefusal> {
        self.may(caller, Action::Read, [""])
    }

    /// The caller's identity: its bearer token's (`authorization`
    /// header) if it sent one, else its client certificate's; a malformed
    /// or unknown token is counted and refused.
    pub fn identify(
        &self,
        certificate: Option<&Arc<str>>,
        authorization: Option<&[u8]>,
    ) -> Result<Option<Arc<str>>, AuthError> {
        self.counted(self.auth.caller(certificate, authorization))
    }

    /// [`ServerState::identify`] for the capacity RPCs (Doorman's and
    /// Envoy's): no identity is refused too, when callers can
    /// authenticate and anonymous ones are not allowed (`Auth::rpc_caller`).
    pub fn identify_rpc(
        &self,
        certificate: Option<&Arc<str>>,
        authorization: Option<&[u8]>,
    ) -> Result<Option<Arc<str>>, AuthError> {
        self.counted(self.auth.rpc_caller(certificate, authorization))
    }

    /// `r`, its failure counted by reason.
    fn counted<T>(&self, r: Result<T, AuthError>) -> Result<T, AuthError> {
        r.inspect_err(|e| self.metrics.auth_failed(e.reason()))
    }

    /// Runs `step` over every shard from position 0 until it returns
    /// `None`, taking a shard's lock for each step only.
    pub fn sweep(&self, step: impl FnMut(&Node, &mut ResourceShard, usize) -> Option<usize>) {
        self.core().sweep(step);
    }

    /// A status snapshot (at most `max_leases` leases per resource), taken
    /// step by step.
    pub fn status(&self, max_leases: usize) -> Status {
        let mut status = self.core().status(self.now(), max_leases);
        status.config_version = self.config_version().map(|v| v.to_string());
        status.wall_clock_ms = Some(doorman_net::clock::wall_clock().as_millis());
        status.level = self.level();
        status.parent_link = self.parent_link.as_ref().map(ParentLink::get);
        status.election_session_up = self.session_up.load(Ordering::Relaxed);
        status
    }

    /// What `/metrics` exports from the core (per-resource figures taken
    /// step by step), the election and the parent link.
    pub fn scrape(&self) -> Scrape {
        let now = self.now();
        let mut gauges = Vec::with_capacity(self.core().resource_count());
        self.sweep(|n, s, from| s.gauges_step(n, now, from, &mut gauges));
        let mut core = self.core();
        let parent = self.parent_link.as_ref().map(ParentLink::get);
        let (is_master, master) = core.mastership_at(now);
        Scrape {
            gauges,
            counters: core.counters(),
            is_master,
            master_known: is_master || master.is_some(),
            session_up: self.session_up.load(Ordering::Relaxed),
            parent,
            series: self.series,
        }
    }

    /// The `/metrics` page.
    pub fn metrics_text(&self) -> String {
        self.metrics.render(&self.scrape())
    }

    /// 200 or why not: the core's readiness (config, mastership, upstream
    /// leases of resources in use), then a parent that has never answered.
    pub fn readiness(&self) -> Result<(), Unready> {
        let now = self.now();
        self.core().readiness(now)?;
        let is_master = self.core().is_master();
        let link = self.parent_link.as_ref().map(ParentLink::get);
        match link.as_ref().and_then(crate::parent_link::unready) {
            Some(why) if is_master => Err(Unready::Parent(why)),
            _ => Ok(()),
        }
    }

    /// One whole cleanup pass, step by step.
    pub fn cleanup(&self) {
        self.core().cleanup(self.now());
        // Leases that ended free capacity others on a stream may get.
        self.moved.note_all();
    }
}
