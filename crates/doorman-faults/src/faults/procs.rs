//! Faults aimed at a process: a node's master killed, stopped, its clock
//! stepped or cut off from etcd; a client stopped past its lease and
//! resumed behind a partition. A master stopped past its election TTL is
//! asked Discovery while still stopped, so the answer it gives on resuming
//! is checked: it must not claim to be the master when a successor was
//! elected meanwhile.
//!
//! Must not: judge what the tree did.

use std::time::Duration;

use super::links::{heal, set_rules, show_rules};
use super::{Applied, Found};
use crate::net::Host;
use crate::schedule::Fault;
use crate::world::World;

/// `f` aimed at server `i`, its node's master.
pub async fn at_master(
    w: &mut World,
    f: &Fault,
    i: usize,
    found: &mut Found,
) -> anyhow::Result<Applied> {
    Ok(match f {
        Fault::KillMaster(_) => {
            w.servers[i].proc.kill()?;
            Applied::Killed(i)
        }
        Fault::PauseMaster(_) => {
            w.servers[i].proc.pause()?;
            Applied::Paused(i)
        }
        Fault::SkewMaster(_, s) => {
            w.servers[i].proc.set_clock(*s)?;
            Applied::Skewed(true, i)
        }
        _ => {
            let me = w.servers[i].proc.spec.host.clone();
            let mut links = Vec::new();
            for m in w.etcd.hosts() {
                links.push((me.clone(), m.clone()));
                links.push((m, me.clone()));
            }
            set_rules(w, &links, &[])?;
            show_rules(w, &links, &[], found).await?;
            Applied::Links(links)
        }
    })
}

/// Resumes paused server `i` with a Discovery already waiting for it, and
/// returns a stale claim: it answered "master" while another replica of
/// its node was.
pub async fn resume(w: &mut World, i: usize) -> anyhow::Result<Option<String>> {
    let addr = w.servers[i].addr;
    let node = w.servers[i].node;
    let http = w.http();
    let mut successor = None;
    for (j, s) in w.servers.iter().enumerate() {
        let master = http.is_master(s.addr, Duration::from_secs(1)).await == Some(true);
        if j != i && s.node == node && master {
            successor = Some(s.addr);
        }
    }
    let asking = http.clone();
    let asked = tokio::spawn(async move { asking.is_master(addr, Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.servers[i].proc.resume()?;
    let claimed = asked.await.ok().flatten() == Some(true);
    Ok(match (claimed, successor) {
        (true, Some(s)) => Some(format!("{addr} said it was master on resuming; {s} was")),
        _ => None,
    })
}

/// Client `c` stopped, then cut off from its leaf (it resumes behind the
/// partition).
pub async fn pause_client(w: &mut World, c: usize, found: &mut Found) -> anyhow::Result<Applied> {
    w.clients[c].proc.pause()?;
    let links = both_ways(w, c);
    set_rules(w, &links, &[])?;
    show_rules(w, &links, &[], found).await?;
    Ok(Applied::ClientPaused(c, links))
}

/// Client `c`'s links to its leaf side, both ways.
fn both_ways(w: &World, c: usize) -> Vec<(Host, Host)> {
    let me = w.clients[c].proc.spec.host.clone();
    let mut links = Vec::new();
    for p in w.client_peers(c) {
        links.push((me.clone(), p.clone()));
        links.push((p, me.clone()));
    }
    links
}

/// Resumes client `c` behind its partition, which is mended 3 s later.
pub async fn resume_client(
    w: &mut World,
    c: usize,
    links: &[(Host, Host)],
    found: &mut Found,
) -> anyhow::Result<()> {
    w.clients[c].proc.resume()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    heal(w, links, found).await
}
