//! Replaying when a real tree's processes asked (`doorman-sim run
//! --replay-asks FILE`): each listed node's master asks its parent, and
//! each listed client its leaf, at the times the real run's did, so that
//! both trees renew in the same phase and one seed means one history on
//! both sides (docs/sim-vs-real.md, "Each process's renewal phase"). The
//! file is `t,who`: seconds since the start and a node's name or a
//! client's id, one line per ask that was answered;
//! `scripts/upstream-trace.py --asks` writes it from the real servers' and
//! clients' logs.
//!
//! Rules for a replayed caller, with M = [`MATCH`] and its wait W (none
//! for a client, [`NODE_WAIT`] for every node):
//! * it asks on its own as before (its refresh timer, an early refresh on
//!   moved wants, retries); an ask from M before a listed time not yet
//!   matched to W after it matches it;
//! * a listed time that no ask matched by W after it makes it ask then
//!   (`Sharded::upstream_request_now`, `ClientCore::poll_request_now`:
//!   everything it holds, due or not), or as soon as it can after that:
//!   while a call of its own is out, when that call ends; within the
//!   minimum interval after an ask of its own, or before a new master's
//!   hold ends, or with nothing to ask for yet (the simulated clients came
//!   back later than the real ones), looked at every [`POLL`]. Its refresh
//!   timer then starts again from there, as the real one's did. A node's
//!   wait lets an ask the real one made because a child's ask had just
//!   moved its wants come here the same way, after the simulated
//!   network's 1–5 ms. Every node waits the same, so that a parent's and
//!   a child's asks keep their real order (a longer wait for a region
//!   than for its datacenters put a region's renewal after its
//!   datacenter's, which then got the region's old lease: seed 4's cut at
//!   660 s dipped 8 s early). A client has no child and asks at the listed
//!   time itself (a wait of 100 ms sent asks the real clients made 74 ms
//!   before a cut after it);
//! * after a call of its own failed, it asks again only at a listed time
//!   (failed asks are not listed: the next is the real one's first ask
//!   answered after it), not on its backoff: each side's retries follow
//!   a jittered backoff, and when the first ask after a cut leaves
//!   decides whether the leases below run out (a simulated retry sent
//!   7 ms before a cut ended waited a second for TCP's next SYN, and its
//!   clients' leases ran out; the real one's went after the cut);
//! * a listed ask still waiting when the next listed time comes, or a new
//!   master is elected, is dropped; a listed time at which a node has no
//!   master is skipped.
//!
//! So an ask the real process made has one here within W, or later as
//! counted; an extra ask of the simulated one's own stays (the real
//! one did not make it) and its phase is pinned again at the next listed
//! ask. Every case is counted ([`ReplayCounts`], `replay.json`).
//!
//! Must not: draw from either generator: the network's draws then differ
//! only by what the cores do, and the world's (demand, mishaps) not at all,
//! so the plan is the one the real tree ran.

use std::collections::BTreeMap;

use doorman_core::client::RequestItem;
use doorman_core::server::{Sharded, UpstreamAsk};
use doorman_lease::{Span, Time};

use super::{Caller, Ev, Sim};

/// The ask times of a real run, by node name or client id, in seconds
/// since the start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AskTimes {
    /// Each caller's asks, in time order.
    pub by_caller: BTreeMap<String, Vec<f64>>,
}

impl AskTimes {
    /// Parses `t,who` lines after that header.
    pub fn parse(text: &str) -> Result<AskTimes, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h.trim() == "t,who" => {}
            other => {
                let got = other.map_or("nothing", |(_, h)| h);
                return Err(format!("line 1: expected the header t,who, got {got:?}"));
            }
        }
        let mut by_caller: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (i, line) in lines.filter(|(_, l)| !l.trim().is_empty()) {
            let (t, who) = line
                .split_once(',')
                .ok_or_else(|| format!("line {}: expected t,who, got {line:?}", i + 1))?;
            let t: f64 = t
                .trim()
                .parse()
                .ok()
                .filter(|t: &f64| t.is_finite())
                .ok_or_else(|| format!("line {}: t: not a number of seconds: {t:?}", i + 1))?;
            by_caller.entry(who.trim().to_string()).or_default().push(t);
        }
        for times in by_caller.values_mut() {
            times.sort_by(f64::total_cmp);
        }
        Ok(AskTimes { by_caller })
    }
}

/// How long before a listed time an ask of a caller's own matches it:
/// the simulated timer a little ahead of the real one (far less than the
/// minimum interval between two asks, 1 s, which a listed ask sent just
/// after an own one would have to wait).
pub(super) const MATCH: Span = Span::from_millis(100);

/// How long a node's listed ask waits for one of its own: more than a
/// simulated RPC delay (1–5 ms in `real-tree.toml`), so that a child's
/// ask that moved its wants arrives first.
pub(super) const NODE_WAIT: Span = Span::from_millis(20);

/// What the replay did over a run (`replay.json` beside the run's files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplayCounts {
    /// The nodes' listed asks.
    pub nodes: Counts,
    /// The clients' listed asks.
    pub clients: Counts,
}

/// How often a listed ask that could not go yet looks again.
pub(super) const POLL: Span = Span::from_millis(50);

/// What became of one kind of caller's listed asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Listed asks whose time came within the run.
    pub listed: u64,
    /// Matched by an ask of the caller's own within the window.
    pub own: u64,
    /// Sent when the window was over.
    pub after_window: u64,
    /// Sent later, as soon as the caller could (see the rules).
    pub later: u64,
    /// Dropped: still waiting at the next listed time or an election.
    pub dropped: u64,
    /// Skipped: the simulated node had no master.
    pub no_master: u64,
}

/// A caller's part in the replay.
#[derive(Debug, Clone, Default)]
pub(super) struct Pinned {
    /// Its asks are replayed.
    on: bool,
    /// Its listed times, and whether an ask matched each.
    listed: Vec<(Time, bool)>,
    /// Listed times before this one are past the window.
    cursor: usize,
    /// A listed ask to send at the next wake-up.
    force: Option<usize>,
    /// How long a listed ask waits for one of its own.
    wait: Span,
    /// Its last call failed: it retries only at listed times.
    retrying: bool,
}

impl Pinned {
    /// A new master: an ask its predecessor could not send is dropped.
    pub fn new_master(&mut self, counts: Option<&mut ReplayCounts>) {
        if let (Some(_), Some(c)) = (self.force.take(), counts) {
            c.nodes.dropped += 1;
        }
    }

    /// A listed ask waits to go: the caller looks again in [`POLL`].
    pub fn waiting(&self) -> bool {
        self.force.is_some()
    }

    /// A call of the caller's ended (`ok`: answered).
    pub fn call_ended(&mut self, ok: bool) {
        self.retrying = self.on && !ok;
    }

    /// The caller's own asks wait for a listed time: it retries after a
    /// failed call only when the real one did.
    pub fn holds_own(&self) -> bool {
        self.retrying && self.force.is_none()
    }

    /// The first listed time within the window of `now` not yet matched.
    fn in_window(&mut self, now: Time) -> Option<usize> {
        while self
            .listed
            .get(self.cursor)
            .is_some_and(|&(t, _)| t + self.wait < now)
        {
            self.cursor += 1;
        }
        (self.cursor..self.listed.len())
            .take_while(|&i| self.listed[i].0 <= now + MATCH)
            .find(|&i| !self.listed[i].1)
    }

    /// The asks of a wake-up at `now`: a listed one (`forced`, counted), or
    /// the caller's own (`own`), matching a listed time in the window.
    fn asks<C, T>(
        &mut self,
        (now, counts, core): (Time, &mut Counts, &mut C),
        forced: impl FnOnce(&mut C) -> Option<T>,
        own: impl FnOnce(&mut C) -> Option<T>,
    ) -> Option<T> {
        if !self.on {
            return own(core);
        }
        if let Some(i) = self.force.take() {
            let asks = forced(core);
            match &asks {
                Some(_) if now == self.listed[i].0 + self.wait => counts.after_window += 1,
                Some(_) => counts.later += 1,
                None => self.force = Some(i),
            }
            self.listed[i].1 = asks.is_some();
            return asks;
        }
        if self.retrying {
            return None;
        }
        let asks = own(core);
        if asks.is_some() {
            if let Some(i) = self.in_window(now) {
                self.listed[i].1 = true;
                counts.own += 1;
            }
        }
        asks
    }
}

impl Sim {
    /// Makes the callers of `asks` ask at its times (before [`Sim::run`]).
    /// A name that is neither a node nor a client, or the root (which has
    /// no parent), is an error.
    pub fn replay_asks(&mut self, asks: &AskTimes) -> Result<(), String> {
        for (who, times) in &asks.by_caller {
            let caller = self.caller_named(who)?;
            let wait = match caller {
                Caller::Client(_) => Span::ZERO,
                Caller::Node(_) => NODE_WAIT,
            };
            let start = self.start;
            let at = |t: f64| (start + Span::from_millis((t * 1000.0).round() as i64)).max(start);
            let listed: Vec<(Time, bool)> = times.iter().map(|&t| (at(t), false)).collect();
            for (i, &(t, _)) in listed.iter().enumerate() {
                self.push(t + wait, Ev::ReplayAsk(caller, i));
            }
            let pinned = self.pinned_mut(caller);
            (pinned.on, pinned.listed, pinned.wait) = (true, listed, wait);
        }
        self.replay = Some(ReplayCounts::default());
        Ok(())
    }

    fn caller_named(&self, who: &str) -> Result<Caller, String> {
        if let Some(n) = self.nodes.iter().position(|n| n.name == who) {
            if self.nodes[n].parent.is_none() {
                return Err(format!("{who:?}: the root asks no parent"));
            }
            return Ok(Caller::Node(n));
        }
        let c = self.clients.iter().position(|c| &*c.id == who);
        c.map(Caller::Client)
            .ok_or_else(|| format!("{who:?}: neither a node nor a client of the scenario"))
    }

    fn pinned_mut(&mut self, caller: Caller) -> &mut Pinned {
        match caller {
            Caller::Node(n) => &mut self.nodes[n].replay,
            Caller::Client(c) => &mut self.clients[c].replay,
        }
    }

    /// What the replay did so far (`None`: no replay).
    pub fn replay_counts(&self) -> Option<ReplayCounts> {
        self.replay
    }

    fn counts(&mut self, caller: Caller) -> &mut Counts {
        let r = self.replay.get_or_insert_with(Default::default);
        match caller {
            Caller::Node(_) => &mut r.nodes,
            Caller::Client(_) => &mut r.clients,
        }
    }

    /// The window after listed ask `i` of `caller` is over.
    pub(super) fn replay_ask(&mut self, caller: Caller, i: usize) {
        self.counts(caller).listed += 1;
        if self.pinned_mut(caller).listed[i].1 {
            return;
        }
        if self.pinned_mut(caller).force.is_some() {
            self.counts(caller).dropped += 1;
        }
        if let Caller::Node(n) = caller {
            if self.nodes[n].master.is_none() {
                self.counts(caller).no_master += 1;
                return;
            }
        }
        self.pinned_mut(caller).force = Some(i);
        match caller {
            // A busy caller looks when its call ends (`rpc.rs`'s `finish`).
            Caller::Node(n) if self.nodes[n].link.busy() => self.nodes[n].poke = true,
            Caller::Client(c) if self.clients[c].link.busy() => {}
            Caller::Node(n) => self.upstream_wake(n, self.nodes[n].wake_gen),
            Caller::Client(c) => self.client_wake(c, self.clients[c].wake_gen),
        }
    }

    /// The asks of node `node`'s wake-up at `now` (see the module's rules).
    pub(super) fn node_asks(&mut self, node: usize, now: Time) -> Option<Vec<UpstreamAsk>> {
        let n = &mut self.nodes[node];
        let Some(r) = self.replay.as_mut() else {
            return n.core.upstream_request(now);
        };
        n.replay.asks(
            (now, &mut r.nodes, &mut n.core),
            |core| core.upstream_request_now(now),
            |core| core.upstream_request(now),
        )
    }

    /// The request of client `c`'s wake-up at `now` (see the module's
    /// rules).
    pub(super) fn client_asks(&mut self, c: usize, now: Time) -> Option<Vec<RequestItem>> {
        let cl = &mut self.clients[c];
        let Some(r) = self.replay.as_mut() else {
            return cl.core.poll_request(now);
        };
        cl.replay.asks(
            (now, &mut r.clients, &mut cl.core),
            |core| Some(core.poll_request_now(now)).filter(|i| !i.is_empty()),
            |core| core.poll_request(now),
        )
    }
}
