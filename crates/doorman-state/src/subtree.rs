//! The tree below this server as it hears of it: the latest report of
//! each node that asks it for capacity (with when it came), its own
//! election's replicas, and this node's report with that subtree
//! ([`ServerState::tree`]), which an intermediate sends upstream and the
//! root's status page and `/api/v1/tree` show.
//!
//! Must not: decide anything (the reports are informational), keep more
//! than `MAX_REPORT_NODES` children, or keep a node forever: one not
//! heard from for `FORGET_AFTER_S` is forgotten.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use doorman_core::server::Status;
use doorman_core::tree::{node_of_status, TreeNode, FORGET_AFTER_S, MAX_REPORT_NODES};
use doorman_lease::{Span, Time};

use crate::ServerState;

/// This node's own report is rebuilt at most this often: it is a status
/// sweep of every resource (about 0.1 s of CPU for 100 000, see
/// BENCHMARKS.md), which an intermediate asking every second should not
/// pay each time.
const OWN_REPORT_EVERY: Span = Span::secs(5);

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

    /// A node below reported at `now` (under the id it asked with). At
    /// most `MAX_REPORT_NODES` nodes are kept: a report from one more is
    /// dropped until another is forgotten.
    pub fn record(&self, mut report: TreeNode, requester: &str, now: Time) {
        report.node_id = requester.to_string();
        let mut children = lock(&self.children);
        if children.len() >= MAX_REPORT_NODES && !children.contains_key(requester) {
            tracing::debug!(%requester, "tree report dropped: {MAX_REPORT_NODES} nodes known");
            return;
        }
        children.insert(requester.to_string(), (report, now));
    }

    /// The nodes below, each as old as it is at `now` and judged so; one
    /// not heard from for `FORGET_AFTER_S` is dropped (whatever it
    /// claimed of its leases).
    pub fn children(&self, now: Time) -> Vec<TreeNode> {
        let mut children = lock(&self.children);
        let mut out = Vec::with_capacity(children.len());
        children.retain(|_, (report, at)| {
            let silent = (now - *at).as_secs_f64();
            if silent > FORGET_AFTER_S {
                return false;
            }
            out.push(report.clone().aged(silent));
            true
        });
        out.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        out
    }
}

impl ServerState {
    /// This node and the nodes below it, for the report upstream: bounded
    /// to `MAX_REPORT_NODES`, its own part rebuilt at most every
    /// `OWN_REPORT_EVERY` (5 s).
    pub fn tree(&self) -> TreeNode {
        let now = self.now();
        let node = {
            let mut own = lock(&self.subtree.own);
            match &*own {
                Some((n, at)) if now - *at < OWN_REPORT_EVERY => {
                    let mut n = n.clone();
                    n.count_down((now - *at).as_secs_f64());
                    n
                }
                _ => {
                    let n = self.own_node(&self.status(0));
                    *own = Some((n.clone(), now));
                    n
                }
            }
        };
        self.with_children(node, now)
    }

    /// The same from `status`, a snapshot just taken (the pages).
    pub fn tree_of(&self, status: &Status) -> TreeNode {
        self.with_children(self.own_node(status), self.now())
    }

    fn own_node(&self, status: &Status) -> TreeNode {
        let id = lock(&self.subtree.node_id).clone();
        let replicas = lock(&self.subtree.replicas).clone();
        node_of_status(&id, status, replicas)
    }

    fn with_children(&self, mut node: TreeNode, now: Time) -> TreeNode {
        node.children = self.subtree.children(now);
        node.bounded(MAX_REPORT_NODES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use doorman_core::tree::Freshness;

    #[test]
    fn children_are_bounded_and_forgotten() {
        let t = Subtree::default();
        let at = Time::from_secs(1000);
        for i in 0..MAX_REPORT_NODES + 10 {
            t.record(TreeNode::default(), &format!("n{i}"), at);
        }
        assert_eq!(t.children(at).len(), MAX_REPORT_NODES);
        // Without leases: late, missing after a minute, forgotten after
        // ten more.
        let later = at + Span::secs(61);
        assert!(t
            .children(later)
            .iter()
            .all(|c| c.freshness == Freshness::Missing));
        assert!(t.children(at + Span::secs(601)).is_empty());
        t.record(TreeNode::default(), "new", at + Span::secs(601));
        assert_eq!(t.children(at + Span::secs(601)).len(), 1);
    }
}
