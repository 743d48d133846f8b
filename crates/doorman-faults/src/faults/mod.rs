//! Applying a fault to the running tree and mending it, and showing that
//! each did happen: which process is the master (asked with Discovery, as
//! a client would), which links to cut (`links.rs`: a cut is shown by
//! probes and counters, not believed because `nft` exited 0), which
//! process to kill, stop or restart (`procs.rs`), which etcd member
//! (`etcd.rs`), which config to push (`config.rs`: taken once the root
//! master runs it), whose demand to move (`demand.rs`). What could not be
//! shown, or a fault that found nothing to aim at, is a failure of the
//! run, not a pass.
//!
//! Must not: judge what the tree did (`audit.rs`).

mod config;
mod demand;
mod etcd;
mod links;
mod procs;

use std::time::Duration;

use crate::net::Host;
use crate::schedule::Fault;
use crate::world::World;

pub use config::capacity_after;

/// What a fault changed, to undo it.
#[derive(Debug)]
pub enum Applied {
    /// Server `i` was killed.
    Killed(usize),
    /// Server `i` was paused.
    Paused(usize),
    /// These etcd members were killed.
    EtcdKilled(Vec<usize>),
    /// Packets between these hosts follow rules (from, to).
    Links(Vec<(Host, Host)>),
    /// A clock was stepped: server (`true`) or client index.
    Skewed(bool, usize),
    /// A config was pushed; the valid one goes back.
    Config,
    /// Client `0` was stopped behind a cut of these links.
    ClientPaused(usize, Vec<(Host, Host)>),
    /// Client `0` was killed.
    ClientKilled(usize),
    /// Proxy `0` delays.
    Delayed(usize),
    /// The others' wants were lowered, the answers to a client swallowed
    /// by proxy `0`.
    Lowering(usize),
    /// The mass clients run; their leaf's master `0` was killed.
    Mass(Option<usize>),
    /// Nothing to undo: it was not applied (a failure of the run).
    Nothing(String),
}

/// What applying or mending a fault showed.
#[derive(Debug, Default)]
pub struct Found {
    /// What the run must fail on: the fault did not happen as intended,
    /// or the tree did something it must not.
    pub failures: Vec<String>,
    /// What to print beside it.
    pub notes: Vec<String>,
    /// When the root master first ran a config the fault pushed
    /// (monotonic s), for the auditor's capacity in force.
    pub config_at: Option<f64>,
}

impl Found {
    fn fail(&mut self, what: impl Into<String>) {
        self.failures.push(what.into());
    }
}

/// The server index of node `n`'s master, if one says so within 1 s.
pub async fn master(w: &World, n: usize) -> Option<usize> {
    let http = w.http();
    for (i, s) in w.servers.iter().enumerate() {
        let running = s.node == n && s.proc.pid().is_some();
        if running && http.is_master(s.addr, Duration::from_secs(1)).await == Some(true) {
            return Some(i);
        }
    }
    None
}

/// Node `n`'s master, asked again every second for up to 10 s (a failover
/// before the fault may still be settling).
async fn master_within(w: &World, n: usize) -> Option<usize> {
    for _ in 0..10 {
        if let Some(i) = master(w, n).await {
            return Some(i);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    None
}

/// Applies `f`, and shows it happened.
pub async fn apply(w: &mut World, f: &Fault) -> anyhow::Result<(Applied, Found)> {
    let mut found = Found::default();
    let applied = match f {
        Fault::KillMaster(n)
        | Fault::PauseMaster(n)
        | Fault::SkewMaster(n, _)
        | Fault::EtcdCut(n) => match master_within(w, *n).await {
            Some(i) => procs::at_master(w, f, i, &mut found).await?,
            None => Applied::Nothing("no master answered Discovery within 10 s".into()),
        },
        Fault::EtcdDown
        | Fault::EtcdMemberDown
        | Fault::EtcdLeaderDown
        | Fault::EtcdQuorumLost
        | Fault::EtcdWiped => etcd::apply(w, f, &mut found).await?,
        Fault::CutFromParent(_)
        | Fault::Unreachable(_)
        | Fault::CutClient(_)
        | Fault::AnswersLost(_)
        | Fault::RequestsLost(_)
        | Fault::Lossy(_) => links::apply(w, f, &mut found).await?,
        Fault::SkewClient(c, s) => {
            w.clients[*c].proc.set_clock(*s)?;
            Applied::Skewed(false, *c)
        }
        Fault::PauseClient(c) => procs::pause_client(w, *c, &mut found).await?,
        Fault::KillClient(c) => {
            w.clients[*c].proc.kill()?;
            Applied::ClientKilled(*c)
        }
        Fault::Delay(c) => links::delay(w, *c)?,
        Fault::LoweringLost(c) => demand::lowering(w, *c, &mut found).await?,
        Fault::MassReconnect => demand::mass(w, &mut found).await?,
        Fault::CapacityDown
        | Fault::RemoveTemplate
        | Fault::ChangeAlgorithm
        | Fault::InvalidConfig => config::apply(w, f, &mut found).await?,
    };
    if let Applied::Nothing(why) = &applied {
        found.fail(format!("not applied: {why}"));
    }
    Ok((applied, found))
}

/// What mending found besides failures: a paused master that claimed to
/// be master on resuming while another replica was.
pub type StaleClaim = Option<String>;

/// Undoes what `a` changed, and shows it was undone.
pub async fn heal(w: &mut World, a: &Applied) -> anyhow::Result<(StaleClaim, Found)> {
    let mut found = Found::default();
    let mut stale = None;
    match a {
        Applied::Killed(i) => {
            let clock = crate::tree::offset(&mut w.rng);
            w.servers[*i].proc.restart(clock)?;
        }
        Applied::Paused(i) => stale = procs::resume(w, *i).await?,
        Applied::EtcdKilled(members) => etcd::restart(w, members, &mut found).await?,
        Applied::Links(links) => links::heal(w, links, &mut found).await?,
        Applied::Skewed(true, i) => w.servers[*i].proc.set_clock(0)?,
        Applied::Skewed(false, c) => w.clients[*c].proc.set_clock(0)?,
        Applied::Config => config::restore(w, &mut found).await?,
        Applied::ClientPaused(c, links) => procs::resume_client(w, *c, links, &mut found).await?,
        Applied::ClientKilled(c) => {
            let clock = crate::tree::offset(&mut w.rng);
            w.clients[*c].proc.restart(clock)?;
        }
        Applied::Delayed(p) => links::undelay(w, *p, &mut found).await?,
        Applied::Lowering(p) => demand::restore(w, *p, &mut found).await?,
        Applied::Mass(killed) => demand::mass_end(w, *killed, &mut found).await?,
        Applied::Nothing(_) => {}
    }
    Ok((stale, found))
}
