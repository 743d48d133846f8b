//! The client's bottom half as a sans-IO state machine: which resources it
//! holds, their leases, when to refresh, what to put in the next bulk
//! GetCapacity, and what capacity applies now (a lease, or the fallback when
//! the lease has run out). Time is an argument, so the async `doorman_client::Client`
//! and the simulation drive the same logic.
//!
//! Must not: do I/O, read a clock, or know about handles and token buckets.

use std::collections::BTreeMap;

use doorman_lease::{Lease, Span, Time};

use crate::refusal::Reason;
use crate::schedule::{moved_early, RefreshSchedule};

/// What a resource falls back to when its lease expires without renewal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fallback {
    /// Capacity 0: stop using the resource. Safest; right for batch jobs.
    Pessimistic,
    /// Capacity = wants: keep going as if everything was granted. Right for
    /// user-facing work on resources protected by other means.
    Optimistic,
    /// The last safe capacity the server sent, else `default`.
    Safe {
        /// Used when the server never sent a safe capacity.
        default: f64,
    },
}

/// Which capacity applies to a resource right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A valid lease from the server.
    Lease,
    /// No valid lease; pessimistic fallback (0).
    Pessimistic,
    /// No valid lease; optimistic fallback (wants).
    Optimistic,
    /// No valid lease; safe fallback.
    Safe,
    /// The server refused the resource (PERMISSION_DENIED or
    /// INVALID_ARGUMENT): capacity 0, asked again only after
    /// [`CoreOptions::refused_retry_interval`].
    Refused,
}

impl Mode {
    /// Lower-case name (for metrics and logs).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Lease => "lease",
            Mode::Pessimistic => "pessimistic",
            Mode::Optimistic => "optimistic",
            Mode::Safe => "safe",
            Mode::Refused => "refused",
        }
    }

    /// A fallback mode (the lease ran out), as opposed to a lease or a
    /// refusal.
    pub fn is_fallback(self) -> bool {
        matches!(self, Mode::Pessimistic | Mode::Optimistic | Mode::Safe)
    }

    /// All modes.
    pub const ALL: [Mode; 5] = [
        Mode::Lease,
        Mode::Pessimistic,
        Mode::Optimistic,
        Mode::Safe,
        Mode::Refused,
    ];
}

/// Why the server refused a resource (not a transient failure), as the
/// shell read it from the status details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The reason the server gave for this resource, or for the whole
    /// request it was part of.
    Reason(Reason),
    /// A refusal without details (a server that sends none) concerns
    /// every resource of the request: PERMISSION_DENIED if `denied`, else
    /// INVALID_ARGUMENT. The server's message is kept for people, never
    /// read.
    Unexplained {
        /// PERMISSION_DENIED rather than INVALID_ARGUMENT.
        denied: bool,
        /// The server's message.
        message: String,
    },
}

impl Refused {
    /// True for a denial by the server's access rules.
    pub fn is_denial(&self) -> bool {
        match self {
            Refused::Reason(r) => r.is_denial(),
            Refused::Unexplained { denied, .. } => *denied,
        }
    }

    /// Why resource `id` is refused, for people.
    pub fn describe(&self, id: &str) -> String {
        match self {
            Refused::Reason(Reason::Denied { identity, action }) => {
                crate::refusal::denial(identity.as_deref(), *action, Some(id))
            }
            Refused::Reason(r) => r.to_string(),
            Refused::Unexplained { message, .. } => message.clone(),
        }
    }
}

/// Settings of a [`ClientCore`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreOptions {
    /// Never more than one request per resource per this interval.
    pub min_refresh_interval: Span,
    /// Fallback when a lease runs out.
    pub fallback: Fallback,
    /// When the server's answer left a resource out, ask again after this.
    pub retry_interval: Span,
    /// When the server refused a resource (its access rules, an invalid
    /// id), ask again only after this: the refusal is not transient, but a
    /// config change may lift it.
    pub refused_retry_interval: Span,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            min_refresh_interval: Span::secs(1),
            fallback: Fallback::Pessimistic,
            retry_interval: Span::secs(1),
            refused_retry_interval: Span::secs(60),
        }
    }
}

/// One resource of a bulk request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestItem {
    /// The resource.
    pub resource_id: String,
    /// Its priority band.
    pub priority: i64,
    /// The unexpired lease held, if any.
    pub has: Option<Lease>,
    /// What is wanted.
    pub wants: f64,
}

/// One resource of a response.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantItem {
    /// The resource.
    pub resource_id: String,
    /// The lease (expiry as sent on the wire, whole seconds).
    pub lease: Lease,
    /// Safe capacity, if the server sent one.
    pub safe_capacity: Option<f64>,
    /// The server serves the resource in shadow mode: enforce nothing,
    /// count what would have been refused.
    pub shadow: bool,
}

#[derive(Debug, Clone)]
struct State {
    priority: i64,
    wants: f64,
    sent_wants: Option<f64>,
    lease: Option<Lease>,
    safe: Option<f64>,
    schedule: RefreshSchedule,
    /// Why the server refused it, until it grants it again.
    refused: Option<Refused>,
    /// A pushed grant lowered it: the server counts the old lease until a
    /// request claims the lower one, sent at once ([`ClientCore::on_push`]).
    ack: bool,
    /// The last grant said the resource is in shadow mode.
    shadow: bool,
}

impl State {
    /// Asks early when the wants moved from what was last sent
    /// ([`moved_early`]; never sent: at once). A refused resource waits for
    /// its retry whatever its wants do.
    fn expedite_if_moved(&mut self, now: Time) {
        let moved = self
            .sent_wants
            .is_none_or(|sent| moved_early(sent, self.wants));
        if moved && self.refused.is_none() {
            self.schedule.expedite(now);
        }
    }
}

/// The bottom half's state.
#[derive(Debug, Clone)]
pub struct ClientCore {
    client_id: String,
    opts: CoreOptions,
    /// Each state boxed: a B-tree leaf holds room for 11 values, so with
    /// them inline a client of one resource carried a 1.9 KB node (most of
    /// a simulated client's memory at a million clients); boxed, 0.4 KB
    /// and the state.
    resources: BTreeMap<String, Box<State>>,
}

impl ClientCore {
    /// An empty client.
    pub fn new(client_id: impl Into<String>, opts: CoreOptions) -> Self {
        ClientCore {
            client_id: client_id.into(),
            opts,
            resources: BTreeMap::new(),
        }
    }

    /// The client id sent with every request.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The options.
    pub fn options(&self) -> &CoreOptions {
        &self.opts
    }

    /// Starts tracking a resource; it is asked for at the next poll.
    /// Adding a tracked resource only updates its priority and wants.
    pub fn add(&mut self, resource_id: &str, priority: i64, wants: f64, now: Time) {
        if let Some(s) = self.resources.get_mut(resource_id) {
            s.priority = priority;
            self.set_wants(resource_id, wants, now);
            return;
        }
        self.resources.insert(
            resource_id.to_string(),
            Box::new(State {
                priority,
                wants: sanitize(wants),
                sent_wants: None,
                lease: None,
                safe: None,
                schedule: RefreshSchedule::new(now),
                refused: None,
                ack: false,
                shadow: false,
            }),
        );
    }

    /// Stops tracking a resource. Returns whether it was tracked.
    pub fn remove(&mut self, resource_id: &str) -> bool {
        self.resources.remove(resource_id).is_some()
    }

    /// Resources tracked.
    pub fn resource_ids(&self) -> impl Iterator<Item = &str> {
        self.resources.keys().map(String::as_str)
    }

    /// Updates wants; a change of more than 10 % in either direction from
    /// what was last sent ([`moved_early`]) makes the resource due as soon
    /// as the minimum interval allows.
    pub fn set_wants(&mut self, resource_id: &str, wants: f64, now: Time) {
        let Some(s) = self.resources.get_mut(resource_id) else {
            return;
        };
        s.wants = sanitize(wants);
        s.expedite_if_moved(now);
    }

    /// When the client should next wake up: the earliest refresh due or
    /// lease expiry (to switch to fallback on time). `None` when idle.
    pub fn next_wakeup(&self, now: Time) -> Option<Time> {
        let min = self.opts.min_refresh_interval;
        self.resources
            .values()
            .flat_map(|s| {
                let refresh = s.schedule.next_wakeup(min);
                let expiry = s.lease.map(|l| l.expiry).filter(|e| *e > now);
                [Some(refresh), expiry, s.ack.then_some(now)]
            })
            .flatten()
            .min()
    }

    /// The next time a lease runs out (after `now`): what applies then
    /// changes even if no answer comes, so a caller waiting for one must
    /// still wake up at this time. `None` without an unexpired lease.
    pub fn next_expiry(&self, now: Time) -> Option<Time> {
        self.resources
            .values()
            .filter_map(|s| s.lease.map(|l| l.expiry).filter(|e| *e > now))
            .min()
    }

    /// If any resource is due, returns one bulk request with every resource
    /// the minimum interval allows (so all refresh together, at the smallest
    /// refresh interval), and records them as requested at `now`.
    pub fn poll_request(&mut self, now: Time) -> Option<Vec<RequestItem>> {
        let min = self.opts.min_refresh_interval;
        if !self
            .resources
            .values()
            .any(|s| s.ack || s.schedule.due(now, min))
        {
            return None;
        }
        Some(self.poll_request_now(now))
    }

    /// The request [`ClientCore::poll_request`] would make at `now` if a
    /// resource were due: every resource the minimum interval allows (an
    /// acknowledgement at once), marked sent. The simulator replays a real
    /// client's requests with it (`doorman-sim run --replay-asks`).
    pub fn poll_request_now(&mut self, now: Time) -> Vec<RequestItem> {
        let min = self.opts.min_refresh_interval;
        let mut items = Vec::new();
        for (id, s) in self.resources.iter_mut() {
            // A refused resource rides along only once its own retry is due;
            // an acknowledgement goes at once.
            let refused_waits = s.refused.is_some() && !s.schedule.due(now, min);
            if !std::mem::take(&mut s.ack) && (!s.schedule.allowed(now, min) || refused_waits) {
                continue;
            }
            items.push(RequestItem {
                resource_id: id.clone(),
                priority: s.priority,
                has: s.lease.filter(|l| l.expiry > now),
                wants: s.wants,
            });
            s.schedule.sent(now);
            s.sent_wants = Some(s.wants);
        }
        items
    }

    /// Applies a response to the request for `requested`. Resources the
    /// server left out keep their lease and are asked for again after the
    /// retry interval.
    pub fn on_response(&mut self, now: Time, requested: &[String], grants: &[GrantItem]) {
        for id in requested {
            if let Some(s) = self.resources.get_mut(id) {
                s.schedule.answered(now, self.opts.retry_interval);
            }
        }
        for g in grants {
            let Some(s) = self.resources.get_mut(&g.resource_id) else {
                continue;
            };
            let capacity = sanitize(g.lease.capacity);
            s.lease = Some(Lease {
                capacity,
                ..g.lease
            });
            if let Some(safe) = g.safe_capacity.filter(|x| x.is_finite() && *x >= 0.0) {
                s.safe = Some(safe);
            }
            s.refused = None;
            s.shadow = g.shadow;
            s.schedule.granted(now, &g.lease, None);
            // Wants that moved while the request was out go early still.
            s.expedite_if_moved(now);
        }
    }

    /// Grants the server pushed on a lease stream at `now`: each
    /// resource holding an unexpired lease takes the new capacity (and
    /// safe capacity) for the rest of that lease (a push never renews
    /// one). Returns whether any was lowered: each such one is
    /// acknowledged by the next request ([`ClientCore::poll_request`],
    /// due at once), since the server counts the old lease until then.
    ///
    /// While a request is `asking` (sent, its answer not yet in), a
    /// raise is not taken: the server decided it before that request
    /// (answers and pushes come in the order they were decided), and the
    /// request claims the lease held before it, which is all the server
    /// counts beside its answer; the answer supersedes the raise. (Taken,
    /// it was used above what the server counted until the answer came:
    /// the fault harness saw 0.02 of 100 over for 7 ms.) A lowering is
    /// taken at once, asking or not.
    pub fn on_push(&mut self, now: Time, grants: &[GrantItem], asking: bool) -> bool {
        let mut lowered = false;
        for g in grants {
            let Some(s) = self.resources.get_mut(&g.resource_id) else {
                continue;
            };
            let Some(lease) = s.lease.as_mut().filter(|l| l.expiry > now) else {
                continue;
            };
            let capacity = sanitize(g.lease.capacity);
            if capacity < lease.capacity {
                s.ack = true;
                lowered = true;
            } else if asking {
                continue;
            }
            lease.capacity = capacity;
            s.shadow = g.shadow;
            if let Some(safe) = g.safe_capacity.filter(|x| x.is_finite() && *x >= 0.0) {
                s.safe = Some(safe);
            }
        }
        lowered
    }

    /// The request for `requested` failed at `now`; try again after the
    /// `backoff` delay, but never later than the last lease's refresh
    /// interval ([`Lease::retry_delay`]).
    pub fn on_failure(&mut self, now: Time, requested: &[String], backoff: Span) {
        for id in requested {
            if let Some(s) = self.resources.get_mut(id) {
                s.schedule.failed(now, s.lease.as_ref(), backoff);
            }
        }
    }

    /// The server refused each of `refused` at `now` for its reason (its
    /// access rules, an invalid field): no capacity, the lease dropped,
    /// and no new request before the refused-retry interval.
    pub fn on_refused(&mut self, now: Time, refused: &[(String, Refused)]) {
        let later = self.opts.refused_retry_interval;
        for (id, why) in refused {
            if let Some(s) = self.resources.get_mut(id) {
                s.refused = Some(why.clone());
                s.shadow = false;
                s.lease = None;
                s.schedule.failed(now, None, later);
            }
        }
    }

    /// Whether the server's last grant put the resource in shadow mode
    /// (false before any grant: a resource enforces until told).
    pub fn shadow(&self, id: &str) -> bool {
        self.resources.get(id).is_some_and(|s| s.shadow)
    }

    /// Why the server refused the resource, while it does.
    pub fn refusal(&self, resource_id: &str) -> Option<&Refused> {
        self.resources.get(resource_id)?.refused.as_ref()
    }

    /// The capacity that applies now and why: the lease while it is valid,
    /// 0 while refused, else the fallback.
    pub fn capacity(&self, resource_id: &str, now: Time) -> Option<(f64, Mode)> {
        let s = self.resources.get(resource_id)?;
        if s.refused.is_some() {
            return Some((0.0, Mode::Refused));
        }
        if let Some(l) = s.lease.filter(|l| l.expiry > now) {
            return Some((l.capacity, Mode::Lease));
        }
        Some(match self.opts.fallback {
            Fallback::Pessimistic => (0.0, Mode::Pessimistic),
            Fallback::Optimistic => (s.wants, Mode::Optimistic),
            Fallback::Safe { default } => (s.safe.unwrap_or(default), Mode::Safe),
        })
    }

    /// The lease held (valid or not).
    pub fn lease(&self, resource_id: &str) -> Option<Lease> {
        self.resources.get(resource_id).and_then(|s| s.lease)
    }

    /// The wants recorded.
    pub fn wants(&self, resource_id: &str) -> Option<f64> {
        self.resources.get(resource_id).map(|s| s.wants)
    }
}

fn sanitize(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests;
