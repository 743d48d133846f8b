//! The tree below this server as it hears of it: the latest report of
//! each node that asks it for capacity (with when it came), its own
//! election's replicas, and this node's report with that subtree
//! ([`ServerState::tree`]), which an intermediate sends upstream and the
//! root's status page and `/api/v1/tree` show.
//!
//! Must not: decide anything (the reports are informational) or keep a
//! node forever: one missing for `FORGET_AFTER_S` is forgotten.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use doorman_core::tree::{node_of_status, Freshness, TreeNode, FORGET_AFTER_S, MAX_REPORT_NODES};
use doorman_lease::{Span, Time};

use crate::ServerState;

/// This node's own report is rebuilt at most this often (a status sweep).
const OWN_REPORT_EVERY: Span = Span::secs(1);

/// What this server knows of the tree below it.
#[derive(Debug, Default)]
pub struct Subtree {
    /// The id this node goes by towards its parent.
    node_id: Mutex<String>,
    /// The servers of its election (empty: not known).
    replicas: Mutex<Vec<String>>,
    /// Each reporting node's latest report and when it came.
    children: Mutex<HashMap<String, (TreeNode, Time)>>,
    /// This node's report, when it was built.
    own: Mutex<Option<(TreeNode, Time)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Subtree {
    /// Names this node (its election key, or its server id).
    pub fn set_node_id(&self, id: &str) {
        *lock(&self.node_id) = id.to_string();
    }

    /// Its election's servers, as the election last listed them.
    pub fn set_replicas(&self, mut replicas: Vec<String>) {
        replicas.sort();
        *lock(&self.replicas) = replicas;
    }

    /// A node below reported at `now` (under the id it asked with).
    pub fn record(&self, mut report: TreeNode, requester: &str, now: Time) {
        report.node_id = requester.to_string();
        lock(&self.children).insert(requester.to_string(), (report, now));
    }

    /// The nodes below, each as old as it is at `now` and judged so; one
    /// missing for `FORGET_AFTER_S` is dropped.
    pub fn children(&self, now: Time) -> Vec<TreeNode> {
        let mut children = lock(&self.children);
        let mut out = Vec::with_capacity(children.len());
        children.retain(|_, (report, at)| {
            let aged = report.clone().aged((now - *at).as_secs_f64());
            let forget = aged.freshness == Freshness::Missing && aged.age_s > FORGET_AFTER_S;
            if !forget {
                out.push(aged);
            }
            !forget
        });
        out.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        out
    }
}

impl ServerState {
    /// This node and the nodes below it as it knows them now, bounded to
    /// `MAX_REPORT_NODES` (its own part rebuilt at most once a second).
    pub fn tree(&self) -> TreeNode {
        let now = self.now();
        let mut node = {
            let mut own = lock(&self.subtree.own);
            match &*own {
                Some((n, at)) if now - *at < OWN_REPORT_EVERY => n.clone(),
                _ => {
                    let id = lock(&self.subtree.node_id).clone();
                    let replicas = lock(&self.subtree.replicas).clone();
                    let n = node_of_status(&id, &self.status(0), replicas);
                    *own = Some((n.clone(), now));
                    n
                }
            }
        };
        node.children = self.subtree.children(now);
        node.bounded(MAX_REPORT_NODES)
    }
}
