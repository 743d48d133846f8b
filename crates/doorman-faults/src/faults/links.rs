//! Network faults: which links a fault cuts or spoils, the rules set on
//! them, and the proof that they hold. After a rule is set, a probe
//! (`doorman-faults probe` on the sending host) goes each way across the
//! link: a dropped direction must time out and count a drop at its
//! receiver; a direction that must still pass (one-way loss) must count
//! the probe arriving. A lossy link must count drops and passes by the
//! time it is mended. After mending, a probe must come back refused (a
//! reset: packets pass both ways). The delay proxy says how many chunks it
//! held back and for how long.
//!
//! Must not: judge what the tree did.

use std::process::Command;

use anyhow::Context;

use super::{Applied, Found};
use crate::net::{Host, Rule};
use crate::probe::{parse, Reach};
use crate::schedule::Fault;
use crate::world::World;

/// Directed links: packets from the first host to the second.
type Links = Vec<(Host, Host)>;

/// A closed port every host answers with a reset when packets pass.
const PROBE_PORT: u16 = 9;

/// Percentage of packets a lossy link drops.
pub const LOSS: u8 = 33;

/// Node `n`'s replicas × its parent's, both ways.
fn to_parent(w: &World, n: usize) -> anyhow::Result<Vec<(Host, Host)>> {
    let parent = w.layout.nodes[n].parent.context("the root has no parent")?;
    let mut links = Vec::new();
    for a in w.replicas(n) {
        for b in w.replicas(parent) {
            let (x, y) = (a.proc.spec.host.clone(), b.proc.spec.host.clone());
            links.push((x.clone(), y.clone()));
            links.push((y, x));
        }
    }
    Ok(links)
}

/// Every link between node `n`'s replicas and its parent's replicas, the
/// replicas of the nodes below it, and the hosts of its clients, both
/// ways.
fn unreachable_links(w: &World, n: usize) -> Vec<(Host, Host)> {
    let nodes = &w.layout.nodes;
    let near = |s: &crate::world::Server| {
        nodes[n].parent == Some(s.node) || nodes[s.node].parent == Some(n)
    };
    let mut peers: Vec<Host> = w
        .servers
        .iter()
        .filter(|s| near(s))
        .map(|s| s.proc.spec.host.clone())
        .collect();
    let clients = w.clients.iter().filter(|c| c.spec.leaf == n);
    peers.extend(clients.map(|c| c.proc.spec.host.clone()));
    peers.sort();
    peers.dedup();
    let mut links = Vec::new();
    for s in w.replicas(n) {
        for p in &peers {
            links.push((s.proc.spec.host.clone(), p.clone()));
            links.push((p.clone(), s.proc.spec.host.clone()));
        }
    }
    links
}

/// Client `c` and the hosts its packets to its leaf go to first: (client
/// → leaf side) and (leaf side → client) directions.
fn client_links(w: &World, c: usize) -> (Links, Links) {
    let me = w.clients[c].proc.spec.host.clone();
    let peers = w.client_peers(c);
    let requests = peers.iter().map(|p| (me.clone(), p.clone())).collect();
    let answers = peers.iter().map(|p| (p.clone(), me.clone())).collect();
    (requests, answers)
}

/// Applies a network fault and shows it holds.
pub async fn apply(w: &mut World, f: &Fault, found: &mut Found) -> anyhow::Result<Applied> {
    let (dropped, passing): (Links, Links) = match f {
        Fault::CutFromParent(n) => (to_parent(w, *n)?, Vec::new()),
        Fault::Unreachable(n) => (unreachable_links(w, *n), Vec::new()),
        Fault::CutClient(c) => {
            let (req, ans) = client_links(w, *c);
            ([req, ans].concat(), Vec::new())
        }
        Fault::AnswersLost(c) => {
            let (req, ans) = client_links(w, *c);
            (ans, req)
        }
        Fault::RequestsLost(c) => {
            let (req, ans) = client_links(w, *c);
            (req, ans)
        }
        Fault::Lossy(n) => {
            let links = to_parent(w, *n)?;
            for (a, b) in &links {
                w.net.set(a, b, Some(Rule::Lossy(LOSS)))?;
            }
            return Ok(Applied::Links(links));
        }
        other => anyhow::bail!("{other:?} is not a network fault"),
    };
    set_rules(w, &dropped, &passing)?;
    show_rules(w, &dropped, &passing, found).await?;
    Ok(Applied::Links([dropped, passing].concat()))
}

/// Drops `dropped` links and counts what passes on `passing` ones.
pub(super) fn set_rules(
    w: &mut World,
    dropped: &[(Host, Host)],
    passing: &[(Host, Host)],
) -> anyhow::Result<()> {
    for (a, b) in dropped {
        w.net.set(a, b, Some(Rule::Drop))?;
    }
    for (a, b) in passing {
        w.net.set(a, b, Some(Rule::Count))?;
    }
    Ok(())
}

/// Probes every link each way: every dropped direction must drop it,
/// every passing one let it in.
pub(super) async fn show_rules(
    w: &World,
    dropped: &[(Host, Host)],
    passing: &[(Host, Host)],
    found: &mut Found,
) -> anyhow::Result<()> {
    let mut pairs: Vec<(Host, Host)> = dropped.iter().chain(passing).cloned().collect();
    pairs.sort();
    pairs.dedup();
    let reach = probe_all(w, &pairs).await?;
    for ((from, to), r) in pairs.iter().zip(&reach) {
        if r.passes() {
            found.fail(format!(
                "a probe {} → {} passed where packets are dropped",
                from.ns, to.ns
            ));
        }
    }
    for (from, to) in dropped {
        if w.net.counters(from, to)?.dropped == 0 {
            found.fail(format!("{} → {}: nothing was dropped", from.ns, to.ns));
        }
    }
    for (from, to) in passing {
        if w.net.counters(from, to)?.passed == 0 {
            found.fail(format!("{} → {}: nothing passed", from.ns, to.ns));
        }
    }
    Ok(())
}

/// One probe per pair, from its first host to its second, concurrently.
async fn probe_all(w: &World, pairs: &[(Host, Host)]) -> anyhow::Result<Vec<Reach>> {
    let harness = w.programs.harness.clone();
    let mut tasks = Vec::new();
    for (from, to) in pairs {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &from.ns]).arg(&harness).args([
            "probe",
            "--to",
            &format!("{}:{PROBE_PORT}", to.ip),
        ]);
        tasks.push(tokio::task::spawn_blocking(move || cmd.output()));
    }
    let mut out = Vec::new();
    for t in tasks {
        let o = t.await?.context("running a probe")?;
        let text = String::from_utf8_lossy(&o.stdout);
        let r = parse(&text)
            .with_context(|| format!("probe: {text:?} {}", String::from_utf8_lossy(&o.stderr)))?;
        out.push(r);
    }
    Ok(out)
}

/// Mends `links` and shows packets pass both ways again; lossy links
/// must have dropped some packets and passed some, in all (a standby's
/// links carry nothing).
pub async fn heal(w: &mut World, links: &[(Host, Host)], found: &mut Found) -> anyhow::Result<()> {
    let (mut lossy, mut dropped, mut passed) = (false, 0, 0);
    for (a, b) in links {
        if let Some(Rule::Lossy(_)) = w.net.rule(a, b) {
            let c = w.net.counters(a, b)?;
            (lossy, dropped, passed) = (true, dropped + c.dropped, passed + c.passed);
        }
        w.net.set(a, b, None)?;
    }
    if lossy && (dropped == 0 || passed == 0) {
        found.fail(format!(
            "the lossy links dropped {dropped} packets and passed {passed}"
        ));
    } else if lossy {
        found.notes.push(format!(
            "the lossy links dropped {dropped} packets and passed {passed}"
        ));
    }
    let mut pairs = links.to_vec();
    pairs.sort();
    pairs.dedup();
    for ((from, to), r) in pairs.iter().zip(probe_all(w, &pairs).await?) {
        if !r.passes() {
            found.fail(format!("{} → {} still drops after mending", from.ns, to.ns));
        }
    }
    Ok(())
}

/// Tells client `c`'s proxy to delay everything 300 ms + up to 500 ms.
pub fn delay(w: &mut World, c: usize) -> anyhow::Result<Applied> {
    let p = w
        .proxies
        .iter()
        .position(|p| p.client == c)
        .context("the client has no proxy")?;
    // Counting starts now.
    w.proxies[p].proc.send("stats")?;
    w.proxies[p].proc.send("delay 300 500")?;
    Ok(Applied::Delayed(p))
}

/// Stops proxy `p` delaying; it must have held back chunks by at least
/// the fixed part of the delay on average.
pub async fn undelay(w: &mut World, p: usize, found: &mut Found) -> anyhow::Result<()> {
    let proxy = &mut w.proxies[p].proc;
    let before = proxy.lines().len();
    proxy.send("stats")?;
    proxy.send("delay 0 0")?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stats = proxy.lines().into_iter().skip(before).find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(&l).ok()?;
        Some((v["delayed_chunks"].as_u64()?, v["delayed_ms"].as_u64()?))
    });
    match stats {
        Some((n, ms)) if n > 0 && ms >= 300 * n => {
            found.notes.push(format!(
                "proxy held back {n} chunks, {} ms on average",
                ms / n
            ));
        }
        other => found.fail(format!("the proxy did not delay: {other:?}")),
    }
    Ok(())
}
