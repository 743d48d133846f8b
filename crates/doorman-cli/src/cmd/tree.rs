//! `doorman tree`: the tree below a server (the root: the whole tree), as
//! its HTTP port serves it (`/api/v1/tree`), drawn as text: each node with
//! its level, master and standbys, how fresh, and what it holds and wants
//! per resource; late and missing nodes marked. Exits 1 when any node is
//! late or missing, so a script can alert on it.
//!
//! Must not: talk gRPC or change anything on the server.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use doorman_core::tree::{Freshness, TreeNode};
use doorman_net::page::PageClient;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server's HTTP address (host:port; its `--http`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: String,
    /// Print the JSON the server sent.
    #[arg(long)]
    json: bool,
    /// Deadline of the request, in seconds (0.001 to 3600).
    #[arg(long, default_value = "5", value_parser = crate::args::seconds(0.001, 3600.0))]
    timeout: Duration,
    #[command(flatten)]
    tls: crate::tls_args::ClientTlsArgs,
}

/// Runs `doorman tree`.
pub async fn run(a: Args) -> anyhow::Result<ExitCode> {
    let tls = a.tls.client_tls()?;
    let pages = PageClient::new(tls.as_ref(), a.tls.token()?).map_err(anyhow::Error::msg)?;
    let page = pages
        .get(&a.http, "/api/v1/tree", a.timeout)
        .await
        .map_err(anyhow::Error::msg)?;
    if page.status != 200 {
        bail!("{}: HTTP {}: {}", a.http, page.status, page.body.trim());
    }
    let tree: TreeNode = serde_json::from_str(&page.body)
        .with_context(|| format!("{}: /api/v1/tree is not a tree", a.http))?;
    if a.json {
        println!("{}", page.body.trim());
    } else {
        print!("{}", draw(&tree));
    }
    let all_fresh = tree
        .walk()
        .iter()
        .all(|(_, n)| n.freshness == Freshness::Fresh);
    Ok(if all_fresh {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `s` with any control character shown as `?` (ids come from other
/// servers; a terminal escape must not reach the terminal).
fn shown(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The tree as text, one node and its resources per block.
pub fn draw(root: &TreeNode) -> String {
    let mut out = String::new();
    node(&mut out, root, "", None);
    out
}

/// `n` under `prefix`; `last` says whether it is its parent's last child
/// (`None` for the top node).
fn node(out: &mut String, n: &TreeNode, prefix: &str, last: Option<bool>) {
    let (branch, below) = match last {
        None => ("", String::new()),
        Some(true) => ("└── ", format!("{prefix}    ")),
        Some(false) => ("├── ", format!("{prefix}│   ")),
    };
    let level = n.level.map_or("?".into(), |l| l.to_string());
    let fresh = match n.freshness {
        Freshness::Fresh => "fresh",
        Freshness::Late => "LATE",
        Freshness::Missing => "MISSING",
    };
    let master = shown(n.master.as_deref().unwrap_or("unknown"));
    let standbys = n.standbys();
    let standbys = if standbys.is_empty() {
        "none known".into()
    } else {
        shown(&standbys.join(", "))
    };
    let _ = writeln!(
        out,
        "{prefix}{branch}{} · level {level} · {fresh} ({:.1} s ago) · master {master} · standbys {standbys}",
        shown(&n.node_id),
        n.age_s
    );
    let bar = if n.children.is_empty() {
        "    "
    } else {
        "│   "
    };
    resource_lines(out, n, &format!("{below}{bar}"));
    for (i, c) in n.children.iter().enumerate() {
        node(out, c, &below, Some(i + 1 == n.children.len()));
    }
}

/// One line per resource of `n` (and what was left out), under `indent`.
fn resource_lines(out: &mut String, n: &TreeNode, indent: &str) {
    for r in &n.resources {
        let bands: Vec<String> = r
            .bands
            .iter()
            .map(|(p, c, w)| format!("p{p} {w} ({c} clients)"))
            .collect();
        let lease = match r.lease_left_s {
            Some(s) if s > 0.0 => format!(" · lease {s:.0} s"),
            Some(_) => " · lease expired".into(),
            None => String::new(),
        };
        let modes = r.modes();
        let flags = if modes.is_empty() {
            String::new()
        } else {
            format!(" · {}", modes.join(", "))
        };
        let _ = writeln!(
            out,
            "{indent}  {} capacity {} · has {} · wants {}{lease}{flags}",
            shown(&r.id),
            r.capacity,
            r.has,
            if bands.is_empty() {
                "-".into()
            } else {
                bands.join(" ")
            },
        );
    }
    if n.omitted_resources + n.omitted_nodes > 0 {
        let (r, k) = (n.omitted_resources, n.omitted_nodes);
        let _ = writeln!(
            out,
            "{indent}  ({r} more resources, {k} more nodes below not shown)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use doorman_core::tree::TreeResource;

    #[test]
    fn a_tree_is_drawn_with_branches_and_states() {
        let leaf = |id: &str, f| TreeNode {
            node_id: id.into(),
            level: Some(2),
            freshness: f,
            ..TreeNode::default()
        };
        let mid = TreeNode {
            node_id: "mid".into(),
            level: Some(1),
            master: Some("m:1".into()),
            replicas: vec!["m:1".into(), "m:2".into()],
            resources: vec![TreeResource {
                id: "db".into(),
                capacity: 10.0,
                has: 8.0,
                bands: vec![(0, 2, 12.0)],
                lease_left_s: Some(20.0),
                ..TreeResource::default()
            }],
            children: vec![leaf("a", Freshness::Fresh), leaf("b", Freshness::Missing)],
            ..TreeNode::default()
        };
        let root = TreeNode {
            node_id: "root".into(),
            level: Some(0),
            children: vec![mid],
            ..TreeNode::default()
        };
        let text = draw(&root);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("root · level 0 · fresh"), "{text}");
        assert!(
            lines[1]
                .starts_with("└── mid · level 1 · fresh (0.0 s ago) · master m:1 · standbys m:2"),
            "{text}"
        );
        assert_eq!(
            lines[2], "    │     db capacity 10 · has 8 · wants p0 12 (2 clients) · lease 20 s",
            "{text}"
        );
        assert!(
            lines[3].starts_with("    ├── a · level 2 · fresh"),
            "{text}"
        );
        assert!(
            lines[4].starts_with("    └── b · level 2 · MISSING"),
            "{text}"
        );
        let mut gone = leaf("c", Freshness::Missing);
        gone.resources = vec![TreeResource {
            id: "db".into(),
            lease_left_s: Some(-2.0),
            shadow: true,
            ..TreeResource::default()
        }];
        let text = draw(&gone);
        let line = "db capacity 0 · has 0 · wants - · lease expired · shadow";
        assert!(text.contains(line), "{text}");
    }
}
