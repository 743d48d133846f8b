//! The server's hold on the core: the node-wide state behind a read-write
//! lock, each resource shard behind its own mutex, and how many shards
//! there are. Every rule (which shard, what to decide, how whole-server
//! work steps) is the core's (`doorman_core::server::Sharded`); this file
//! only locks.
//!
//! Lock order: the node's lock (shared for a shard's work, exclusive for a
//! change of mastership, config or horizon), then one shard's. No one holds
//! two shards' locks, and nothing under a shard's lock takes the node's
//! again (the core never asks: its shard work gets the node by reference),
//! so no order of requests can deadlock. A change of the node waits for
//! the shards' work in flight and is seen whole by every later one.
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

/// The core's node and shards, each behind its lock.
#[derive(Debug)]
pub struct LockedCore {
    node: RwLock<Node>,
    shards: Box<[Mutex<ResourceShard>]>,
}

impl LockedCore {
    /// `shards` shards (at least one) under a node that is not master yet.
    pub fn new(opts: CoreOptions, config: Arc<Config>, shards: usize) -> Self {
        LockedCore {
            node: RwLock::new(Node::new(opts, config)),
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(ResourceShard::default()))
                .collect(),
        }
    }

    /// How many shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The node, read whole: holding it delays every change of
    /// mastership, config or horizon (and so a step-down) until dropped.
    pub fn read_node(&self) -> RwLockReadGuard<'_, Node> {
        self.node.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks shard `i`. A panic while holding a lock is a bug; its shard is
    /// still served rather than failing every later request.
    fn lock(&self, i: usize) -> MutexGuard<'_, ResourceShard> {
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
        f(&self.node.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn node_mut<R>(&mut self, f: impl FnOnce(&mut Node) -> R) -> R {
        f(&mut self.node.write().unwrap_or_else(|e| e.into_inner()))
    }

    fn shard<R>(&mut self, i: usize, f: impl FnOnce(&Node, &mut ResourceShard) -> R) -> R {
        let node = self.node.read().unwrap_or_else(|e| e.into_inner());
        f(&node, &mut self.lock(i))
    }
}
