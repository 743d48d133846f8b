//! What a lease server holds once, whatever the number of its shards:
//! its options, the running config, mastership (am I master, since when,
//! until when provable, who is), what it knows of its predecessors, and
//! the lease bound it has recorded.
//!
//! Every shard reads it by reference ([`ResourceShard`] methods take a
//! `&Node`); changing it never walks the shards. What a change means for
//! the resources (a new master starts from empty tables) reaches each
//! shard through the node's `term`, the next time the shard is touched
//! (`ResourceShard::sync`).
//!
//! Must not: hold per-resource state, or read a clock.
//!
//! [`ResourceShard`]: super::ResourceShard

use std::sync::Arc;

use doorman_lease::Time;

use super::horizon::LearningClock;
use super::{CoreOptions, NotMaster, NotReady, Predecessors, Refusal, Role};
use crate::config::Config;

/// The node-wide state of a lease server.
#[derive(Debug)]
pub struct Node {
    pub(crate) opts: CoreOptions,
    pub(crate) config: Arc<Config>,
    /// Bumped by each reload; resources bound to an older one re-bind when
    /// next touched (`reload.rs`).
    pub(crate) config_gen: u64,
    pub(crate) is_master: bool,
    /// Mastership is proven only until then (an election's lease, which
    /// a successor cannot win before it ends); `None`: for good (a
    /// standalone server).
    master_until: Option<Time>,
    master_address: Option<String>,
    pub(crate) master_since: Time,
    /// What this master knows about its predecessors' leases (`horizon.rs`).
    pub(crate) predecessors: Predecessors,
    /// No lease handed out expires after this (`horizon.rs`).
    pub(crate) lease_bound: Option<Time>,
    /// A root waiting for its first config: what it waits for.
    config_pending: Option<String>,
    /// Bumped whenever the resource tables must start empty (this server
    /// became master, or stepped down).
    pub(crate) term: u64,
}

impl Node {
    /// A node that is not (yet) master.
    pub fn new(opts: CoreOptions, config: Arc<Config>) -> Self {
        let config = shadowed(&opts, config);
        Node {
            opts,
            config,
            config_gen: 0,
            is_master: false,
            master_until: None,
            master_address: None,
            master_since: Time::ZERO,
            predecessors: Predecessors::Unknown,
            lease_bound: None,
            config_pending: None,
            term: 0,
        }
    }

    /// The options.
    pub fn options(&self) -> &CoreOptions {
        &self.opts
    }

    /// The running config.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// True for a server with a parent.
    pub fn is_intermediate(&self) -> bool {
        self.opts.role == Role::Intermediate
    }

    /// True when this server is the master (whether it can still prove
    /// it at a given time: [`Node::mastership_at`]).
    pub fn is_master(&self) -> bool {
        self.is_master
    }

    /// This server can prove it is the master only until `until` (the end
    /// of its election lease as it knows it: a successor may be elected
    /// from then on); `None`: for good. Requests at or after it are
    /// refused as by a server that does not know the master, whatever the
    /// election task has noticed yet (a process paused past its lease,
    /// then resumed, answers before that task runs).
    pub fn set_master_until(&mut self, until: Option<Time>) {
        self.master_until = until;
    }

    /// Whether this server is the master at `now` as far as it can prove,
    /// and the master's address as far as it knows (its own id when it
    /// is; none once its proof has run out).
    pub fn mastership_at(&self, now: Time) -> (bool, Option<String>) {
        if self.proven_master(now) {
            return (true, Some(self.opts.server_id.clone()));
        }
        match self.is_master {
            true => (false, None),
            false => (false, self.master_address.clone()),
        }
    }

    /// Master, and still able to prove it at `now`.
    pub(crate) fn proven_master(&self, now: Time) -> bool {
        self.is_master && self.master_until.is_none_or(|u| now < u)
    }

    /// The master's address as far as this server knows (its own id when
    /// it is the master).
    pub fn master_address(&self) -> Option<&str> {
        if self.is_master {
            Some(&self.opts.server_id)
        } else {
            self.master_address.as_deref()
        }
    }

    /// This server won the election at `now`: fresh empty state, learning
    /// mode starts for every resource and lasts its full duration (nothing
    /// is known about the predecessors: see [`Node::become_master_after`]).
    pub fn become_master(&mut self, now: Time) {
        self.term += 1;
        self.is_master = true;
        self.master_address = None;
        self.master_since = now;
        self.predecessors = Predecessors::Unknown;
    }

    /// This server won the election at `now`, knowing `predecessors`:
    /// fresh empty state, each resource learning until
    /// `LearningClock::end`. Set the lease bound (if this server keeps a
    /// record) before the first request.
    pub fn become_master_after(&mut self, now: Time, predecessors: Predecessors) {
        self.become_master(now);
        self.predecessors = predecessors;
    }

    /// This server is not (or no longer) the master: drop all lease state
    /// and redirect to `master` (unknown if `None`).
    pub fn step_down(&mut self, master: Option<String>) {
        self.term += 1;
        self.is_master = false;
        self.master_address = master;
    }

    /// The master changed while this server is not master.
    pub fn set_master_address(&mut self, master: Option<String>) {
        if !self.is_master {
            self.master_address = master;
        }
    }

    /// Why a request cannot be answered, if it cannot: `master` says
    /// whether this server is the master for it (proven at the request's
    /// time for a grant; a release only forgets, so any master may).
    pub(crate) fn refusal(&self, master: bool) -> Option<Refusal> {
        if !master {
            // A master whose proof ran out does not know who is master now.
            let master_address = match self.is_master {
                true => None,
                false => self.master_address.clone(),
            };
            return Some(Refusal::NotMaster(NotMaster { master_address }));
        }
        self.config_pending.clone().map(Refusal::NoConfig)
    }

    /// A server that starts without the config it was given (its etcd key
    /// not pushed yet or etcd not answering, its file missing or empty)
    /// waits: every request is refused with `reason` until
    /// [`Node::replace_config`] brings one. An intermediate waits too:
    /// the config may hold access rules, and serving without them would
    /// let anyone in (one started with no config at all never waits).
    pub fn wait_for_config(&mut self, reason: impl Into<String>) {
        self.config_pending = Some(reason.into());
    }

    /// True while the server waits for its first config.
    pub fn waiting_for_config(&self) -> bool {
        self.config_pending.is_some()
    }

    /// Replaces the config (already validated; see `reload.rs` for what
    /// a reload does to resources and leases). Returns the old config, so
    /// the caller can drop it (50 000 templates take milliseconds to
    /// free) outside any lock.
    pub fn replace_config(&mut self, config: Arc<Config>) -> Arc<Config> {
        self.config_pending = None;
        self.config_gen += 1;
        let config = shadowed(&self.opts, config);
        std::mem::replace(&mut self.config, config)
    }

    /// The node's part of readiness: an error, ready (`None`: a standby
    /// that knows the master), or `Some(())` for a master whose shards'
    /// upstream leases are still to judge.
    pub(crate) fn readiness(&self, now: Time) -> Result<Option<()>, NotReady> {
        if let Some(reason) = &self.config_pending {
            return Err(NotReady::NoConfig(reason.clone()));
        }
        if self.is_master && !self.proven_master(now) {
            return Err(NotReady::ProofRunOut);
        }
        if !self.is_master {
            return match &self.master_address {
                Some(_) => Ok(None),
                None => Err(NotReady::MasterUnknown),
            };
        }
        Ok(Some(()))
    }

    /// No lease this server hands out from now on expires after `bound`
    /// (the horizon it has recorded); `None`: no bound (a server that keeps
    /// no record).
    pub fn set_lease_bound(&mut self, bound: Option<Time>) {
        self.lease_bound = bound;
    }

    /// The bound set by [`Node::set_lease_bound`].
    pub fn lease_bound(&self) -> Option<Time> {
        self.lease_bound
    }

    /// When learning ends for this master's resources.
    pub(crate) fn learning_clock(&self) -> LearningClock {
        LearningClock {
            since: self.master_since,
            predecessors: self.predecessors,
        }
    }
}

/// `config` as this node runs it: every resource in shadow mode when
/// the options say so.
fn shadowed(opts: &CoreOptions, config: Arc<Config>) -> Arc<Config> {
    if opts.shadow_all && !config.shadows_all() {
        Arc::new((*config).clone().shadowing_all())
    } else {
        config
    }
}
