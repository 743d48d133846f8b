//! Who is the master of this server's node. Three implementations behind
//! one enum: standalone (always master; the default), etcd (see
//! `etcd_election.rs`), and in-memory (tests). Each publishes a
//! [`MasterView`] on a watch channel; [`follow`] applies changes to the
//! core: winning starts a fresh state in learning mode, losing drops all
//! lease state and turns every RPC into a redirect.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::etcd_election::EtcdElection;
use crate::service::ServerState;

/// What a server knows about its node's mastership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterView {
    /// This server is the master.
    pub is_master: bool,
    /// The master's address, if known.
    pub master: Option<String>,
}

/// How a server takes part in its node's election.
#[derive(Debug, Clone, Default)]
pub enum Election {
    /// Always master (one process per node).
    #[default]
    Standalone,
    /// Campaign on an etcd election key.
    Etcd(EtcdElection),
    /// An in-process election shared by several servers (tests).
    InMemory(InMemoryElection),
}

impl Election {
    /// Runs the election until `stop` turns true, publishing to `out`.
    /// `me` is the address clients should be redirected to.
    pub async fn run(
        self,
        me: String,
        out: watch::Sender<MasterView>,
        stop: watch::Receiver<bool>,
    ) {
        match self {
            Election::Standalone => {
                out.send_replace(MasterView {
                    is_master: true,
                    master: Some(me),
                });
            }
            Election::Etcd(e) => e.run(me, out, stop).await,
            Election::InMemory(e) => e.run(me, out, stop).await,
        }
    }
}

/// Applies mastership changes to the core until the channel or `stop` ends.
pub async fn follow(
    state: Arc<ServerState>,
    mut views: watch::Receiver<MasterView>,
    mut stop: watch::Receiver<bool>,
) {
    let mut current = MasterView::default();
    loop {
        let view = views.borrow_and_update().clone();
        apply(&state, &current, &view);
        current = view;
        tokio::select! {
            r = views.changed() => if r.is_err() { return },
            _ = stop.changed() => return,
        }
    }
}

fn apply(state: &ServerState, old: &MasterView, new: &MasterView) {
    let now = state.now();
    let mut core = state.core();
    match (old.is_master, new.is_master) {
        (false, true) => {
            tracing::info!("became master: fresh state, learning mode starts");
            core.become_master(now);
            drop(core);
            state.upstream_wake.notify_one();
        }
        (true, false) => {
            tracing::warn!(master = ?new.master, "lost mastership: lease state dropped, redirecting");
            core.step_down(new.master.clone());
        }
        (false, false) => core.set_master_address(new.master.clone()),
        (true, true) => {}
    }
}

/// An election inside one process: the first candidate to run is master;
/// when it stops (or [`InMemoryElection::abdicate`] is called) the next one
/// takes over.
#[derive(Debug, Clone, Default)]
pub struct InMemoryElection {
    hub: Arc<Mutex<Hub>>,
}

#[derive(Debug, Default)]
struct Hub {
    next_id: u64,
    candidates: Vec<(u64, String, watch::Sender<MasterView>)>,
}

impl Hub {
    fn publish(&self) {
        let leader = self.candidates.first().map(|c| c.1.clone());
        for (i, (_, _, tx)) in self.candidates.iter().enumerate() {
            tx.send_replace(MasterView {
                is_master: i == 0,
                master: leader.clone(),
            });
        }
    }
}

impl InMemoryElection {
    /// A new, empty election.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current master's address.
    pub fn master(&self) -> Option<String> {
        let hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
        hub.candidates.first().map(|c| c.1.clone())
    }

    /// The master steps back to the end of the queue.
    pub fn abdicate(&self) {
        let mut hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
        if !hub.candidates.is_empty() {
            let first = hub.candidates.remove(0);
            hub.candidates.push(first);
            hub.publish();
        }
    }

    async fn run(
        self,
        me: String,
        out: watch::Sender<MasterView>,
        mut stop: watch::Receiver<bool>,
    ) {
        let id = {
            let mut hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
            hub.next_id += 1;
            let id = hub.next_id;
            hub.candidates.push((id, me, out.clone()));
            hub.publish();
            id
        };
        let _ = stop.wait_for(|s| *s).await;
        let mut hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
        hub.candidates.retain(|c| c.0 != id);
        hub.publish();
        out.send_replace(MasterView::default());
    }
}
