//! The tree at a glance, as HTML: this server's node and every node that
//! reports to it, drawn as a tree of boxes (each: node id, level, master
//! and standbys, how fresh, and per resource the capacity it shares, Σ
//! has, wants per band, the upstream lease's time left, learning and
//! shadow), for the status page (which refreshes it live from
//! `/debug/tree`).
//!
//! Must not: read or change server state (it gets a [`TreeNode`]).

use std::fmt::Write as _;

use doorman_core::tree::{Freshness, TreeNode, TreeResource};

use crate::html::{esc, num};

/// The tree's style: boxes joined by lines, late nodes amber, missing
/// ones red.
pub const TREE_CSS: &str = "ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:1.6em}\
ul.tree li{position:relative;padding:.5em 0 0 1.4em}\
ul.tree li::before{content:'';position:absolute;left:0;top:0;height:100%;border-left:2px solid #888}\
ul.tree li:last-child::before{height:1.9em}\
ul.tree li::after{content:'';position:absolute;left:0;top:1.9em;width:1.4em;border-top:2px solid #888}\
ul.tree>li{padding-left:0}ul.tree>li::before,ul.tree>li::after{display:none}\
.node{display:inline-block;border:2px solid #3a3;border-radius:6px;padding:4px 10px;background:#f4fff4}\
.node.late{border-color:#c80;background:#fff8e0}.node.missing{border-color:#c22;background:#fff0f0}\
.node table{margin:.3em 0 .2em;font-size:90%}.node .who{font-size:90%;color:#333}";

/// The tree below (and including) `root`, as a `<ul class=tree>`.
pub fn render_tree(root: &TreeNode) -> String {
    let mut h = String::with_capacity(2048);
    h.push_str("<ul class=tree>");
    node(&mut h, root);
    h.push_str("</ul>");
    h
}

fn node(h: &mut String, n: &TreeNode) {
    let (class, fresh) = match n.freshness {
        Freshness::Fresh => ("fresh", "fresh"),
        Freshness::Late => ("late", "<b>late</b>"),
        Freshness::Missing => ("missing", "<b>missing</b>"),
    };
    let level = n.level.map_or("?".into(), |l| l.to_string());
    let _ = write!(
        h,
        "<li><div class=\"node {class}\"><b>{id}</b> · level {level} · {fresh} ({age:.1} s ago)<br>\
         <span class=who>{who}</span>",
        id = esc(&n.node_id),
        age = n.age_s,
        who = who(n),
    );
    resources(h, n);
    if n.omitted_nodes > 0 {
        let _ = write!(
            h,
            "<br><i>{} more nodes below not shown</i>",
            n.omitted_nodes
        );
    }
    h.push_str("</div>");
    if !n.children.is_empty() {
        h.push_str("<ul>");
        for c in &n.children {
            node(h, c);
        }
        h.push_str("</ul>");
    }
    h.push_str("</li>");
}

/// "master A · standbys B, C" from the node's master and replicas.
fn who(n: &TreeNode) -> String {
    let master = n.master.as_deref().unwrap_or("unknown");
    let standbys: Vec<String> = n.standbys().into_iter().map(esc).collect();
    let standbys = if standbys.is_empty() {
        "none known".to_string()
    } else {
        standbys.join(", ")
    };
    format!("master {} · standbys {standbys}", esc(master))
}

fn resources(h: &mut String, n: &TreeNode) {
    if n.resources.is_empty() {
        h.push_str("<br><i>no resources in use</i>");
        return;
    }
    h.push_str("<table><tr><th class=l>resource</th><th>capacity</th><th>Σ has</th><th class=l>wants (band: Σ)</th><th>lease left</th><th class=l>mode</th></tr>");
    for r in &n.resources {
        let _ = write!(
            h,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td class=l>{}</td><td>{}</td><td class=l>{}</td></tr>",
            esc(&r.id),
            num(r.capacity),
            num(r.has),
            bands(r),
            match r.lease_left_s {
                Some(s) if s > 0.0 => format!("{s:.0} s"),
                Some(_) => "<b>expired</b>".into(),
                None => "–".into(),
            },
            mode(r),
        );
    }
    h.push_str("</table>");
    if n.omitted_resources > 0 {
        let _ = write!(h, "<i>{} more resources not shown</i>", n.omitted_resources);
    }
}

fn bands(r: &TreeResource) -> String {
    let parts: Vec<String> = r
        .bands
        .iter()
        .map(|(p, clients, w)| format!("{p}: {} ({clients})", num(*w)))
        .collect();
    if parts.is_empty() {
        "–".into()
    } else {
        parts.join(" · ")
    }
}

fn mode(r: &TreeResource) -> String {
    let modes = r.modes();
    if modes.is_empty() {
        "normal".into()
    } else {
        modes.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_three_level_tree_is_drawn_nested_with_its_states() {
        let leaf = TreeNode {
            node_id: "leaf<a>".into(),
            master: Some("10.0.0.3:6000".into()),
            replicas: vec!["10.0.0.3:6000".into(), "10.0.0.4:6000".into()],
            level: Some(2),
            freshness: Freshness::Missing,
            resources: vec![TreeResource {
                id: "db".into(),
                capacity: 5.0,
                has: 4.5,
                bands: vec![(1, 3, 9.0)],
                lease_left_s: Some(12.0),
                shadow: true,
                ..TreeResource::default()
            }],
            ..TreeNode::default()
        };
        let mid = TreeNode {
            node_id: "mid".into(),
            level: Some(1),
            children: vec![leaf],
            omitted_nodes: 2,
            ..TreeNode::default()
        };
        let root = TreeNode {
            node_id: "root".into(),
            level: Some(0),
            children: vec![mid],
            ..TreeNode::default()
        };
        let h = render_tree(&root);
        assert_eq!(h.matches("<ul").count(), 3, "{h}");
        assert!(
            h.contains("<b>leaf&lt;a&gt;</b> · level 2 · <b>missing</b>"),
            "{h}"
        );
        assert!(
            h.contains("master 10.0.0.3:6000 · standbys 10.0.0.4:6000"),
            "{h}"
        );
        assert!(
            h.contains("<td class=l>1: 9 (3)</td><td>12 s</td><td class=l>shadow</td>"),
            "{h}"
        );
        assert!(h.contains("2 more nodes below not shown"), "{h}");
        assert!(h.find("root").unwrap() < h.find("mid").unwrap());
    }
}
