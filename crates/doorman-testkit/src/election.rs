//! An election inside one process, for tests: the first candidate to run
//! is master; when it stops (or abdicates) the next one takes over.
//!
//! Must not: be used outside tests (it coordinates nothing across
//! processes).

use std::sync::{Arc, Mutex};

use doorman_election::{Candidacy, Election, ElectionFuture, MasterView};
use tokio::sync::watch;

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
                ..MasterView::default()
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

    async fn campaign(self, c: Candidacy) {
        let Candidacy {
            me,
            out,
            mut stop,
            stop_granting,
            ..
        } = c;
        let id = {
            let mut hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
            hub.next_id += 1;
            let id = hub.next_id;
            hub.candidates.push((id, me, out.clone()));
            hub.publish();
            id
        };
        let _ = stop.wait_for(|s| *s).await;
        // Leave in the documented order: stop granting, publish, release.
        stop_granting.and_publish(&out);
        let mut hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
        hub.candidates.retain(|c| c.0 != id);
        hub.publish();
    }
}

impl Election for InMemoryElection {
    fn run(&self, c: Candidacy) -> ElectionFuture {
        Box::pin(self.clone().campaign(c))
    }
}
