//! The tree at a glance: what each node reports of itself and of the
//! nodes below it ([`TreeNode`]), the rule by which a node's view is
//! judged fresh, late or missing as it ages ([`TreeNode::aged`]), and the
//! bounds that keep a report small however large the tree
//! ([`TreeNode::bounded`]). Each intermediate sends its report upstream
//! with its capacity requests (`GetServerCapacityRequest.report`); the
//! root's status page and `doorman tree` draw the result.
//!
//! Informational only: nothing here takes part in a decision.
//!
//! Must not: do I/O or read a clock (ages are handed in).

use serde::{Deserialize, Serialize};

use crate::server::{ResourceStatus, Status};

/// The most nodes one report holds (the sender's own included); a
/// receiver refuses a report with more.
pub const MAX_REPORT_NODES: usize = 256;
/// The most resources one node of a report lists (those with the most
/// capacity); the rest are counted in `omitted_resources`.
pub const MAX_REPORT_RESOURCES: usize = 16;
/// The most levels a report holds below its sender.
pub const MAX_REPORT_DEPTH: usize = 32;
/// The most replicas one node of a report lists.
pub const MAX_REPORT_REPLICAS: usize = 16;
/// The most priority bands one resource of a report lists (the highest).
pub const MAX_REPORT_BANDS: usize = 16;
/// A late node that reported no upstream lease is missing after this
/// long (one with leases: once they can all have run out).
pub const NO_LEASE_MISSING_S: f64 = 60.0;
/// A node not heard from for this long is forgotten.
pub const FORGET_AFTER_S: f64 = 600.0;

/// How current a node's view is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    /// Heard from within twice its report interval (and a second).
    #[default]
    Fresh,
    /// Not heard from for longer: a report or two lost, or it is slow.
    Late,
    /// Not heard from for longer than its longest lease from its parent
    /// had left: whatever it held has expired.
    Missing,
}

/// One resource of a node.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TreeResource {
    /// The resource.
    pub id: String,
    /// What the node shares: its lease from its parent (the template's
    /// capacity at the root).
    pub capacity: f64,
    /// Σ of what it handed out.
    pub has: f64,
    /// What its requesters want per band: (priority, clients, Σ wants),
    /// highest priority first.
    pub bands: Vec<(i64, i64, f64)>,
    /// Seconds its lease from the parent has left, as far as this view
    /// knows (counted down as it ages; none at the root).
    pub lease_left_s: Option<f64>,
    /// In learning mode.
    pub learning: bool,
    /// In shadow mode.
    pub shadow: bool,
}

impl TreeResource {
    /// Σ wants over the bands.
    pub fn wants(&self) -> f64 {
        self.bands.iter().map(|b| b.2).sum()
    }

    /// Its modes beside the normal one: "learning", "shadow".
    pub fn modes(&self) -> Vec<&'static str> {
        [(self.learning, "learning"), (self.shadow, "shadow")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect()
    }
}

/// One node of the tree and the nodes below it, as its parent last heard.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TreeNode {
    /// The id it asks its parent under (its election key, or its address).
    pub node_id: String,
    /// Its master's address.
    pub master: Option<String>,
    /// Every server in its election, master included (empty when it does
    /// not know: standalone, or no etcd).
    pub replicas: Vec<String>,
    /// Its level (0: the root).
    pub level: Option<i64>,
    /// Its resources, most capacity first.
    pub resources: Vec<TreeResource>,
    /// The nodes that report to it.
    pub children: Vec<TreeNode>,
    /// How old this view is, seconds.
    pub age_s: f64,
    /// How often it reports at least, seconds.
    pub report_interval_s: f64,
    /// Fresh, late or missing, by [`TreeNode::aged`].
    pub freshness: Freshness,
    /// Nodes below it left out of the report.
    pub omitted_nodes: u64,
    /// Resources of it left out of the report.
    pub omitted_resources: u64,
}

impl TreeNode {
    /// This view `elapsed` seconds later, every node below it too, each
    /// judged: late past twice its report interval and a second; missing
    /// when late and its longest upstream lease can have run out (a node
    /// that keeps reporting is not missing, whatever its leases).
    /// Each upstream lease's time left counts down with it.
    pub fn aged(mut self, elapsed: f64) -> TreeNode {
        let elapsed = elapsed.max(0.0);
        self.age_s += elapsed;
        self.count_down(elapsed);
        let longest = self
            .resources
            .iter()
            .filter_map(|r| r.lease_left_s)
            .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l))));
        let late = self.age_s > 2.0 * self.report_interval_s + 1.0;
        self.freshness = match longest {
            _ if !late => Freshness::Fresh,
            Some(l) if l <= 0.0 => Freshness::Missing,
            None if self.age_s > NO_LEASE_MISSING_S => Freshness::Missing,
            _ => Freshness::Late,
        };
        self.children = self.children.into_iter().map(|c| c.aged(elapsed)).collect();
        self
    }

    /// Its upstream leases' time left, `elapsed` seconds later (the node
    /// itself, not those below it).
    pub fn count_down(&mut self, elapsed: f64) {
        for r in &mut self.resources {
            if let Some(left) = r.lease_left_s.as_mut() {
                *left -= elapsed.max(0.0);
            }
        }
    }

    /// This node with at most `max_nodes` nodes in all (itself
    /// included, breadth first: the levels nearest it are kept, at most
    /// [`MAX_REPORT_DEPTH`] below it) and at most [`MAX_REPORT_RESOURCES`]
    /// resources each, most capacity first (each with its
    /// [`MAX_REPORT_BANDS`] highest bands), [`MAX_REPORT_REPLICAS`]
    /// replicas; what is left out is counted in the omitted fields.
    pub fn bounded(mut self, max_nodes: usize) -> TreeNode {
        let mut budget = max_nodes.saturating_sub(1);
        bound_level(std::slice::from_mut(&mut self), &mut budget, 0);
        self
    }

    /// Its replicas other than its master (the standbys).
    pub fn standbys(&self) -> Vec<&str> {
        self.replicas
            .iter()
            .map(String::as_str)
            .filter(|r| Some(*r) != self.master.as_deref())
            .collect()
    }

    /// How many nodes it holds, itself included.
    pub fn count(&self) -> usize {
        1 + self.children.iter().map(TreeNode::count).sum::<usize>()
    }

    /// Every node of it, depth first, itself first, with its depth below
    /// it.
    pub fn walk(&self) -> Vec<(usize, &TreeNode)> {
        let mut out = Vec::new();
        let mut stack = vec![(0, self)];
        while let Some((d, n)) = stack.pop() {
            out.push((d, n));
            stack.extend(n.children.iter().rev().map(|c| (d + 1, c)));
        }
        out
    }
}

/// This node as its status shows it, without the nodes below it: its
/// resources (capacity, Σ has, wants per band, the upstream lease's time
/// left), level and master; `replicas` from its election. It reports at
/// least as often as its shortest upstream refresh interval (5 s without
/// one).
pub fn node_of_status(node_id: &str, status: &Status, replicas: Vec<String>) -> TreeNode {
    let resources = status.resources.iter().map(resource_of_status).collect();
    let report_interval_s = status
        .resources
        .iter()
        .filter_map(|r| r.upstream.as_ref()?.refresh_interval)
        .min()
        .map_or(5.0, |s| s as f64);
    TreeNode {
        node_id: node_id.to_string(),
        master: if status.is_master {
            Some(status.server_id.clone())
        } else {
            status.master_address.clone()
        },
        replicas,
        level: status.level.map(i64::from),
        resources,
        report_interval_s,
        ..TreeNode::default()
    }
}

fn resource_of_status(r: &ResourceStatus) -> TreeResource {
    TreeResource {
        id: r.id.clone(),
        capacity: r.capacity,
        has: r.has,
        bands: r
            .bands
            .iter()
            .map(|b| (b.priority, b.subclients.round() as i64, b.wants))
            .collect(),
        lease_left_s: r.upstream.as_ref().and_then(|u| u.expires_in),
        learning: r.learning,
        shadow: r.shadow,
    }
}

/// One node's own lists, bounded.
fn bound_node(n: &mut TreeNode) {
    n.resources
        .sort_by(|a, b| b.capacity.total_cmp(&a.capacity).then(a.id.cmp(&b.id)));
    if n.resources.len() > MAX_REPORT_RESOURCES {
        let cut = (n.resources.len() - MAX_REPORT_RESOURCES) as u64;
        n.omitted_resources = n.omitted_resources.saturating_add(cut);
        n.resources.truncate(MAX_REPORT_RESOURCES);
    }
    for r in &mut n.resources {
        r.bands.truncate(MAX_REPORT_BANDS);
    }
    n.replicas.truncate(MAX_REPORT_REPLICAS);
}

/// Bounds one level of nodes: their resources, then as many of their
/// children as `budget` allows (the rest counted), then the next level.
fn bound_level(level: &mut [TreeNode], budget: &mut usize, depth: usize) {
    let mut next: Vec<&mut TreeNode> = Vec::new();
    for n in level.iter_mut() {
        bound_node(n);
        let room = if depth < MAX_REPORT_DEPTH { *budget } else { 0 };
        let keep = n.children.len().min(room);
        *budget -= keep;
        let dropped: Vec<TreeNode> = n.children.drain(keep..).collect();
        for d in &dropped {
            let below = d.walk().iter().fold(0u64, |s, (_, x)| {
                s.saturating_add(1).saturating_add(x.omitted_nodes)
            });
            n.omitted_nodes = n.omitted_nodes.saturating_add(below);
        }
    }
    for n in level.iter_mut() {
        next.extend(n.children.iter_mut());
    }
    if next.is_empty() {
        return;
    }
    // Each node's children form one slice; bound them level by level.
    let mut owned: Vec<TreeNode> = next.iter_mut().map(|n| std::mem::take(*n)).collect();
    bound_level(&mut owned, budget, depth + 1);
    for (slot, n) in next.into_iter().zip(owned) {
        *slot = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, children: Vec<TreeNode>) -> TreeNode {
        TreeNode {
            node_id: id.into(),
            report_interval_s: 5.0,
            resources: vec![TreeResource {
                id: "r".into(),
                capacity: 10.0,
                lease_left_s: Some(20.0),
                ..TreeResource::default()
            }],
            children,
            ..TreeNode::default()
        }
    }

    #[test]
    fn a_view_turns_late_then_missing_as_it_ages() {
        let n = node("a", vec![node("b", vec![])]);
        assert_eq!(n.clone().aged(11.0).freshness, Freshness::Fresh);
        let late = n.clone().aged(11.5);
        assert_eq!(late.freshness, Freshness::Late);
        assert_eq!(late.children[0].freshness, Freshness::Late);
        let gone = n.aged(20.5);
        assert_eq!(gone.freshness, Freshness::Missing);
        assert_eq!(gone.age_s, 20.5);
        assert_eq!(gone.resources[0].lease_left_s, Some(-0.5));
    }

    #[test]
    fn a_node_that_keeps_reporting_is_never_missing() {
        let mut n = node("a", vec![]);
        n.resources[0].lease_left_s = Some(-3.0);
        assert_eq!(n.clone().aged(2.0).freshness, Freshness::Fresh);
        assert_eq!(n.clone().aged(11.5).freshness, Freshness::Missing);
        n.resources.clear();
        assert_eq!(n.clone().aged(59.0).freshness, Freshness::Late);
        assert_eq!(n.aged(61.0).freshness, Freshness::Missing);
    }

    #[test]
    fn a_report_keeps_the_nearest_levels_and_counts_the_rest() {
        let leaves = |p: &str| (0..4).map(|i| node(&format!("{p}.{i}"), vec![])).collect();
        let mids: Vec<TreeNode> = (0..3)
            .map(|i| node(&format!("m{i}"), leaves(&format!("m{i}"))))
            .collect();
        let root = node("root", mids);
        assert_eq!(root.count(), 16);
        let b = root.clone().bounded(6);
        assert_eq!(b.count(), 6, "{b:#?}");
        assert_eq!(b.children.len(), 3, "the nearest level first");
        let omitted: u64 = b.walk().iter().map(|(_, n)| n.omitted_nodes).sum();
        assert_eq!(omitted, 10);
        assert_eq!(root.clone().bounded(1000), root);
        // What a dropped node had itself left out is counted too.
        let mut deep = node("m", vec![node("x", vec![])]);
        deep.children[0].omitted_nodes = 5;
        let b = node("r", vec![deep]).bounded(1);
        assert_eq!(b.omitted_nodes, 7);
    }

    #[test]
    fn a_report_is_never_deeper_than_the_bound() {
        let mut chain = node("bottom", vec![]);
        for i in 0..MAX_REPORT_DEPTH + 5 {
            chain = node(&format!("n{i}"), vec![chain]);
        }
        let b = chain.bounded(1000);
        let depth = b.walk().iter().map(|(d, _)| *d).max().unwrap();
        assert_eq!(depth, MAX_REPORT_DEPTH);
        let omitted: u64 = b.walk().iter().map(|(_, n)| n.omitted_nodes).sum();
        assert_eq!(omitted, 5);
    }

    #[test]
    fn resources_are_bounded_most_capacity_first() {
        let mut n = node("a", vec![]);
        n.resources = (0..50)
            .map(|i| TreeResource {
                id: format!("r{i}"),
                capacity: f64::from(i),
                ..TreeResource::default()
            })
            .collect();
        let b = n.bounded(10);
        assert_eq!(b.resources.len(), MAX_REPORT_RESOURCES);
        assert_eq!(
            (b.resources[0].id.as_str(), b.omitted_resources),
            ("r49", 34)
        );
    }
}
