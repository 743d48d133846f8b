//! Who is on a lease stream: each open stream, the requester it speaks
//! for, the resources it asked for, when it was last pushed to, and the
//! way to its answers. The stream's handler and the pusher both send
//! through here, each decision and its message under the stream's order
//! lock, so a holder gets its grants in the order they were decided (a
//! push decided before an answer never arrives after it).
//!
//! Must not: decide anything (the core does), or block on a slow holder
//! (a stream whose queue is full is ended; its holder polls or reopens).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use doorman_core::server::{Grant, NotMaster, Who};
use doorman_lease::Time;
use doorman_proto::doorman as pb;
use doorman_wire::convert::{client_response, note_text, server_response};
use tokio::sync::mpsc;
use tonic::Status;

use super::Queued;

/// Messages queued to one stream before it counts as not reading.
pub const STREAM_QUEUE: usize = 64;

/// Most resources one stream's holder is pushed for (as many as one
/// request may name).
pub const MAX_STREAM_RESOURCES: usize = doorman_core::limits::MAX_RESOURCES_PER_REQUEST;

/// The sending half of a stream's answers: an end client's
/// (`CapacityStream`) or a downstream server's (`ServerCapacityStream`).
#[derive(Debug, Clone)]
pub enum Outbox {
    /// An end client's stream.
    Client(mpsc::Sender<Queued<pb::GetCapacityResponse>>),
    /// A downstream server's stream.
    Server(mpsc::Sender<Queued<pb::GetServerCapacityResponse>>),
}

impl Outbox {
    /// Queues the answer to a request, or pushed grants; false if the
    /// stream is gone or not reading.
    fn grants(&self, grants: Result<Vec<Grant>, NotMaster>, pushed: bool) -> bool {
        let pushed = pushed.then_some(true);
        match self {
            Outbox::Client(tx) => {
                let note = note_text(&grants);
                let msg = pb::GetCapacityResponse {
                    note,
                    pushed,
                    ..client_response(grants)
                };
                tx.try_send(Ok(Box::new(msg))).is_ok()
            }
            Outbox::Server(tx) => {
                let msg = pb::GetServerCapacityResponse {
                    pushed,
                    ..server_response(grants)
                };
                tx.try_send(Ok(Box::new(msg))).is_ok()
            }
        }
    }

    /// Ends the stream with `status`.
    pub fn fail(&self, status: Status) {
        // A stream that is gone or not reading ends without it.
        let _ = match self {
            Outbox::Client(tx) => tx.try_send(Err(status)).is_ok(),
            Outbox::Server(tx) => tx.try_send(Err(status)).is_ok(),
        };
    }

    /// Resolves once the holder has stopped reading the stream.
    pub async fn closed(&self) {
        match self {
            Outbox::Client(tx) => tx.closed().await,
            Outbox::Server(tx) => tx.closed().await,
        }
    }
}

/// One open stream.
#[derive(Debug)]
pub struct Slot {
    key: u64,
    outbox: Outbox,
    /// Held while a grant for this stream is decided and queued.
    order: Mutex<()>,
}

impl Slot {
    /// Holds the stream's order: decide, then [`Slot::answer`] or
    /// [`Slot::push`], then drop.
    pub fn order(&self) -> MutexGuard<'_, ()> {
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues the answer to a request; false if the stream is gone or not
    /// reading.
    pub fn answer(&self, grants: Result<Vec<Grant>, NotMaster>) -> bool {
        self.outbox.grants(grants, false)
    }

    /// Ends the stream with `status`.
    pub fn fail(&self, status: Status) {
        self.outbox.fail(status);
    }

    /// Queues a pushed grant; false if the stream is gone or not reading.
    pub fn push(&self, grant: Grant) -> bool {
        self.outbox.grants(Ok(vec![grant]), true)
    }

    /// The stream's key in its hub.
    pub fn key(&self) -> u64 {
        self.key
    }
}

#[derive(Debug)]
struct Holder {
    slot: Arc<Slot>,
    who: Option<Who>,
    resources: HashSet<String>,
    last_push: Option<Time>,
}

#[derive(Debug, Default)]
struct Inner {
    next_key: u64,
    streams: HashMap<u64, Holder>,
    /// Each streamed resource's holders, and the stream each speaks on
    /// (the latest, if one holder has two).
    by_resource: HashMap<String, HashMap<Who, u64>>,
    /// Resources with a push held back by the rule, and until when.
    later: BTreeSet<(Time, String)>,
    /// Each streamed resource's generation at its last pass (a pass over
    /// one whose generation has not moved pushes nothing).
    seen: HashMap<String, u64>,
}

/// The open lease streams of a server.
#[derive(Debug, Default)]
pub struct Hub {
    inner: Mutex<Inner>,
}

/// One holder of a resource, as a push pass sees it.
#[derive(Debug, Clone)]
pub struct Holding {
    /// Its stream.
    pub slot: Arc<Slot>,
    /// Who it is.
    pub who: Who,
    /// When it was last pushed to.
    pub last_push: Option<Time>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new stream answering through `outbox`.
    pub fn open(&self, outbox: Outbox) -> Arc<Slot> {
        let mut inner = self.lock();
        inner.next_key += 1;
        let key = inner.next_key;
        let slot = Arc::new(Slot {
            key,
            outbox,
            order: Mutex::new(()),
        });
        let holder = Holder {
            slot: slot.clone(),
            who: None,
            resources: HashSet::new(),
            last_push: None,
        };
        inner.streams.insert(key, holder);
        slot
    }

    /// The stream `key` speaks for `who`, which asked for `ids` (a new
    /// requester on the stream replaces the old one and its resources).
    pub fn hold<'a>(&self, key: u64, who: &Who, ids: impl IntoIterator<Item = &'a str>) {
        let mut inner = self.lock();
        let Inner {
            streams,
            by_resource,
            ..
        } = &mut *inner;
        let Some(h) = streams.get_mut(&key) else {
            return;
        };
        if h.who.as_ref() != Some(who) {
            if let Some(old) = h.who.take() {
                forget_resources(by_resource, (key, &old), h.resources.drain());
            }
            h.who = Some(who.clone());
        }
        for id in ids {
            if h.resources.len() >= MAX_STREAM_RESOURCES || h.resources.contains(id) {
                continue;
            }
            h.resources.insert(id.to_string());
            let holders = by_resource.entry(id.to_string()).or_default();
            holders.insert(who.clone(), key);
        }
    }

    /// The stream `key` ended.
    pub fn close(&self, key: u64) {
        let mut inner = self.lock();
        if let Some(h) = inner.streams.remove(&key) {
            let Inner {
                by_resource, seen, ..
            } = &mut *inner;
            if let Some(who) = &h.who {
                forget_resources(by_resource, (key, who), h.resources.into_iter());
            }
            seen.retain(|id, _| by_resource.contains_key(id));
        }
    }

    /// Open streams.
    pub fn len(&self) -> usize {
        self.lock().streams.len()
    }

    /// True without open streams.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resources a pass looks at: those of `moved` (every one if
    /// `all`) that someone streams for, with the generation seen at their
    /// last pass, and those whose held-back push is due at `now`, without
    /// (they are looked at whatever moved).
    pub fn to_scan(&self, moved: Vec<String>, all: bool, now: Time) -> Vec<(String, Option<u64>)> {
        let mut inner = self.lock();
        let mut out: HashMap<String, Option<u64>> = if all {
            let ids = inner.by_resource.keys();
            ids.map(|id| (id.clone(), inner.seen.get(id).copied()))
                .collect()
        } else {
            let held = |id: &String| inner.by_resource.contains_key(id);
            let ids = moved.into_iter().filter(held);
            ids.map(|id| {
                let seen = inner.seen.get(&id).copied();
                (id, seen)
            })
            .collect()
        };
        while let Some((at, _)) = inner.later.first() {
            if *at > now {
                break;
            }
            if let Some((_, id)) = inner.later.pop_first() {
                out.insert(id, None);
            }
        }
        out.into_iter().collect()
    }

    /// A pass saw `resource` at `generation`.
    pub fn saw(&self, resource: &str, generation: u64) {
        let mut inner = self.lock();
        if inner.by_resource.contains_key(resource) {
            inner.seen.insert(resource.to_string(), generation);
        }
    }

    /// The earliest held-back push.
    pub fn next_later(&self) -> Option<Time> {
        self.lock().later.first().map(|(t, _)| *t)
    }

    /// A push for `resource` is held back until `at`.
    pub fn later(&self, at: Time, resource: &str) {
        self.lock().later.insert((at, resource.to_string()));
    }

    /// Those of `whos` streaming for `resource`.
    pub fn holders_among(&self, resource: &str, whos: Vec<Who>) -> Vec<Holding> {
        let inner = self.lock();
        let Some(holders) = inner.by_resource.get(resource) else {
            return Vec::new();
        };
        let holding = |who: Who| {
            let h = inner.streams.get(holders.get(&who)?)?;
            Some(Holding {
                slot: h.slot.clone(),
                who,
                last_push: h.last_push,
            })
        };
        whos.into_iter().filter_map(holding).collect()
    }

    /// Stream `key` was pushed to at `now`.
    pub fn pushed(&self, key: u64, now: Time) {
        if let Some(h) = self.lock().streams.get_mut(&key) {
            h.last_push = Some(now);
        }
    }
}

/// Stream `key`, speaking for `who`, no longer holds `ids` (left alone
/// where `who` has since spoken on another stream).
fn forget_resources(
    by_resource: &mut HashMap<String, HashMap<Who, u64>>,
    (key, who): (u64, &Who),
    ids: impl Iterator<Item = String>,
) {
    for id in ids {
        if let Some(holders) = by_resource.get_mut(&id) {
            if holders.get(who) == Some(&key) {
                holders.remove(who);
            }
            if holders.is_empty() {
                by_resource.remove(&id);
            }
        }
    }
}
