//! The server's hold on the core: the node-wide state and each resource
//! shard behind locks, and how many shards there are. Every rule (which
//! shard, what to decide, how whole-server work steps) is the core's
//! (`doorman_core::server::Sharded`); this file only locks.
//!
//! Each shard's mutex holds the shard and the node as that shard sees it
//! (an `Arc`), so a request takes one lock, its shard's: requests for
//! resources in different shards share no lock and no written cache line
//! (a read-write lock around the node would make every request write its
//! reader count; on the 2-vCPU VM of BENCHMARKS.md the two gave the same
//! throughput within its noise, `benches/threads.rs`). The node is also
//! kept behind a read-write lock for what reads only the node (the
//! access check's config, mastership for the status page). A change of the
//! node takes that lock for writing and then every shard's mutex, in
//! order, and installs the new node in all of them at once: it waits for
//! the shards' work in flight, and no shard ever sees the old node after
//! it returns (a step-down stops every grant before it returns).
//!
//! Lock order: the node's lock, then shards in index order. A request
//! takes one shard's lock and nothing else; nothing under a shard's lock
//! takes the node's (the core's shard work gets the node by reference).
//!
//! Must not: decide anything, or hold a lock across an await.

use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use doorman_core::config::Config;
use doorman_core::server::{CoreOptions, Node, ResourceShard, ShardAccess};

/// The default number of shards: four per CPU, a power of two, at most 64
/// (more shards than concurrent requests only cost memory).
pub fn default_shards() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 4).next_power_of_two().min(64)
}

/// A shard with the node as it sees it.
type NodeAndShard = (Arc<Node>, ResourceShard);

/// The core's node and shards, each behind its lock.
#[derive(Debug)]
pub struct LockedCore {
    node: RwLock<Arc<Node>>,
    shards: Box<[Mutex<NodeAndShard>]>,
}

impl LockedCore {
    /// `shards` shards (at least one) under a node that is not master yet.
    pub fn new(opts: CoreOptions, config: Arc<Config>, shards: usize) -> Self {
        let node = Arc::new(Node::new(opts, config));
        LockedCore {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new((node.clone(), ResourceShard::default())))
                .collect(),
            node: RwLock::new(node),
        }
    }

    /// How many shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The node, read whole: holding it delays every change of
    /// mastership, config or horizon (and so a step-down) until dropped.
    pub fn read_node(&self) -> RwLockReadGuard<'_, Arc<Node>> {
        self.node.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks shard `i`. A panic while holding a lock is a bug; its shard is
    /// still served rather than failing every later request.
    fn lock(&self, i: usize) -> MutexGuard<'_, NodeAndShard> {
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The core's entry points take `&mut` of their access: a shared
/// reference to the locks is one (`(&core).decide(..)`, or
/// `state.core().decide(..)`).
impl ShardAccess for &LockedCore {
    fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn node<R>(&mut self, f: impl FnOnce(&Node) -> R) -> R {
        f(&self.read_node())
    }

    fn node_mut<R>(&mut self, f: impl FnOnce(&mut Node) -> R) -> R {
        let mut node = self.node.write().unwrap_or_else(|e| e.into_inner());
        let mut shards: Vec<_> = (0..self.shards.len()).map(|i| self.lock(i)).collect();
        let mut changed = Node::clone(&node);
        let out = f(&mut changed);
        let changed = Arc::new(changed);
        for shard in &mut shards {
            shard.0 = changed.clone();
        }
        *node = changed;
        out
    }

    fn shard<R>(&mut self, i: usize, f: impl FnOnce(&Node, &mut ResourceShard) -> R) -> R {
        let mut guard = self.lock(i);
        let (node, shard) = &mut *guard;
        f(node, shard)
    }
}
