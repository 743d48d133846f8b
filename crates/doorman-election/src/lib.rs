//! The election boundary: who is the master of a server's node. The
//! [`Election`] trait, [`Standalone`] (always master; the default), and
//! what an election is given to run: a [`Candidacy`] whose handles reach
//! the server's core only through [`Mastership`], which the server
//! implements. Implementations elsewhere: etcd (`doorman-etcd`), and an
//! in-process one in the test kit. Each publishes a [`MasterView`] on a
//! watch channel; the server's `election::follow` applies changes to the
//! core: winning starts a fresh state in learning mode, losing drops all
//! lease state and turns every RPC into a redirect. An election that keeps
//! a lease horizon record (etcd) says in the view what the new master's
//! predecessors left out and the bound it recorded, and keeps the record
//! moving through [`LeaseHorizon`] (`doorman_core::server` `horizon.rs`
//! has the rules).
//!
//! Leaving mastership goes in one order, whatever the reason (graceful
//! stop, lost etcd session, another holder seen):
//!
//! 1. **stop granting**: [`Candidacy::stop_granting`] steps the core down
//!    synchronously; when it returns, every request is refused;
//! 2. **publish** the new view (the `follow` task then has nothing left to
//!    drop);
//! 3. **release** the election (resign, revoke the lease), so a successor
//!    can win only after this server stopped granting.
//!
//! The order is made explicit here rather than left to which task the
//! runtime happens to run first.
//!
//! Must not: decide grants, touch lease state other than through
//! [`Mastership`], or depend on a store (etcd) or the server.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use doorman_core::server::Predecessors;
use doorman_lease::{Span, Time};
use tokio::sync::watch;

/// What an election may do to the core of the server it runs for; the
/// server implements it over its state, on its own clock.
pub trait Mastership: Send + Sync + 'static {
    /// The core's time now.
    fn now(&self) -> Time;
    /// Steps the core down at once (`master`: where to redirect, if
    /// known); when it returns, every request is refused.
    fn step_down(&self, master: Option<String>);
    /// Whether the election's session is alive, for `/metrics`.
    fn set_session_up(&self, up: bool);
    /// The core may take itself for the master until `until` (core time).
    fn set_master_until(&self, until: Time);
    /// The horizon to record on taking office at `now`.
    fn fresh_horizon(&self, now: Time) -> Time;
    /// How close the record may come before the master steps down.
    fn renew_before(&self) -> Span;
    /// The horizon to record at `now`, if the record must move on.
    fn horizon_due(&self, now: Time) -> Option<Time>;
    /// `t` is recorded: leases may now last until it.
    fn set_lease_bound(&self, t: Time);
    /// The recorded bound, if any.
    fn lease_bound(&self) -> Option<Time>;
    /// Resolves once the parent has answered (or pushed) since the last
    /// time it resolved: an intermediate's record follows its parent's
    /// lease, and moving it at once keeps a child that asks right after
    /// from getting a lease cut short by the old record.
    fn upstream_answered(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// What a server knows about its node's mastership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterView {
    /// This server is the master.
    pub is_master: bool,
    /// The master's address, if known.
    pub master: Option<String>,
    /// When this server is master: what it knows about the leases of the
    /// masters before it (`Unknown` without a horizon record: learning
    /// lasts its full duration).
    pub predecessors: Predecessors,
    /// When this server is master and keeps a horizon record: no lease it
    /// hands out outlives this (`None`: no record, no bound).
    pub lease_bound: Option<Time>,
}

/// The future an election runs as.
pub type ElectionFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Steps the core down at once (step 1 of leaving mastership); the
/// argument is the master to redirect to, if known.
#[derive(Clone)]
pub struct StopGranting(Arc<dyn Mastership>);

impl StopGranting {
    /// Steps `core` down.
    fn of(core: Arc<dyn Mastership>) -> Self {
        StopGranting(core)
    }

    /// Stops granting; when this returns the core refuses every request.
    pub fn now(&self, master: Option<String>) {
        self.0.step_down(master);
    }

    /// The first two steps of leaving mastership, in their order: stop
    /// granting, then publish that this server is not the master (knowing
    /// none). Releasing the election comes after, by each election.
    pub fn and_publish(&self, out: &watch::Sender<MasterView>) {
        self.now(None);
        out.send_replace(MasterView::default());
    }
}

impl fmt::Debug for StopGranting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StopGranting")
    }
}

/// Whether this server's election session is alive (an etcd lease kept
/// alive), for `/metrics`.
#[derive(Clone)]
pub struct SessionFlag(Arc<dyn Mastership>);

impl SessionFlag {
    /// Sets `core`'s flag.
    fn of(core: Arc<dyn Mastership>) -> Self {
        SessionFlag(core)
    }

    /// The session is (or is not) alive now.
    pub fn set(&self, up: bool) {
        self.0.set_session_up(up);
    }
}

impl fmt::Debug for SessionFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionFlag")
    }
}

/// How long the core may take itself for the master: an election with a
/// lease (etcd) says after taking office and after each keep-alive that
/// got through when that lease can end at the earliest; the core refuses
/// to grant, and Discovery stops saying "master", from then on, whether
/// or not the election task has run since (a process paused past its
/// lease answers the requests queued meanwhile before that task notices).
/// Elections without a lease (standalone, in-memory) never say.
#[derive(Clone)]
pub struct MastershipProof(Arc<dyn Mastership>);

impl MastershipProof {
    /// `core`, at its clock.
    fn of(core: Arc<dyn Mastership>) -> Self {
        MastershipProof(core)
    }

    /// The election's lease cannot end before `deadline` (the monotonic
    /// clock's): the core may take itself for master until then.
    pub fn until(&self, deadline: tokio::time::Instant) {
        let left = deadline.saturating_duration_since(clock::instant());
        let until = self.0.now() + Span::from_duration(left);
        self.0.set_master_until(until);
    }
}

impl fmt::Debug for MastershipProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MastershipProof")
    }
}

/// The core's side of the lease horizon record, for an election that
/// keeps one: when the record is due to move on, and what was recorded.
#[derive(Clone)]
pub struct LeaseHorizon(Arc<dyn Mastership>);

impl LeaseHorizon {
    /// `core`, at its clock.
    fn of(core: Arc<dyn Mastership>) -> Self {
        LeaseHorizon(core)
    }

    /// The core's time now.
    pub fn now(&self) -> Time {
        self.0.now()
    }

    /// The horizon to record on taking office (before the first grant).
    pub fn fresh(&self) -> Time {
        self.0.fresh_horizon(self.0.now())
    }

    /// How close the record may come before the master steps down rather
    /// than hand out leases that end at once (`HorizonLead::renew_before`).
    pub fn renew_before(&self) -> Span {
        self.0.renew_before()
    }

    /// The horizon to record now, if the record must move on.
    pub fn due(&self) -> Option<Time> {
        self.0.horizon_due(self.0.now())
    }

    /// Resolves once the parent has answered since it last resolved.
    pub async fn upstream_answered(&self) {
        self.0.upstream_answered().await
    }

    /// `t` is recorded: leases may now last until it.
    pub fn recorded(&self, t: Time) {
        self.0.set_lease_bound(t);
    }

    /// How long until the recorded bound (negative once passed), if any.
    pub fn left(&self) -> Option<Span> {
        self.0.lease_bound().map(|b| b - self.0.now())
    }
}

impl fmt::Debug for LeaseHorizon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LeaseHorizon")
    }
}

/// One server's part in an election.
#[derive(Debug)]
pub struct Candidacy {
    /// The address clients should be redirected to when this server is
    /// master.
    pub me: String,
    /// Where the election publishes what this server knows.
    pub out: watch::Sender<MasterView>,
    /// Turns true when the server stops.
    pub stop: watch::Receiver<bool>,
    /// Step 1 of leaving mastership: call it before publishing the
    /// step-down and before releasing the election.
    pub stop_granting: StopGranting,
    /// Where the election says whether its session is alive.
    pub session: SessionFlag,
    /// The lease horizon record's link to the core (used by elections
    /// that keep one).
    pub horizon: LeaseHorizon,
    /// How long the core may take itself for master (used by elections
    /// with a lease).
    pub proof: MastershipProof,
}

/// How a server takes part in its node's master election: standalone
/// ([`Standalone`], the default), etcd (`doorman_etcd::EtcdElection`), or an
/// in-process election for tests (`doorman_testkit::InMemoryElection`).
pub trait Election: Send + Sync + fmt::Debug + 'static {
    /// Runs the election until the candidacy's `stop` turns true.
    fn run(&self, candidacy: Candidacy) -> ElectionFuture;

    /// True for a server that is always master (it becomes master at
    /// start, before the first request).
    fn is_standalone(&self) -> bool {
        false
    }

    /// The identity replicas of this node share towards a parent, when the
    /// election defines one (etcd: the election key).
    fn node_id(&self) -> Option<String> {
        None
    }

    /// Lists the servers campaigning in this node's election, master
    /// included, when the election can (etcd: every candidate's address);
    /// `None` when it cannot. For the tree at a glance only.
    fn replicas(&self) -> Option<ReplicasFuture> {
        None
    }
}

/// What [`Election::replicas`] returns: the addresses, or why not.
pub type ReplicasFuture = Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send>>;

/// Always master: one process per node.
#[derive(Debug, Clone, Copy, Default)]
pub struct Standalone;

impl Election for Standalone {
    fn run(&self, c: Candidacy) -> ElectionFuture {
        c.out.send_replace(MasterView {
            is_master: true,
            master: Some(c.me),
            ..MasterView::default()
        });
        Box::pin(std::future::ready(()))
    }

    fn is_standalone(&self) -> bool {
        true
    }
}

impl Candidacy {
    /// A candidacy for the server at `me` whose core is `core`.
    pub fn new(
        me: String,
        out: watch::Sender<MasterView>,
        stop: watch::Receiver<bool>,
        core: Arc<dyn Mastership>,
    ) -> Candidacy {
        Candidacy {
            me,
            out,
            stop,
            stop_granting: StopGranting::of(core.clone()),
            session: SessionFlag::of(core.clone()),
            horizon: LeaseHorizon::of(core.clone()),
            proof: MastershipProof::of(core),
        }
    }
}

/// The one clock read of this crate: the monotonic clock tokio's timers
/// run on.
mod clock {
    #![allow(clippy::disallowed_methods)]

    /// Now, on tokio's clock.
    pub fn instant() -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}
