//! Validated requests going into the core and grants coming out (to
//! requesters, and from a parent): the core's own types, free of
//! protobufs. `doorman-wire`'s `validate.rs`
//! builds them from the wire; the simulator builds them directly.
//!
//! Must not: validate (the shells do) or decide anything.

use std::fmt;
use std::sync::Arc;

use doorman_lease::{Amount, Demand, Lease, Span, Time};

use crate::config::AlgorithmConfig;

/// Who is asking: an end client or a downstream server. The two live in
/// separate namespaces. With authentication, an id is owned by the
/// caller's identity ([`Who::owned_by`]): the same client id used by two
/// identities names two requesters, neither able to touch the other's
/// leases.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Who {
    /// An end client (GetCapacity).
    Client(Arc<str>),
    /// A downstream server (GetServerCapacity).
    Server(Arc<str>),
}

/// Separates an owned id from its owner. Ids and identities never contain
/// control characters (the shells refuse them), so the split at the last
/// separator is unambiguous.
const OWNER_SEPARATOR: char = '\u{1f}';

impl Who {
    /// The id without its kind (with its owner, if owned).
    pub fn id(&self) -> &str {
        match self {
            Who::Client(s) | Who::Server(s) => s,
        }
    }

    /// The same requester owned by `owner` (unchanged without one).
    pub fn owned_by(self, owner: Option<&str>) -> Who {
        let Some(owner) = owner else { return self };
        let own = |id: &str| Arc::from(format!("{id}{OWNER_SEPARATOR}{owner}"));
        match self {
            Who::Client(id) => Who::Client(own(&id)),
            Who::Server(id) => Who::Server(own(&id)),
        }
    }

    /// The id as the requester sent it, and its owner if owned.
    pub fn parts(&self) -> (&str, Option<&str>) {
        match self.id().rsplit_once(OWNER_SEPARATOR) {
            Some((id, owner)) => (id, Some(owner)),
            None => (self.id(), None),
        }
    }

    /// The id for people: `id` or `id (owner)`.
    pub fn display_id(&self) -> String {
        match self.parts() {
            (id, Some(owner)) => format!("{id} ({owner})"),
            (id, None) => id.to_string(),
        }
    }

    /// "client" or "server".
    pub fn kind(&self) -> &'static str {
        match self {
            Who::Client(_) => "client",
            Who::Server(_) => "server",
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind(), self.display_id())
    }
}

/// One resource of a request, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceAsk {
    /// The resource.
    pub resource_id: String,
    /// One demand per band (one for an end client).
    pub demands: Vec<Demand>,
    /// The lease the requester says it holds (its `has`), if any.
    pub claim: Option<Claim>,
    /// For downstream servers: what it has handed out itself (extension).
    pub outstanding: Option<Amount>,
}

impl ResourceAsk {
    /// The capacity of the lease the requester says it holds.
    pub fn claimed_has(&self) -> Option<Amount> {
        self.claim.map(|c| c.has)
    }
}

/// A lease a requester says it holds, as it sent it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    /// Its capacity.
    pub has: Amount,
    /// Its refresh interval, seconds: how often the requester comes back
    /// (a new intermediate master waits until all its requesters have
    /// re-reported before asking upstream).
    pub refresh: i64,
    /// When it ends by the requester's word: the absolute end it sent, in
    /// the clock of whoever granted it (a new intermediate master does
    /// not wait so long that it runs out before it can be renewed; an
    /// echo of it does not outlive it).
    pub expiry: Time,
    /// What it has left by the requester's own clock when it sent the
    /// request (`remaining_ms`), if it said: then the claim ends that long
    /// after this server's `now`, whatever the clocks say.
    pub remaining: Option<Span>,
}

impl Claim {
    /// The claim of `lease`, whose capacity the caller checked: `has`,
    /// without a remaining length (see [`Claim::remaining`]).
    pub fn of(lease: &Lease, has: Amount) -> Self {
        Claim {
            has,
            refresh: lease.refresh_interval,
            expiry: lease.expiry,
            remaining: None,
        }
    }

    /// The claim of a lease a requester held at `now` (its clock), as it
    /// sends it: with what it has left.
    pub fn held(lease: &Lease, has: Amount, now: Time) -> Self {
        Claim {
            remaining: Some(lease.remaining(now)),
            ..Claim::of(lease, has)
        }
    }

    /// When the claimed lease ends, on this server's clock at `now`: its
    /// remaining length from now if the requester sent one (the request
    /// left before now, so this is no earlier than the requester's own
    /// end), else the absolute end it sent.
    pub fn end(&self, now: Time) -> Time {
        self.remaining.map_or(self.expiry, |r| now + r)
    }
}

/// A whole GetCapacity or GetServerCapacity request, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRequest {
    /// The requester.
    pub who: Who,
    /// Its resources, each at most once.
    pub resources: Vec<ResourceAsk>,
}

/// How a grant was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The resource's algorithm ran.
    Algorithm,
    /// Learning mode: the claimed `has` was echoed.
    Learning,
    /// Repeat request inside the minimum request interval: the lease held
    /// was returned unchanged.
    Repeat,
    /// No template matches: granted what was asked for.
    Unmatched,
    /// An intermediate server that has not heard from its parent yet and
    /// has no local template to bound it cannot honour a claimed `has`:
    /// nothing is granted and the resource is left out of the answer (the
    /// requester keeps the lease it holds and asks again).
    Pending,
}

/// The answer for one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The resource.
    pub resource_id: String,
    /// The lease granted.
    pub lease: Lease,
    /// When it was decided (this server's `now`): the lease's remaining
    /// length on the wire counts from here.
    pub at: Time,
    /// Capacity to use in safe mode.
    pub safe_capacity: f64,
    /// The algorithm configuration used for the lease.
    pub algorithm: Arc<AlgorithmConfig>,
    /// False while an intermediate server has not heard from its parent:
    /// the algorithm is a placeholder and is not sent downstream.
    pub algorithm_known: bool,
    /// How it was decided.
    pub decision: Decision,
    /// The resource is in shadow mode: the holder counts what it would
    /// have refused and enforces nothing (`Template::shadow`).
    pub shadow: bool,
    /// Why the grant may be smaller than asked for, for people reading it
    /// (`doorman get`): learning mode or no word from the parent yet.
    pub note: Option<GrantNote>,
    /// For a downstream server granted less than it is owed: ask again
    /// after this many seconds, sooner than the lease's refresh interval,
    /// which stays as it is (it sets the server's own requesters'
    /// intervals). `None` for clients (their refresh interval itself is
    /// shortened) and for everyone not waiting.
    pub next_refresh_interval: Option<i64>,
    /// For a downstream server that asked without claiming a lease (a
    /// newly elected master), when this server is past learning mode: the
    /// most capacity its predecessors' sub-leases can still hold (what this
    /// server counted as taken by it, 0 if nothing).
    pub predecessor_out: Option<f64>,
    /// Until when that holds, on this server's clock: the end of the
    /// latest grant it counted it from (their sub-leases never outlive
    /// them); from then on nothing of the predecessors' can be out.
    pub predecessor_until: Option<Time>,
}

/// Why a grant may be small, told to the requester beside the lease.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GrantNote {
    /// Learning mode: claims are echoed, nothing new is handed out, for
    /// this many more seconds.
    Learning {
        /// Seconds left.
        seconds_left: f64,
    },
    /// An intermediate server without a valid lease from its parent.
    WaitingForParent,
}

impl std::fmt::Display for GrantNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantNote::Learning { seconds_left } => {
                write!(f, "learning mode, {:.0} s left", seconds_left.ceil())
            }
            GrantNote::WaitingForParent => f.write_str("no valid lease from the parent"),
        }
    }
}

impl GrantNote {
    /// Reads a note as [`Display`](std::fmt::Display) writes it (what a
    /// client receives in `doorman-note`); `None` for any other text.
    pub fn parse(text: &str) -> Option<GrantNote> {
        if text == "no valid lease from the parent" {
            return Some(GrantNote::WaitingForParent);
        }
        let secs = text
            .strip_prefix("learning mode, ")?
            .strip_suffix(" s left")?;
        let seconds_left = secs.parse::<f64>().ok().filter(|s| s.is_finite())?;
        Some(GrantNote::Learning { seconds_left })
    }
}

/// This server is not the master; ask `master_address` (unknown if `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotMaster {
    /// The current master, if known.
    pub master_address: Option<String>,
}

/// Why the core did not answer a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not the master: the requester should ask the master.
    NotMaster(NotMaster),
    /// A root without a config yet (it waits for one): nothing can be
    /// granted; the reason says what it waits for.
    NoConfig(String),
}

/// One resource of a bulk GetServerCapacity.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamAsk {
    /// The resource.
    pub resource_id: String,
    /// Our unexpired lease from the parent.
    pub has: Option<Lease>,
    /// One (priority, Σ subclients, Σ wants) per band present.
    pub bands: Vec<(i64, i64, f64)>,
    /// Σ unexpired has we handed out.
    pub outstanding: f64,
}

/// One resource of the parent's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamGrant {
    /// The resource.
    pub resource_id: String,
    /// The lease (expiry in whole seconds, as on the wire).
    pub lease: Lease,
    /// The algorithm the parent says to use.
    pub algorithm: Option<AlgorithmConfig>,
    /// Per-client safe capacity the parent computed.
    pub safe_capacity: Option<f64>,
    /// Ask again after this many seconds (the parent's
    /// `Grant::next_refresh_interval`), sooner than the lease says.
    pub next_refresh_interval: Option<i64>,
    /// The parent's `Grant::predecessor_out`.
    pub predecessor_out: Option<f64>,
    /// Until when it holds, on this server's clock (`None` from a parent
    /// that does not say: for good).
    pub predecessor_until: Option<Time>,
    /// The parent serves the resource in shadow mode.
    pub shadow: bool,
}
