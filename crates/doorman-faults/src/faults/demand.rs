//! Faults that move demand: a client's grant raised and then lowered while
//! its answers are lost (it holds the higher lease to its end, which its
//! leaf must go on counting), and a thousand clients on one leaf that
//! reconnect at once when its master is killed.
//!
//! Must not: judge what the tree did (the auditor does, from what the
//! clients report).

use std::collections::HashMap;
use std::time::Duration;

use super::{master_within, Applied, Found};
use crate::clock::mono;
use crate::tree::Kind;
use crate::world::World;

/// What the other clients want while client `c`'s grant is raised.
const LOW_WANTS: f64 = 1.0;

/// Our clients of `c`'s leaf other than `c` (the leaf's capacity stays
/// as it is, so what `c` is lowered by goes to them at once).
fn others(w: &World, c: usize) -> Vec<usize> {
    let leaf = w.clients[c].spec.leaf;
    (0..w.clients.len())
        .filter(|&i| i != c && w.clients[i].spec.kind != Kind::Go && w.clients[i].spec.leaf == leaf)
        .collect()
}

/// What client `c` last reported using.
fn last_used(w: &World, c: usize) -> Option<f64> {
    let lines = w.clients[c].proc.lines();
    lines.iter().rev().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        v["cap"].as_f64()
    })
}

/// Raises client `c`'s grant (the others on its leaf want little), has
/// its proxy swallow the answers to it (its requests still arrive: a
/// middlebox that loses answers; a TCP-level one-way loss would keep its
/// next request from arriving at all once it reconnects), then lowers it
/// (the others want again).
pub async fn lowering(w: &mut World, c: usize, found: &mut Found) -> anyhow::Result<Applied> {
    let Some(p) = w.proxies.iter().position(|p| p.client == c) else {
        return Ok(Applied::Nothing(
            "the client has no proxy to lose its answers".into(),
        ));
    };
    let before = last_used(w, c).unwrap_or(0.0);
    for i in others(w, c) {
        w.send_wants(i, LOW_WANTS)?;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let raised = last_used(w, c).unwrap_or(0.0);
    if raised <= before {
        found.fail(format!(
            "{}'s grant did not rise ({before} → {raised}): nothing to lower",
            w.clients[c].spec.name
        ));
    }
    w.proxies[p].proc.send("stats")?;
    w.proxies[p].proc.send("answers drop")?;
    let wants = w.layout.terms.wants;
    for i in others(w, c) {
        w.send_wants(i, wants)?;
    }
    found.notes.push(format!(
        "{} raised from {before:.1} to {raised:.1}, then lowered with its answers lost",
        w.clients[c].spec.name
    ));
    Ok(Applied::Lowering(p))
}

/// The proxy passes answers again; it must have swallowed some.
pub async fn restore(w: &mut World, p: usize, found: &mut Found) -> anyhow::Result<()> {
    let proxy = &mut w.proxies[p].proc;
    let before = proxy.lines().len();
    proxy.send("stats")?;
    proxy.send("answers pass")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let swallowed = proxy.lines().into_iter().skip(before).find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(&l).ok()?;
        v["swallowed"].as_u64()
    });
    match swallowed {
        Some(n) if n > 0 => found
            .notes
            .push(format!("the proxy swallowed {n} bytes of answers")),
        other => found.fail(format!("the proxy swallowed no answers: {other:?}")),
    }
    Ok(())
}

/// How many mass clients say they hold a lease, of how many reported.
fn mass_leased(w: &World) -> (usize, usize) {
    let mut last: HashMap<(usize, u64), bool> = HashMap::new();
    for c in w.mass.iter().filter(|c| c.proc.pid().is_some()) {
        // Each client reports every second: the last two seconds' lines
        // say what each holds now.
        let per = w.layout.mass.map_or(1, |m| m.per_proc);
        for l in &c.proc.tail(3 * per) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
                continue;
            };
            let i = v["i"].as_u64().unwrap_or(0);
            last.insert((c.proc.index, i), v["mode"] == "lease");
        }
    }
    (last.values().filter(|&&l| l).count(), last.len())
}

/// Waits up to `within` s until all `want` mass clients hold a lease;
/// returns how long it took.
async fn mass_until_leased(w: &World, want: usize, within: f64) -> Option<f64> {
    let start = mono();
    while mono() - start < within {
        if mass_leased(w).0 >= want {
            return Some(mono() - start);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    None
}

/// Starts the mass clients, waits for their leases, kills their leaf's
/// master.
pub async fn mass(w: &mut World, found: &mut Found) -> anyhow::Result<Applied> {
    let Some(m) = w.layout.mass else {
        return Ok(Applied::Nothing("the tree has no mass clients".into()));
    };
    w.start_mass()?;
    let all = m.procs * m.per_proc;
    match mass_until_leased(w, all, 60.0).await {
        Some(s) => found
            .notes
            .push(format!("{all} clients held leases {s:.1} s after starting")),
        None => found.fail(format!(
            "only {} of {all} mass clients held a lease after 60 s",
            mass_leased(w).0
        )),
    }
    let Some(i) = master_within(w, m.leaf).await else {
        found.fail("no master of the mass clients' leaf answered Discovery within 10 s");
        return Ok(Applied::Mass(None));
    };
    w.servers[i].proc.kill()?;
    Ok(Applied::Mass(Some(i)))
}

/// Starts the killed master again, waits until every mass client holds a
/// lease again, then stops them.
pub async fn mass_end(
    w: &mut World,
    killed: Option<usize>,
    found: &mut Found,
) -> anyhow::Result<()> {
    if let Some(i) = killed {
        let clock = crate::tree::offset(&mut w.rng);
        w.servers[i].proc.restart(clock)?;
    }
    let all = w.layout.mass.map_or(0, |m| m.procs * m.per_proc);
    match mass_until_leased(w, all, 30.0).await {
        Some(s) => found.notes.push(format!(
            "all {all} clients held leases again {s:.1} s after mending"
        )),
        None => found.fail(format!(
            "{} of {all} mass clients held a lease 30 s after mending",
            mass_leased(w).0
        )),
    }
    w.stop_mass();
    Ok(())
}
