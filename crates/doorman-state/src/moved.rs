//! What moved: the resources whose grants may have changed since the
//! lease streams' pusher last looked (a decision, a release, a reload, a
//! cleanup that ended leases). The request paths note them; the pusher
//! (`doorman-grpc`'s `stream::push`) takes them and asks the core what
//! each streaming holder would get now.
//!
//! Must not: decide anything, or cost a request path anything while no
//! stream is open (a noted resource is dropped unless someone listens).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;

/// The resources that moved since the last [`Moved::take`].
#[derive(Debug, Default)]
pub struct Moved {
    inner: Mutex<Inner>,
    /// Wakes the pusher when something moved.
    pub notify: Notify,
    /// A pusher listens (some lease stream is open).
    listening: AtomicBool,
}

#[derive(Debug, Default)]
struct Inner {
    ids: HashSet<String>,
    /// Everything may have moved (a config reload, a cleanup pass).
    all: bool,
}

impl Moved {
    /// Whether moves are kept (the pusher has holders).
    pub fn listen(&self, on: bool) {
        self.listening.store(on, Ordering::Relaxed);
    }

    /// True while moves are kept.
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// `ids` may have moved.
    pub fn note<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        if !self.listening() {
            return;
        }
        let mut inner = self.lock();
        inner.ids.extend(ids.into_iter().map(str::to_string));
        drop(inner);
        self.notify.notify_one();
    }

    /// Every resource may have moved.
    pub fn note_all(&self) {
        if !self.listening() {
            return;
        }
        self.lock().all = true;
        self.notify.notify_one();
    }

    /// What moved since the last call, and whether everything may have.
    pub fn take(&self) -> (Vec<String>, bool) {
        let mut inner = self.lock();
        let all = std::mem::take(&mut inner.all);
        (inner.ids.drain().collect(), all)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_are_kept_only_while_someone_listens() {
        let m = Moved::default();
        m.note(["a"]);
        m.note_all();
        assert_eq!(m.take(), (vec![], false));
        m.listen(true);
        m.note(["a", "a"]);
        assert_eq!(m.take(), (vec!["a".to_string()], false));
        m.note_all();
        assert_eq!(m.take(), (vec![], true));
    }
}
