//! The lease streams, as production runs them: a holder (a client, an
//! intermediate node's master) streams to the master of its target node
//! once a request has been answered there, and polls instead for
//! `STREAM_RETRY_AFTER_FAILURE` after a failed call (`doorman_net::
//! StreamLink`); a redirect reopens it at the new master. After a decision
//! that moved a share, a parent's answer, a parent's push or a cleanup,
//! the node's pusher waits `PUSH_BATCH` and asks its core, as
//! `doorman-grpc`'s pusher does, which holders' grants may have moved
//! (`Sharded::push_candidates`, within the node's `PUSH_BUDGET`) and what
//! each of them that streams would get now under `PUSH_RULE`
//! (`Sharded::push`); the holder takes a
//! push as the client library (`ClientCore::on_push`) or an
//! intermediate's parent link (`Sharded::upstream_push`) does. Messages on
//! one stream arrive in the order they were sent, as on one HTTP/2 stream.
//!
//! Must not: decide anything (the cores do).

use std::collections::HashMap;

use doorman_core::schedule::STREAM_RETRY_AFTER_FAILURE;
use doorman_core::server::{Grant, Push, PushBudget, Sharded, Who, PUSH_BATCH, PUSH_RULE};
use doorman_lease::Time;

use super::tcp::{retransmitted, PUSH_GIVE_UP};
use super::{client_grant, upstream_grant, Caller, Ev, Sim};

/// A holder's lease stream.
#[derive(Debug, Default)]
pub(super) struct Stream {
    /// The master task and link epoch it is open to.
    open: Option<(usize, u64)>,
    /// Not before this is one opened again.
    retry_at: Time,
    /// When the last message down it arrives (the next one arrives later).
    last_down: Time,
    /// When its server last pushed to it.
    last_push: Option<Time>,
    /// How many times it was opened: a push belongs to the stream it was
    /// sent down, and is lost with it (a message the server's TCP sends
    /// again after a cut reaches a connection the holder has dropped).
    opened: u64,
}

impl Stream {
    /// The call ended: answered by a master (`Some`: its task and the link
    /// epoch), or failed.
    pub(super) fn after_call(&mut self, enabled: bool, answered: Option<(usize, u64)>, now: Time) {
        match answered {
            Some(to) if enabled && now >= self.retry_at && self.open != Some(to) => {
                *self = Stream {
                    open: Some(to),
                    opened: self.opened + 1,
                    ..Stream::default()
                };
            }
            Some(_) => {}
            None => {
                if self.open.take().is_some() || self.retry_at <= now {
                    self.retry_at = now + STREAM_RETRY_AFTER_FAILURE;
                }
            }
        }
    }

    /// Open to `task` on link epoch `epoch`.
    pub(super) fn open_to(&self, task: usize, epoch: u64) -> bool {
        self.open == Some((task, epoch))
    }

    /// Still the stream opened as the `opened`th (see [`Stream::opened`]).
    fn still(&self, opened: u64) -> bool {
        self.open.is_some() && self.opened == opened
    }

    /// When a message sent down it, which would arrive at `arrives` on its
    /// own, arrives: never before the one sent before it.
    pub(super) fn down(&mut self, arrives: Time) -> Time {
        self.last_down = self.last_down.max(arrives);
        self.last_down
    }
}

/// A node's pusher.
#[derive(Debug, Default)]
pub(super) struct Pusher {
    /// The resource's generation at the last pass.
    pub(super) seen: Option<u64>,
    /// A pass is queued.
    queued: bool,
    /// The earliest pass queued for pushes held back by the rule.
    later: Option<Time>,
    /// Who may stream to it: its clients and child nodes.
    pub(super) holders: HashMap<Who, Caller>,
    /// How much its passes may still push.
    budget: PushBudget,
}

impl Sim {
    pub(super) fn stream_mut(&mut self, caller: Caller) -> &mut Stream {
        match caller {
            Caller::Client(c) => &mut self.clients[c].stream,
            Caller::Node(n) => &mut self.nodes[n].stream,
        }
    }

    /// Something at `node` may have moved what its holders would get: a
    /// pass after the batch, if none is queued.
    pub(super) fn moved(&mut self, node: usize) {
        let p = &mut self.nodes[node].pusher;
        if !self.scenario.lease_stream || p.queued || p.holders.is_empty() {
            return;
        }
        p.queued = true;
        let at = self.now() + PUSH_BATCH;
        self.push(at, Ev::PushPass(node, false));
    }

    /// The pusher's pass at `node` (`held`: a push held back by the rule
    /// is due, whatever the generation).
    pub(super) fn push_pass(&mut self, node: usize, held: bool) {
        let now = self.now();
        let p = &mut self.nodes[node].pusher;
        if held {
            p.later = p.later.filter(|t| *t > now);
        } else {
            p.queued = false;
        }
        let Some(task) = self.nodes[node].master else {
            return;
        };
        if self.nodes[node].pusher.holders.is_empty() || self.partitioned(node) {
            return;
        }
        let seen = if held {
            None
        } else {
            self.nodes[node].pusher.seen
        };
        let mut budget = std::mem::take(&mut self.nodes[node].pusher.budget);
        let mut later = None;
        let again = budget.part(now, |limit| {
            self.push_part(node, (task, seen, limit), &mut later)
        });
        self.nodes[node].pusher.budget = budget;
        // Holders left over: another pass when the budget has refilled.
        self.push_later(node, later.into_iter().chain(again).min());
    }

    /// Up to `limit` of `node`'s holders whose grant may have moved, and
    /// the pushes due to those streaming to `task`; the earliest push held
    /// back goes to `later`. Returns how many were looked at, how many
    /// pushed to, and whether some were left.
    fn push_part(
        &mut self,
        node: usize,
        (task, seen, limit): (usize, Option<u64>, usize),
        later: &mut Option<Time>,
    ) -> (usize, usize, bool) {
        let now = self.now();
        let n = &mut self.nodes[node];
        let res = self.scenario.resource.as_str();
        let c = n.core.push_candidates(now, res, seen, limit);
        n.pusher.seen = c.generation.or(n.pusher.seen);
        let (looked, more) = (c.looked, c.more);
        let streaming = self.streaming_to(node, task, c.whos);
        if streaming.is_empty() {
            return (looked, 0, more);
        }
        let list: Vec<(Who, Option<Time>)> = streaming.iter().map(|h| (h.1.clone(), h.2)).collect();
        let pushes = self.nodes[node].core.push(now, res, &list, &PUSH_RULE);
        let mut sent = 0;
        for ((caller, _, _), p) in streaming.into_iter().zip(pushes) {
            match p {
                Push::Nothing => {}
                Push::Later(at) => *later = Some(later.map_or(at, |l| l.min(at))),
                Push::Grant(g) => {
                    sent += 1;
                    self.send_push(caller, task, g);
                }
            }
        }
        (looked, sent, more)
    }

    /// One pass for the pushes held back until `at`, unless one is queued
    /// sooner (the server's hub keeps one per resource).
    fn push_later(&mut self, node: usize, at: Option<Time>) {
        let p = &mut self.nodes[node].pusher;
        let Some(at) = at.filter(|at| p.later.is_none_or(|l| *at < l)) else {
            return;
        };
        p.later = Some(at);
        self.push(at, Ev::PushPass(node, true));
    }

    /// Those of `whos` streaming to `task` of `node`: who each is, and
    /// when it was last pushed to.
    fn streaming_to(
        &self,
        node: usize,
        task: usize,
        whos: Vec<Who>,
    ) -> Vec<(Caller, Who, Option<Time>)> {
        let holders = &self.nodes[node].pusher.holders;
        let open = |who: Who| {
            let c = *holders.get(&who)?;
            let (stream, epoch) = match c {
                Caller::Client(i) => (&self.clients[i].stream, self.clients[i].link.epoch()),
                Caller::Node(i) => (&self.nodes[i].stream, self.nodes[i].link.epoch()),
            };
            let last = stream.last_push;
            stream.open_to(task, epoch).then_some((c, who, last))
        };
        whos.into_iter().filter_map(open).collect()
    }

    /// Sends pushed grant `g` from `task` down `caller`'s stream. Across a
    /// cut (the pushing node's, or the holder's if it is a node) it is
    /// lost until the cut ends and TCP sends it again (`tcp.rs`), unless
    /// the server's keep-alive has closed the connection by then.
    fn send_push(&mut self, caller: Caller, task: usize, g: Grant) {
        let now = self.now();
        self.rpcs.pushes += 1;
        let holder = match caller {
            Caller::Node(n) => Some(n),
            Caller::Client(_) => None,
        };
        let cut = [self.target(caller), holder]
            .into_iter()
            .flatten()
            .filter(|&n| self.partitioned(n))
            .map(|n| self.nodes[n].unreachable_until)
            .max();
        let leaves = match cut {
            Some(until) => match retransmitted(now, until, false, now + PUSH_GIVE_UP) {
                Some(t) => t,
                None => return,
            },
            None => now,
        };
        let d = self.delay();
        let epoch = self.link_mut(caller).epoch();
        let stream = self.stream_mut(caller);
        stream.last_push = Some(now);
        let at = stream.down(leaves + d);
        let opened = stream.opened;
        self.push(at, Ev::Pushed(caller, (task, epoch, opened), g));
    }

    /// A pushed grant reaches `caller` (dropped if its stream is gone).
    pub(super) fn pushed(
        &mut self,
        caller: Caller,
        (task, epoch, opened): (usize, u64, u64),
        g: Grant,
    ) {
        let now = self.now();
        let stream = self.stream_mut(caller);
        if !stream.open_to(task, epoch) || !stream.still(opened) {
            return;
        }
        match caller {
            Caller::Client(c) => {
                let cl = &mut self.clients[c];
                let asking = cl.link.busy();
                if cl.core.on_push(now, &[client_grant(&g, now)], asking) {
                    self.poke_client(c);
                }
            }
            Caller::Node(node) => {
                let n = &mut self.nodes[node];
                let asking = n.link.busy();
                let grants = [upstream_grant(&g, (now, now))];
                let moved = !n.core.upstream_push(now, (&grants, asking)).is_empty();
                self.upstream_answered(node);
                if moved {
                    self.moved(node);
                    if !asking {
                        self.schedule_upstream(node, None);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_belongs_to_the_opening_it_was_sent_down() {
        let t = Time::from_secs;
        let mut s = Stream::default();
        s.after_call(true, Some((0, 0)), t(1));
        let first = s.opened;
        assert!(s.open_to(0, 0) && s.still(first));
        // The call fails (a cut): closed; answered again after the retry
        // wait: open to the same task and epoch, but another opening.
        s.after_call(true, None, t(2));
        assert!(!s.still(first));
        s.after_call(true, Some((0, 0)), t(2) + STREAM_RETRY_AFTER_FAILURE);
        assert!(s.open_to(0, 0));
        assert!(!s.still(first), "a push sent down the first is lost");
        assert!(s.still(s.opened));
    }
}
