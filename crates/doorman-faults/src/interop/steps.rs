//! The three steps: the original Go client library against our leaf
//! (`interop`), our intermediate under an original root (`mixed_a`), and
//! an original intermediate under our root beside our leaf (`mixed_b`).
//!
//! Must not: start a process outside its step's tree.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::sample::{judge, sample, At, Page, Side, Watched, Whole};
use super::tree::{wait_for, Tree};
use super::views::{self, ours};
use super::Checks;

/// What our server at `page` holds for `name`, if anything.
async fn held_by(tree: &Tree<'_>, page: SocketAddr, name: &str) -> Option<f64> {
    ours(&tree.http, page, "res").await?.1.get(name).copied()
}

async fn released(tree: &Tree<'_>, page: SocketAddr, name: &str) -> bool {
    let gone = async || held_by(tree, page, name).await.is_none().then_some(());
    wait_for(2.0, gone).await.is_some()
}

/// A Go client's checks; its output.
async fn go_client(
    c: &mut Checks,
    t: &mut Tree<'_>,
    (leaf, page): (SocketAddr, SocketAddr),
    (name, wants, seconds): (&str, f64, f64),
    extra: &[&str],
) -> anyhow::Result<Vec<String>> {
    let i = t.goclient(name, leaf, wants, seconds, extra)?;
    let tree: &Tree = t;
    let held = wait_for(seconds, async || held_by(tree, page, name).await).await;
    let code = t.proc(i).wait_exit(Duration::from_secs_f64(seconds + 10.0));
    let out = t.proc(i).lines();
    let log = t.proc(i).log_text();
    let caps: Vec<f64> = out
        .iter()
        .filter_map(|l| l.strip_prefix("capacity ")?.parse().ok())
        .collect();
    let last = caps.last().copied();
    c.check(
        &format!("{name}: the Go client's capacity ({last:?}) is what our leaf holds for it ({held:?}) and what the algorithm gives ({wants})"),
        last.is_some() && held == last && last == Some(wants),
        &format!("{}\n{log}", out.join("\n")),
    );
    let within = seconds + 10.0;
    c.check(
        &format!("{name}: Release() and Close() return (exit {code:?} within {within} s)"),
        code == Some(0),
        &log,
    );
    c.check(
        &format!("{name}: its lease is released on our leaf"),
        released(t, page, name).await,
        "",
    );
    Ok(out)
}

/// The original client library against our leaf, below our root.
pub async fn interop(c: &mut Checks, t: &mut Tree<'_>) -> anyhow::Result<()> {
    let (root, _) = t.ours("ours-root", None).await?;
    let leaf = t.ours("ours-leaf", Some(root)).await?;
    go_client(c, t, leaf, ("go-plain", 30.0, 6.0), &[]).await?;
    let out = go_client(
        c,
        t,
        leaf,
        ("go-ratelimit", 20.0, 6.0),
        &["-ratelimit", "-workers", "2"],
    )
    .await?;
    let ops: Option<u64> = out
        .iter()
        .find_map(|l| l.strip_prefix("ops ")?.parse().ok());
    // 20 per second for at most 6 s (the limiter starts at the first
    // capacity), plus one second of burst.
    c.check(
        &format!("go-ratelimit: ratelimiter.NewQPS let through {ops:?} in 6 s at 20/s (40..140)"),
        ops.is_some_and(|n| (40..=140).contains(&n)),
        &out.join("\n"),
    );
    let argv = vec![
        t.original_bin("doorman_client"),
        format!("-server={}", leaf.0),
        "-resource=res".into(),
        "-wants=15".into(),
        "-client_id=orig-cli".into(),
        "-logtostderr".into(),
    ];
    let i = t.start("doorman-client", argv, false)?;
    let code = t.proc(i).wait_exit(Duration::from_secs(15));
    let printed = t.proc(i).lines().join("\n");
    c.check(
        &format!(
            "doorman_client: exit {code:?}, printed {:?}, the 15 our leaf grants",
            printed.trim()
        ),
        code == Some(0) && printed.trim() == "15",
        &t.proc(i).log_text(),
    );
    let gone = released(t, leaf.1, "orig-cli").await;
    c.check(
        "doorman_client: its lease is released on our leaf (Close())",
        gone,
        "",
    );
    ours_polls_the_original(c, t).await
}

/// What the original server whose debug page is `page` holds for `name`.
async fn original_holds(tree: &Tree<'_>, page: SocketAddr, name: &str) -> Option<f64> {
    let now = std::time::SystemTime::UNIX_EPOCH.elapsed().ok()?;
    let view = views::original(&tree.http, page, "res", now.as_secs_f64()).await?;
    view.1.get(name).copied()
}

/// Our client library (lease stream on by default) against an original
/// root, which answers the stream UNIMPLEMENTED: the client polls, holds
/// what it wants, and still holds it after the lease it first got has
/// ended (20 s: renewed by GetCapacity).
async fn ours_polls_the_original(c: &mut Checks, t: &mut Tree<'_>) -> anyhow::Result<()> {
    let (root, debug) = t.original("orig-root-poll", None).await?;
    t.rust_client("rust-poll", (root, false), 30.0)?;
    let tree: &Tree = t;
    let holds_30 = async || {
        original_holds(tree, debug, "rust-poll")
            .await
            .filter(|h| *h == 30.0)
    };
    let first = wait_for(15.0, holds_30).await;
    c.check(
        "rust-poll: our client holds the 30 it wants from an original root (no lease stream there)",
        first.is_some(),
        "",
    );
    tokio::time::sleep(Duration::from_secs(22)).await;
    let later = wait_for(3.0, holds_30).await;
    c.check(
        "rust-poll: and still holds it after its first lease ended (renewed by polling)",
        later.is_some(),
        "",
    );
    Ok(())
}

fn holders(leases: &BTreeMap<String, f64>, names: &[&str]) -> f64 {
    leases
        .iter()
        .filter(|(k, _)| names.contains(&k.as_str()))
        .map(|(_, v)| v)
        .sum()
}

const GO_A: [&str; 2] = ["go-a1", "go-a2"];

/// Our intermediate under an original root. rust-a1 comes first and holds
/// 80 before the Go clients and rust-a2 arrive, so the original root
/// lowers our intermediate's grant while a client holds more: the window
/// the checks allow is exercised on every run. The Rust clients poll: on
/// the lease stream our intermediate pushes their lower grants within
/// milliseconds, and the 100 ms samples would not see the window.
pub async fn mixed_a(c: &mut Checks, t: &mut Tree<'_>, seconds: f64) -> anyhow::Result<()> {
    let (root, root_debug) = t.original("orig-root", None).await?;
    let (inter, inter_page) = t.ours("ours-inter", Some(root)).await?;
    t.rust_client("rust-a1", (inter, true), 80.0)?;
    let tree: &Tree = t;
    let holds_80 = async || {
        held_by(tree, inter_page, "rust-a1")
            .await
            .filter(|h| *h >= 80.0)
    };
    let first = wait_for(15.0, holds_80).await;
    c.check(
        "A: rust-a1, first, holds 80 from our intermediate",
        first.is_some(),
        "",
    );
    let the_rest = move |t: &mut Tree<'_>| -> anyhow::Result<()> {
        for n in GO_A {
            t.goclient(n, root, 80.0, seconds + 30.0, &[])?;
        }
        t.rust_client("rust-a2", (inter, true), 80.0).map(|_| ())
    };
    let watched = [
        Watched {
            name: "root",
            page: Page::Original(root_debug),
            fixed: Some(100.0),
        },
        Watched {
            name: "our intermediate",
            page: Page::Ours(inter_page),
            fixed: None,
        },
    ];
    let go = |l: &BTreeMap<String, f64>| holders(l, &GO_A);
    let ours_side = |l: &BTreeMap<String, f64>| l.values().sum::<f64>() - holders(l, &GO_A);
    let sides: [Side; 2] = [
        ("the Go clients", Box::new(go)),
        ("our intermediate", Box::new(ours_side)),
    ];
    let whole: Whole = ("our intermediate", Box::new(go));
    let at: At = (1.0, Box::new(the_rest));
    let s = sample(t, seconds, &watched, &sides, Some(at), Some(whole)).await?;
    let label = "A (our intermediate under an original root)";
    let drops = &s.lowering["our intermediate"].drops;
    c.check(
        &format!("{label}: the root lowered our intermediate below what its clients held (the case the window is for happened)"),
        drops.iter().any(|d| d.2 < d.3),
        &format!("{drops:?}"),
    );
    judge(c, label, &s);
    Ok(())
}

/// An original intermediate under our root, beside our leaf.
pub async fn mixed_b(c: &mut Checks, t: &mut Tree<'_>, seconds: f64) -> anyhow::Result<()> {
    let (root, root_page) = t.ours("ours-root-b", None).await?;
    let (inter, inter_debug) = t.original("orig-inter", Some(root)).await?;
    let (leaf, _) = t.ours("ours-leaf-b", Some(root)).await?;
    for n in ["go-b1", "go-b2"] {
        t.goclient(n, inter, 80.0, seconds + 30.0, &[])?;
    }
    for n in ["rust-b1", "rust-b2"] {
        t.rust_client(n, (leaf, false), 80.0)?;
    }
    // Our leaf's server id towards its parent is its listen address.
    let leaf_id = leaf.to_string();
    let other = leaf_id.clone();
    let watched = [
        Watched {
            name: "root",
            page: Page::Ours(root_page),
            fixed: Some(100.0),
        },
        Watched {
            name: "the original intermediate",
            page: Page::Original(inter_debug),
            fixed: None,
        },
    ];
    let inter_side = move |l: &BTreeMap<String, f64>| {
        l.iter().filter(|(k, _)| **k != other).map(|(_, v)| v).sum()
    };
    let leaf_side = move |l: &BTreeMap<String, f64>| l.get(&leaf_id).copied().unwrap_or(0.0);
    let sides: [Side; 2] = [
        ("the original intermediate", Box::new(inter_side)),
        ("our leaf", Box::new(leaf_side)),
    ];
    let s = sample(t, seconds, &watched, &sides, None, None).await?;
    judge(c, "B (an original intermediate under our root)", &s);
    Ok(())
}
