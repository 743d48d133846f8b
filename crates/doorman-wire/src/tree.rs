//! The tree report of a GetServerCapacity request (`NodeReport`) to and
//! from the core's [`TreeNode`]: sent as the sender bounded it, received
//! only within the same bounds (else why not, naming the field: the
//! server drops the report and answers the request), with figures that
//! are not finite and non-negative read as 0 and times clamped.
//!
//! Must not: decide anything (the report is informational).

use doorman_core::limits::{has_control_chars, MAX_DURATION_SECS};
use doorman_core::tree::{
    TreeNode, TreeResource, MAX_REPORT_BANDS, MAX_REPORT_DEPTH, MAX_REPORT_NODES,
    MAX_REPORT_REPLICAS, MAX_REPORT_RESOURCES,
};
use doorman_proto::doorman as pb;

use crate::convert::bands_to_wire;

/// The longest id or address in a report, bytes.
pub const MAX_REPORT_TEXT: usize = 1024;
/// The longest report interval a report may claim, seconds.
pub const MAX_REPORT_INTERVAL_S: f64 = 3600.0;

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
        omitted_nodes: Some(i64::try_from(n.omitted_nodes).unwrap_or(i64::MAX)),
        omitted_resources: Some(i64::try_from(n.omitted_resources).unwrap_or(i64::MAX)),
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
/// [`MAX_REPORT_DEPTH`] levels, [`MAX_REPORT_RESOURCES`] resources,
/// [`MAX_REPORT_BANDS`] bands a resource and [`MAX_REPORT_REPLICAS`]
/// replicas a node, ids of at most [`MAX_REPORT_TEXT`] bytes without
/// control characters; else why not, naming the field.
pub fn report_from_wire(r: &pb::NodeReport) -> Result<TreeNode, String> {
    let nodes = count(r, 0).ok_or(format!("report: more than {MAX_REPORT_DEPTH} levels deep"))?;
    if nodes > MAX_REPORT_NODES {
        return Err(format!(
            "report: at most {MAX_REPORT_NODES} nodes, got {nodes}"
        ));
    }
    node_from_wire(r, "report")
}

/// Its nodes, or `None` past [`MAX_REPORT_DEPTH`] (counted before the
/// rest is looked at).
fn count(r: &pb::NodeReport, depth: usize) -> Option<usize> {
    if depth > MAX_REPORT_DEPTH {
        return None;
    }
    r.children
        .iter()
        .try_fold(1usize, |n, c| Some(n.saturating_add(count(c, depth + 1)?)))
}

/// Why a node's own lists are out of bounds, if they are.
fn node_problem(r: &pb::NodeReport) -> Option<String> {
    let too_many = |what: &str, n: usize, most: usize| {
        (n > most).then(|| format!(".{what}: at most {most}, got {n}"))
    };
    let texts = std::iter::once(&r.node_id)
        .chain(r.master.iter())
        .chain(r.replicas.iter())
        .chain(r.resources.iter().map(|x| &x.resource_id));
    too_many("resources", r.resources.len(), MAX_REPORT_RESOURCES)
        .or_else(|| too_many("replicas", r.replicas.len(), MAX_REPORT_REPLICAS))
        .or_else(|| {
            let most = r.resources.iter().map(|x| x.wants.len()).max().unwrap_or(0);
            too_many("resources.wants", most, MAX_REPORT_BANDS)
        })
        .or_else(|| {
            let bad = |t: &String| t.len() > MAX_REPORT_TEXT || has_control_chars(t);
            texts.clone().any(bad).then(|| {
                format!(
                    ": an id or address over {MAX_REPORT_TEXT} bytes or with control characters"
                )
            })
        })
}

fn node_from_wire(r: &pb::NodeReport, field: &str) -> Result<TreeNode, String> {
    if let Some(why) = node_problem(r) {
        return Err(format!("{field}{why}"));
    }
    let children = r
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| node_from_wire(c, &format!("{field}.children[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(TreeNode {
        node_id: r.node_id.clone(),
        master: r.master.clone(),
        replicas: r.replicas.clone(),
        level: r.level,
        resources: r.resources.iter().map(resource_from_wire).collect(),
        children,
        age_s: seconds(r.age_ms).unwrap_or(0.0),
        report_interval_s: seconds(r.report_interval_ms)
            .unwrap_or(5.0)
            .min(MAX_REPORT_INTERVAL_S),
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
        lease_left_s: r
            .lease_remaining_ms
            .map(|ms| (ms as f64 / 1000.0).min(MAX_DURATION_SECS as f64)),
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
        assert_eq!(e, "report.children[1].resources: at most 16, got 17");
        let wide = TreeNode {
            children: (0..MAX_REPORT_NODES)
                .map(|i| leaf(&i.to_string()))
                .collect(),
            ..TreeNode::default()
        };
        let e = report_from_wire(&report_to_wire(&wide)).unwrap_err();
        assert_eq!(e, "report: at most 256 nodes, got 257");
        let mut deep = leaf("d");
        for _ in 0..=MAX_REPORT_DEPTH {
            deep = TreeNode {
                children: vec![deep],
                ..TreeNode::default()
            };
        }
        let e = report_from_wire(&report_to_wire(&deep)).unwrap_err();
        assert_eq!(e, "report: more than 32 levels deep");
        let mut escape = leaf("e");
        escape.replicas.push("\u{1b}[2J".into());
        let e = report_from_wire(&report_to_wire(&escape)).unwrap_err();
        assert!(e.starts_with("report: an id or address"), "{e}");
        let mut bands = leaf("b");
        bands.resources[0].bands = vec![(0, 1, 1.0); MAX_REPORT_BANDS + 1];
        let e = report_from_wire(&report_to_wire(&bands)).unwrap_err();
        assert_eq!(e, "report.resources.wants: at most 16, got 17");
        let mut nan = leaf("n");
        nan.resources[0].capacity = f64::NAN;
        let got = report_from_wire(&report_to_wire(&nan)).unwrap();
        assert_eq!(got.resources[0].capacity, 0.0);
    }
}
