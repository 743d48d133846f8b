//! The lease server's core: a synchronous state machine that never reads a
//! clock, sleeps or touches a socket. Every entry point takes `now`.
//!
//! It owns the node-wide state once ([`Node`]: mastership from the core's
//! point of view — am I master, since when, who is —, the current config,
//! the lease horizon) and the per-resource state in shards
//! ([`ResourceShard`]: learning mode, decisions, cleanup), each shard
//! taking the node by reference. [`Sharded`] is every entry point, over
//! any way of holding them ([`ShardAccess`]): plainly here
//! ([`ServerCore`]), behind locks in the server. The gRPC service, the
//! election task and the config watcher are thin adapters that call it
//! with the real time; tests and the simulation call it with virtual time.
//!
//! Must not: do I/O, read the clock, or panic on anything a request or a
//! config can contain.

mod absent;
mod counts;
mod deadlines;
mod decide;
mod grants;
mod horizon;
mod index;
mod lowered;
mod node;
mod office;
mod open_share;
mod push;
mod push_budget;
mod record;
mod reload;
mod request;
mod resource;
mod shard;
mod sharded;
mod status;
mod succession;
mod sweep;
mod upstream;

use std::sync::Arc;

use doorman_lease::Span;

pub use horizon::{
    HorizonLead, Predecessors, UpstreamReach, HORIZON_AHEAD, HORIZON_CLOCK_MARGIN,
    HORIZON_RENEW_BEFORE, INTERMEDIATE_LEAD, ROOT_LEAD,
};
pub use node::Node;
pub use office::{take_office, HorizonRecord, Office, PLAUSIBLE_AHEAD};
pub use push::{Candidates, Push, PushRule, PUSH_BATCH, PUSH_RULE};
pub use push_budget::{PushBudget, PushBudgetRule, PUSH_BUDGET};
pub use request::{
    CapacityRequest, Claim, Decision, Grant, GrantNote, NotMaster, Refusal, ResourceAsk,
    UpstreamAsk, UpstreamGrant, Who,
};
pub use shard::ResourceShard;
pub use sharded::{shard_of, Decided, ShardAccess, Sharded};
pub use status::{
    BandStatus, LeaseStatus, LinkStatus, ResourceGauge, ResourceStatus, Status, TemplateStatus,
    UpstreamGauge, UpstreamStatus,
};
pub use sweep::{whole_pass, DECIDE_STEP, STATUS_STEP, SWEEP_STEP};
pub use upstream::{MIN_UPSTREAM_INTERVAL, PENDING_LEARNING};

use crate::config::Config;

/// Where a server's capacity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// The root: capacity from the config.
    #[default]
    Root,
    /// Below the root: capacity leased from a parent.
    Intermediate,
}

/// Settings of a core.
#[derive(Debug, Clone)]
pub struct CoreOptions {
    /// Root or intermediate.
    pub role: Role,
    /// This server's id: what Discovery returns as the master address.
    pub server_id: String,
    /// A repeat request from the same requester for the same resource
    /// inside this interval gets the lease it holds without a new decision
    /// (`Time::ZERO` disables).
    pub min_request_interval: Span,
    /// Every resource in shadow mode (`--shadow`): each config the core
    /// takes is [`Config::shadowing_all`]'s.
    pub shadow_all: bool,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            role: Role::Root,
            server_id: "doorman".into(),
            min_request_interval: Span::secs(1),
            shadow_all: false,
        }
    }
}

/// Counters the core keeps (exported as metrics by the adapters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Resource requests no template matched.
    pub unmatched_requests: u64,
    /// Leases removed because they expired.
    pub expired_leases: u64,
}

/// Why a server cannot serve right now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// A root (or an intermediate with access rules) waits for its config.
    #[error("no config yet: {0}")]
    NoConfig(String),
    /// A master that can no longer prove it is one.
    #[error("the master's election lease may have run out")]
    ProofRunOut,
    /// A standby that does not know the master.
    #[error("not the master, and the master is unknown")]
    MasterUnknown,
    /// An intermediate master without a valid lease from its parent for
    /// this many resources in use (and none still learning).
    #[error("no valid lease from the parent for {0} resource(s) in use")]
    CutOff(usize),
}

/// A master's resources in use without a valid upstream lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseGap {
    cut_off: usize,
    learning: bool,
}

impl LeaseGap {
    pub(crate) fn add(&mut self, other: LeaseGap) {
        self.cut_off += other.cut_off;
        self.learning |= other.learning;
    }

    /// Not ready while resources in use have no upstream lease, unless
    /// some resource is still learning.
    pub(crate) fn verdict(self) -> Result<(), NotReady> {
        if self.cut_off > 0 && !self.learning {
            return Err(NotReady::CutOff(self.cut_off));
        }
        Ok(())
    }
}

/// The core with its node and shards held plainly, for a single caller: the
/// simulator, tests and tools. Every entry point is [`Sharded`]'s, the
/// same a server runs over its locks.
#[derive(Debug)]
pub struct ServerCore {
    node: Node,
    shards: Vec<ResourceShard>,
}

impl ServerCore {
    /// A core of one shard that is not (yet) master. Call
    /// [`Sharded::become_master`] when the election is won (at once for a
    /// standalone server).
    pub fn new(opts: CoreOptions, config: Arc<Config>) -> Self {
        ServerCore::with_shards(opts, config, 1)
    }

    /// A core of `shards` shards (at least one).
    pub fn with_shards(opts: CoreOptions, config: Arc<Config>, shards: usize) -> Self {
        ServerCore {
            node: Node::new(opts, config),
            shards: (0..shards.max(1))
                .map(|_| ResourceShard::default())
                .collect(),
        }
    }

    /// The node-wide state.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The options.
    pub fn options(&self) -> &CoreOptions {
        &self.node.opts
    }

    /// The current lease of a requester, if any.
    #[cfg(test)]
    pub(crate) fn lease_of(
        &mut self,
        resource_id: &str,
        who: &Who,
    ) -> Option<doorman_lease::Lease> {
        let i = self.shard_index(resource_id);
        self.with_shard(i, |_, s| s.lease_of(resource_id, who))
    }
}

impl ShardAccess for ServerCore {
    fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn node<R>(&mut self, f: impl FnOnce(&Node) -> R) -> R {
        f(&self.node)
    }

    fn node_mut<R>(&mut self, f: impl FnOnce(&mut Node) -> R) -> R {
        f(&mut self.node)
    }

    fn shard<R>(&mut self, i: usize, f: impl FnOnce(&Node, &mut ResourceShard) -> R) -> R {
        f(&self.node, &mut self.shards[i])
    }
}

#[cfg(test)]
mod tests;
