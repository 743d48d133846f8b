//! The server's side of the election boundary (`doorman-election`): the
//! core as an election sees it ([`Mastership`] over [`ServerState`]), and
//! [`follow`], which applies what the election publishes to the core:
//! winning starts a fresh state in learning mode, losing drops all lease
//! state and turns every RPC into a redirect.
//!
//! Must not: run an election (that is `doorman-election`'s `Standalone`,
//! `doorman-etcd`'s `EtcdElection` or the test kit's), or decide grants.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use doorman_core::server::{Predecessors, Sharded};
use doorman_election::{MasterView, Mastership};
use doorman_lease::{Span, Time};
use tokio::sync::watch;

use crate::state::ServerState;

impl Mastership for ServerState {
    fn now(&self) -> Time {
        ServerState::now(self)
    }

    fn step_down(&self, master: Option<String>) {
        self.core().step_down(master);
    }

    fn set_session_up(&self, up: bool) {
        self.session_up.store(up, Ordering::Relaxed);
    }

    fn set_master_until(&self, until: Time) {
        self.core().set_master_until(Some(until));
    }

    fn fresh_horizon(&self, now: Time) -> Time {
        self.core().fresh_horizon(now)
    }

    fn renew_before(&self) -> Span {
        self.core().horizon_lead().renew_before
    }

    fn horizon_due(&self, now: Time) -> Option<Time> {
        self.core().horizon_due(now)
    }

    fn set_lease_bound(&self, t: Time) {
        self.core().set_lease_bound(Some(t));
    }

    fn lease_bound(&self) -> Option<Time> {
        self.core().lease_bound()
    }

    fn upstream_answered(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.horizon_wake.notified())
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
            state.metrics.master_transition();
            match new.predecessors {
                Predecessors::Unknown => {
                    tracing::info!("became master: fresh state, learning mode starts")
                }
                Predecessors::LeasesEndBy(t) => tracing::info!(
                    learning_at_most_s = (t - now).as_secs_f64().max(0.0),
                    "became master: fresh state; the predecessors' leases end by the recorded horizon, learning lasts until then at most"
                ),
            }
            core.become_master_after(now, new.predecessors, new.lease_bound);
            state.upstream_wake.notify_one();
        }
        (true, false) => {
            state.metrics.master_transition();
            tracing::warn!(master = ?new.master, "lost mastership: lease state dropped, redirecting");
            core.step_down(new.master.clone());
        }
        (false, false) => core.set_master_address(new.master.clone()),
        (true, true) => {}
    }
}
