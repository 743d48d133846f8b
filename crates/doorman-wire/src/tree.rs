//! The tree report of a GetServerCapacity request (`NodeReport`) to and
//! from the core's [`TreeNode`]: sent as the sender bounded it, received
//! only within the bounds (`INVALID_ARGUMENT` naming the field otherwise),
//! with figures that are not finite and non-negative dropped.
//!
//! Must not: decide anything (the report is informational).

use doorman_core::tree::{TreeNode, TreeResource, MAX_REPORT_NODES, MAX_REPORT_RESOURCES};
use doorman_proto::doorman as pb;
use tonic::Status;

use crate::convert::bands_to_wire;

/// The most levels a report may hold below its sender.
pub const MAX_REPORT_DEPTH: usize = 32;
/// The longest id or address in a report, bytes.
pub const MAX_REPORT_TEXT: usize = 1024;

/// A node and the nodes below it, for the wire.
pub fn report_to_wire(n: &TreeNode) -> pb::NodeReport {
    pb::NodeReport {
        node_id: n.node_id.clone(),
        master: n.master.clone(),
        replicas: n.replicas.clone(),
        level: n.level,
        resources: n.resources.iter().map(resource_to_wire).collect(),
        children: n.children.iter().map(report_to_wire).collect(),
        age_ms: Some((n.age_s * 1000.0).round() as i64),
        report_interval_ms: Some((n.report_interval_s * 1000.0).round() as i64),
        omitted_nodes: Some(n.omitted_nodes as i64),
        omitted_resources: Some(n.omitted_resources as i64),
    }
}

fn resource_to_wire(r: &TreeResource) -> pb::ResourceReport {
    pb::ResourceReport {
        resource_id: r.id.clone(),
        capacity: Some(r.capacity),
        has: Some(r.has),
        wants: bands_to_wire(&r.bands),
        lease_remaining_ms: r.lease_left_s.map(|s| (s * 1000.0).round() as i64),
        learning: Some(r.learning),
        shadow: Some(r.shadow),
    }
}

/// A received report, checked: at most [`MAX_REPORT_NODES`] nodes,
/// [`MAX_REPORT_DEPTH`] levels, [`MAX_REPORT_RESOURCES`] resources a
/// node, ids of at most [`MAX_REPORT_TEXT`] bytes.
pub fn report_from_wire(r: &pb::NodeReport) -> Result<TreeNode, Status> {
    let nodes = count(r);
    if nodes > MAX_REPORT_NODES {
        return Err(Status::invalid_argument(format!(
            "report: at most {MAX_REPORT_NODES} nodes, got {nodes}"
        )));
    }
    node_from_wire(r, "report", 0)
}

fn count(r: &pb::NodeReport) -> usize {
    1 + r.children.iter().map(count).sum::<usize>()
}

fn node_from_wire(r: &pb::NodeReport, field: &str, depth: usize) -> Result<TreeNode, Status> {
    let bad = |why: String| Err(Status::invalid_argument(format!("{field}{why}")));
    if depth > MAX_REPORT_DEPTH {
        return bad(format!(": more than {MAX_REPORT_DEPTH} levels deep"));
    }
    if r.resources.len() > MAX_REPORT_RESOURCES {
        let n = r.resources.len();
        return bad(format!(
            ".resources: at most {MAX_REPORT_RESOURCES}, got {n}"
        ));
    }
    let texts = std::iter::once(&r.node_id)
        .chain(r.master.iter())
        .chain(r.replicas.iter())
        .chain(r.resources.iter().map(|x| &x.resource_id));
    if texts.clone().any(|t| t.len() > MAX_REPORT_TEXT) {
        return bad(format!(
            ": an id or address longer than {MAX_REPORT_TEXT} bytes"
        ));
    }
    let children = r
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| node_from_wire(c, &format!("{field}.children[{i}]"), depth + 1))
        .collect::<Result<_, _>>()?;
    Ok(TreeNode {
        node_id: r.node_id.clone(),
        master: r.master.clone(),
        replicas: r.replicas.clone(),
        level: r.level,
        resources: r.resources.iter().map(resource_from_wire).collect(),
        children,
        age_s: seconds(r.age_ms).unwrap_or(0.0),
        report_interval_s: seconds(r.report_interval_ms).unwrap_or(5.0),
        freshness: Default::default(),
        omitted_nodes: r.omitted_nodes.unwrap_or(0).max(0) as u64,
        omitted_resources: r.omitted_resources.unwrap_or(0).max(0) as u64,
    })
}

fn resource_from_wire(r: &pb::ResourceReport) -> TreeResource {
    TreeResource {
        id: r.resource_id.clone(),
        capacity: figure(r.capacity),
        has: figure(r.has),
        bands: r
            .wants
            .iter()
            .map(|b| (b.priority, b.num_clients.max(0), figure(Some(b.wants))))
            .collect(),
        lease_left_s: r.lease_remaining_ms.map(|ms| ms as f64 / 1000.0),
        learning: r.learning.unwrap_or(false),
        shadow: r.shadow.unwrap_or(false),
    }
}

/// A figure as shown: a finite non-negative number, else 0.
fn figure(v: Option<f64>) -> f64 {
    v.filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0)
}

fn seconds(ms: Option<i64>) -> Option<f64> {
    ms.filter(|m| *m >= 0).map(|m| m as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(id: &str) -> TreeNode {
        TreeNode {
            node_id: id.into(),
            master: Some("127.0.0.1:1".into()),
            replicas: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            level: Some(2),
            resources: vec![TreeResource {
                id: "db".into(),
                capacity: 4.0,
                has: 3.5,
                bands: vec![(1, 2, 6.0)],
                lease_left_s: Some(12.25),
                learning: true,
                shadow: true,
            }],
            age_s: 1.5,
            report_interval_s: 2.0,
            omitted_resources: 3,
            ..TreeNode::default()
        }
    }

    #[test]
    fn a_report_crosses_the_wire_whole() {
        let mid = TreeNode {
            node_id: "mid".into(),
            children: vec![leaf("a"), leaf("b")],
            report_interval_s: 5.0,
            omitted_nodes: 7,
            ..TreeNode::default()
        };
        assert_eq!(report_from_wire(&report_to_wire(&mid)).unwrap(), mid);
    }

    #[test]
    fn reports_past_the_bounds_are_refused_naming_the_field() {
        let mut big = leaf("x");
        big.resources = (0..=MAX_REPORT_RESOURCES)
            .map(|i| TreeResource {
                id: format!("r{i}"),
                ..TreeResource::default()
            })
            .collect();
        let mid = TreeNode {
            node_id: "mid".into(),
            children: vec![leaf("a"), big],
            ..TreeNode::default()
        };
        let e = report_from_wire(&report_to_wire(&mid)).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "report.children[1].resources: at most 16, got 17"
        );
        let wide = TreeNode {
            children: (0..MAX_REPORT_NODES)
                .map(|i| leaf(&i.to_string()))
                .collect(),
            ..TreeNode::default()
        };
        let e = report_from_wire(&report_to_wire(&wide)).unwrap_err();
        assert_eq!(e.message(), "report: at most 256 nodes, got 257");
        let mut nan = leaf("n");
        nan.resources[0].capacity = f64::NAN;
        let got = report_from_wire(&report_to_wire(&nan)).unwrap();
        assert_eq!(got.resources[0].capacity, 0.0);
    }
}
