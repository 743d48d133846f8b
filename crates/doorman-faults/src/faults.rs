//! Applying a fault to the running tree and mending it: which process is
//! the master (asked with Discovery, as a client would), which links to
//! cut, which clock to step, which config to push. A master paused past
//! its election TTL is asked Discovery while still paused, so the answer
//! it gives on resuming is checked: it must not claim to be the master
//! when a successor was elected meanwhile.
//!
//! Must not: judge (`audit.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;

use crate::net::Host;
use crate::schedule::Fault;
use crate::tree::{World, FALLBACK_SHARE};

/// What a fault changed, to undo it.
#[derive(Debug)]
pub enum Applied {
    /// Server `i` was killed.
    Killed(usize),
    /// Server `i` was paused.
    Paused(usize),
    /// etcd was killed.
    EtcdKilled,
    /// These links were cut.
    Cut(Vec<(Host, Host)>),
    /// A clock was stepped: server (`true`) or client index.
    Skewed(bool, usize),
    /// A config was pushed.
    Config,
    /// Nothing to undo (no master found to aim at).
    Nothing(String),
}

/// Whether `addr` says it is the master (within 1 s).
pub async fn is_master(addr: SocketAddr) -> bool {
    discovery(addr, Duration::from_secs(1)).await == Some(true)
}

async fn discovery(addr: SocketAddr, within: Duration) -> Option<bool> {
    let call = async {
        let mut c = CapacityClient::connect(format!("http://{addr}"))
            .await
            .ok()?;
        let d = c.discovery(pb::DiscoveryRequest {}).await.ok()?;
        Some(d.into_inner().is_master)
    };
    tokio::time::timeout(within, call).await.ok().flatten()
}

/// The server index of node `n`'s master, if one says so.
pub async fn master(w: &World, n: usize) -> Option<usize> {
    for (i, s) in w.servers.iter().enumerate() {
        if s.node == n && s.proc.pid().is_some() && is_master(s.addr).await {
            return Some(i);
        }
    }
    None
}

/// Applies `f`.
pub async fn apply(w: &mut World, f: &Fault) -> anyhow::Result<Applied> {
    let t = w.layout.terms;
    Ok(match f {
        Fault::KillMaster(n)
        | Fault::PauseMaster(n)
        | Fault::SkewMaster(n, _)
        | Fault::EtcdCut(n) => {
            let Some(i) = master(w, *n).await else {
                return Ok(Applied::Nothing("no master answered Discovery".into()));
            };
            match f {
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
                    let links = vec![(
                        w.servers[i].proc.spec.host.clone(),
                        w.etcd.spec.host.clone(),
                    )];
                    cut(w, links)?
                }
            }
        }
        Fault::EtcdDown => {
            w.etcd.kill()?;
            Applied::EtcdKilled
        }
        Fault::CutFromParent(n) => {
            let parent = w.layout.nodes[*n]
                .parent
                .context("the root has no parent")?;
            let mut links = Vec::new();
            for a in w.replicas(*n) {
                for b in w.replicas(parent) {
                    links.push((a.proc.spec.host.clone(), b.proc.spec.host.clone()));
                }
            }
            cut(w, links)?
        }
        Fault::Unreachable(n) => {
            let links = unreachable_links(w, *n);
            cut(w, links)?
        }
        Fault::CutClient(c) => {
            let client = w.clients[*c].proc.spec.host.clone();
            let leaf = w.clients[*c].spec.leaf;
            let links = w
                .replicas(leaf)
                .map(|s| (client.clone(), s.proc.spec.host.clone()))
                .collect();
            cut(w, links)?
        }
        Fault::SkewClient(c, s) => {
            w.clients[*c].proc.set_clock(*s)?;
            Applied::Skewed(false, *c)
        }
        Fault::CapacityDown => {
            w.push_config(
                &w.layout
                    .config(FALLBACK_SHARE * t.capacity, "FAIR_SHARE", true),
            )?;
            Applied::Config
        }
        Fault::RemoveTemplate => {
            w.push_config(&w.layout.config(t.capacity, "FAIR_SHARE", false))?;
            Applied::Config
        }
        Fault::ChangeAlgorithm => {
            w.push_config(&w.layout.config(t.capacity, "PROPORTIONAL_SHARE", true))?;
            Applied::Config
        }
    })
}

/// Every link between node `n`'s replicas and its parent's replicas, the
/// replicas of the nodes below it, and the hosts of its clients.
fn unreachable_links(w: &World, n: usize) -> Vec<(Host, Host)> {
    let nodes = &w.layout.nodes;
    let near = |s: &crate::tree::Server| {
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
    w.replicas(n)
        .flat_map(|s| peers.iter().map(|p| (s.proc.spec.host.clone(), p.clone())))
        .collect()
}

fn cut(w: &mut World, links: Vec<(Host, Host)>) -> anyhow::Result<Applied> {
    for (a, b) in &links {
        w.net.cut(a, b)?;
    }
    Ok(Applied::Cut(links))
}

/// What mending a fault found.
#[derive(Debug, Default)]
pub struct Mended {
    /// A paused master claimed to be master on resuming while another
    /// replica of its node was (the address and the claim).
    pub stale_claim: Option<String>,
}

/// Undoes what `a` changed.
pub async fn heal(w: &mut World, a: &Applied) -> anyhow::Result<Mended> {
    let mut out = Mended::default();
    let t = w.layout.terms;
    match a {
        Applied::Killed(i) => w.servers[*i].proc.restart()?,
        Applied::Paused(i) => out.stale_claim = resume(w, *i).await?,
        Applied::EtcdKilled => w.etcd.restart()?,
        Applied::Cut(links) => {
            for (x, y) in links {
                w.net.heal(x, y)?;
            }
        }
        Applied::Skewed(true, i) => w.servers[*i].proc.set_clock(0)?,
        Applied::Skewed(false, c) => w.clients[*c].proc.set_clock(0)?,
        Applied::Config => w.push_config(&w.layout.config(t.capacity, "FAIR_SHARE", true))?,
        Applied::Nothing(_) => {}
    }
    Ok(out)
}

/// Resumes paused server `i` with a Discovery already waiting for it, and
/// returns a stale claim: it answered "master" while another replica of
/// its node was.
async fn resume(w: &mut World, i: usize) -> anyhow::Result<Option<String>> {
    let addr = w.servers[i].addr;
    let node = w.servers[i].node;
    let mut successor = None;
    for (j, s) in w.servers.iter().enumerate() {
        if j != i && s.node == node && is_master(s.addr).await {
            successor = Some(s.addr);
        }
    }
    let asked = tokio::spawn(discovery(addr, Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.servers[i].proc.resume()?;
    let claimed = asked.await.ok().flatten() == Some(true);
    Ok(match (claimed, successor) {
        (true, Some(s)) => Some(format!("{addr} said it was master on resuming; {s} was")),
        _ => None,
    })
}

/// The capacity in force after a config fault is applied or mended.
pub fn capacity_after(w: &World, f: &Fault, mended: bool) -> Option<f64> {
    let full = w.layout.terms.capacity;
    match f {
        Fault::CapacityDown | Fault::RemoveTemplate if !mended => Some(FALLBACK_SHARE * full),
        Fault::CapacityDown | Fault::RemoveTemplate | Fault::ChangeAlgorithm => Some(full),
        _ => None,
    }
}
