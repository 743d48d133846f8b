//! When to ask for one resource's lease again: the one refresh schedule
//! followed by the client core (towards its server) and by an intermediate
//! server's upstream state (towards its parent).
//!
//! Rules, for both:
//! * a new resource is due at once;
//! * after a grant, at the lease's refresh interval (at least 1 s);
//! * a resource the answer left out is asked for again after a retry delay;
//! * after a failure, after the backoff, but never later than the last
//!   lease's refresh interval ([`Lease::retry_delay`]);
//! * never more than one request per minimum interval, except a retry after
//!   a failure;
//! * a demand that moved by more than [`EARLY_REFRESH_CHANGE`] makes the
//!   resource due at once ([`RefreshSchedule::expedite`]); what counts as
//!   "moved" is the caller's rule;
//! * nothing is sent before a hold ends ([`RefreshSchedule::hold`]; only a
//!   newly elected intermediate master holds).
//!
//! Must not: read a clock or know what is asked for.

use doorman_lease::{Lease, Span, Time};

/// A demand that moved by more than this fraction since it was last sent
/// makes the resource due before its refresh interval is up.
pub const EARLY_REFRESH_CHANGE: f64 = 0.10;

/// True when a demand of `now` moved from the `sent` one by more than
/// [`EARLY_REFRESH_CHANGE`]: the holder asks early (`ClientCore`), and a
/// server told of it inside the minimum interval says when to come back.
pub fn moved_early(sent: f64, now: f64) -> bool {
    (now - sent).abs() > EARLY_REFRESH_CHANGE * sent.max(f64::MIN_POSITIVE)
}

/// An intermediate's request for a resource it holds no lease for (new,
/// or dropped after the parent's lease ran out and asked for again) is
/// retried after a failure no later than this, whatever the backoff: the
/// resource serves no one meanwhile, and one caller per node is no herd.
/// (Without it, a parent back after a few seconds' outage was asked again
/// only after the link's backoff had grown past 10 s.)
pub const UNLEASED_UPSTREAM_RETRY: Span = Span::secs(2);

/// After a lease stream failed (ended, cut, hung), its holder polls this
/// long before it opens one again (`doorman_net::StreamLink`; the
/// simulator's streams).
pub const STREAM_RETRY_AFTER_FAILURE: Span = Span::secs(10);

/// After the master said it offers no lease stream (UNIMPLEMENTED), its
/// holder polls this long before it asks again (it may have been upgraded).
pub const STREAM_RETRY_UNSUPPORTED: Span = Span::secs(300);

/// The deadline of an RPC unless configured otherwise: the client
/// library's `rpc_timeout` and the server's parent deadline (a request
/// renewing leases gets less, [`deadline_for`]); the simulator's too.
pub const DEFAULT_RPC_TIMEOUT: Span = Span::secs(5);

/// The shortest deadline a refresh request gets (see [`request_deadline`]).
pub const MIN_REQUEST_DEADLINE: Span = Span::secs(1);

/// The deadline of a request renewing leases refreshed every `refresh`
/// (the shortest among them; `None` without a lease): half of that, so a
/// master that hangs with the request in flight leaves time to ask
/// another before the leases end (waiting the full `max` let them run out
/// before a successor was asked: measured with the fault harness); no
/// shorter than [`MIN_REQUEST_DEADLINE`]; never longer than `max`, the
/// caller's own deadline.
///
/// ```
/// use doorman_core::schedule::request_deadline;
/// use doorman_lease::Span;
/// assert_eq!(request_deadline(Some(Span::secs(8)), Span::secs(5)), Span::secs(4));
/// assert_eq!(request_deadline(Some(Span::secs(1)), Span::secs(5)), Span::secs(1));
/// assert_eq!(request_deadline(None, Span::secs(5)), Span::secs(5));
/// assert_eq!(request_deadline(Some(Span::secs(30)), Span::secs(5)), Span::secs(5));
/// ```
pub fn request_deadline(refresh: Option<Span>, max: Span) -> Span {
    refresh.map_or(max, |r| {
        let half = Span::from_millis(r.as_millis() / 2);
        half.max(MIN_REQUEST_DEADLINE).min(max)
    })
}

/// The deadline of a request renewing `leases` (none held: `max`): the
/// [`request_deadline`] of their shortest refresh period. The client
/// library's and the server's connector (`doorman_net::Connector::
/// deadline_for`) and the simulator's callers all take it from here.
///
/// ```
/// use doorman_core::schedule::deadline_for;
/// use doorman_lease::{Lease, Span, Time};
/// let l = |r| Lease { capacity: 1.0, expiry: Time::from_secs(30), refresh_interval: r };
/// assert_eq!(deadline_for([&l(8), &l(16)], Span::secs(5)), Span::secs(4));
/// assert_eq!(deadline_for([], Span::secs(5)), Span::secs(5));
/// ```
pub fn deadline_for<'a>(leases: impl IntoIterator<Item = &'a Lease>, max: Span) -> Span {
    let refresh = leases.into_iter().map(Lease::refresh_period).min();
    request_deadline(refresh, max)
}

/// The refresh schedule of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefreshSchedule {
    next_refresh: Time,
    last_request: Option<Time>,
    hold_until: Time,
}

impl RefreshSchedule {
    /// A schedule that is due at `now`.
    pub fn new(now: Time) -> Self {
        RefreshSchedule {
            next_refresh: now,
            last_request: None,
            hold_until: Time::ZERO,
        }
    }

    /// When the last request was sent (none since the last failure).
    pub fn last_request(&self) -> Option<Time> {
        self.last_request
    }

    /// The hold set by [`RefreshSchedule::hold`] (`Time::ZERO`: none).
    pub fn hold_until(&self) -> Time {
        self.hold_until
    }

    /// True when the minimum interval and the hold let a request through.
    pub fn allowed(&self, now: Time, min_interval: Span) -> bool {
        now >= self.hold_until
            && self
                .last_request
                .map(|t| now >= t + min_interval)
                .unwrap_or(true)
    }

    /// True when a request is due now and allowed.
    pub fn due(&self, now: Time, min_interval: Span) -> bool {
        now >= self.next_refresh && self.allowed(now, min_interval)
    }

    /// When a request will be due and allowed.
    pub fn next_wakeup(&self, min_interval: Span) -> Time {
        self.last_request
            .map(|t| t + min_interval)
            .unwrap_or(self.next_refresh)
            .max(self.next_refresh)
            .max(self.hold_until)
    }

    /// A request was sent at `now`.
    pub fn sent(&mut self, now: Time) {
        self.last_request = Some(now);
    }

    /// An answer arrived at `now`: ask again after `retry` unless
    /// [`RefreshSchedule::granted`] follows (a resource the answer left out
    /// keeps this).
    pub fn answered(&mut self, now: Time, retry: Span) {
        self.next_refresh = now + retry;
    }

    /// The answer granted `lease`: ask again at its refresh interval, or
    /// after `sooner` seconds when the grantor asked for that (a waiting
    /// downstream server, see `doorman_core::server::Grant`), and never
    /// later than halfway to the lease's end: a lease cut short by the
    /// grantor's own (a parent that failed over renewed its grantor late)
    /// is renewed before it ends rather than a refresh interval later,
    /// when the grantor has a longer one (measured with the fault harness:
    /// a second at 0 for every client of a leaf after its root's master
    /// hung). The minimum interval between requests still applies.
    pub fn granted(&mut self, now: Time, lease: &Lease, sooner: Option<i64>) {
        let mut wait = lease.refresh_period();
        if let Some(s) = sooner {
            wait = wait.min(Span::secs(s.max(1)));
        }
        let half_left = Span::from_millis(lease.remaining(now).as_millis() / 2);
        self.next_refresh = now + wait.min(half_left);
    }

    /// The request failed at `now`: retry after `backoff`, never later than
    /// the `last` lease's refresh interval, and let the retry through the
    /// minimum interval.
    pub fn failed(&mut self, now: Time, last: Option<&Lease>, backoff: Span) {
        self.next_refresh = now + Lease::retry_delay(last, backoff);
        self.last_request = None;
    }

    /// The demand moved: due at once (when the hold and the minimum
    /// interval allow). Returns true when that is earlier than planned.
    pub fn expedite(&mut self, now: Time) -> bool {
        let at = now.max(self.hold_until);
        if self.next_refresh > at {
            self.next_refresh = at;
            return true;
        }
        false
    }

    /// Before the first request: sends nothing before `until`, which may
    /// move the hold either way (a new master's hold, see
    /// `UpstreamState::hold_for_claim`). Once a request was sent, a hold
    /// only grows ([`RefreshSchedule::hold`]).
    pub fn hold_first_request(&mut self, until: Time) {
        if self.last_request.is_some() {
            return self.hold(until);
        }
        // The refresh the hold set moves with it; a later one (a retry
        // after a failure) stays.
        if self.next_refresh <= self.hold_until {
            self.next_refresh = until;
        } else {
            self.next_refresh = self.next_refresh.max(until);
        }
        self.hold_until = until;
    }

    /// Sends nothing before `until` (a hold only ever grows).
    pub fn hold(&mut self, until: Time) {
        self.hold_until = self.hold_until.max(until);
        self.next_refresh = self.next_refresh.max(self.hold_until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Span = Span::secs(1);

    fn t(s: i64) -> Time {
        Time::from_secs(1_000 + s)
    }

    fn lease(refresh: i64) -> Lease {
        Lease {
            capacity: 1.0,
            expiry: t(60),
            refresh_interval: refresh,
        }
    }

    #[test]
    fn a_lease_cut_short_is_renewed_halfway_to_its_end() {
        let mut s = RefreshSchedule::new(t(0));
        s.sent(t(0));
        let short = Lease {
            expiry: t(3),
            ..lease(8)
        };
        s.granted(t(0), &short, None);
        assert_eq!(
            s.next_wakeup(MIN),
            Time::from_millis(t(0).as_millis() + 1_500)
        );
        // A lease that lasts, renewed at its refresh interval as before.
        s.granted(t(0), &lease(8), None);
        assert_eq!(s.next_wakeup(MIN), t(8));
    }

    #[test]
    fn new_is_due_then_waits_for_the_refresh_interval() {
        let mut s = RefreshSchedule::new(t(0));
        assert!(s.due(t(0), MIN));
        s.sent(t(0));
        assert!(!s.due(t(0), MIN));
        s.answered(t(0), Span::secs(5));
        s.granted(t(0), &lease(8), None);
        assert_eq!(s.next_wakeup(MIN), t(8));
        assert!(!s.due(t(7), MIN) && s.due(t(8), MIN));
    }

    #[test]
    fn failures_retry_within_the_refresh_interval_and_bypass_the_minimum() {
        let mut s = RefreshSchedule::new(t(0));
        s.sent(t(0));
        s.failed(t(0), Some(&lease(4)), Span::secs(30));
        assert_eq!(s.next_wakeup(MIN), t(4));
        s.failed(t(0), None, Span::from_millis(100));
        assert!(s.due(t(0) + Span::from_millis(100), MIN));
    }

    #[test]
    fn expedite_respects_the_minimum_interval_and_the_hold() {
        let mut s = RefreshSchedule::new(t(0));
        s.sent(t(0));
        s.granted(t(0), &lease(10), None);
        assert!(s.expedite(t(0)));
        assert!(!s.due(t(0), MIN), "the minimum interval still applies");
        assert_eq!(s.next_wakeup(MIN), t(1));
        assert!(!s.expedite(t(0)), "already due");
        s.hold(t(5));
        assert_eq!(s.next_wakeup(MIN), t(5));
        assert!(!s.due(t(4), MIN) && s.due(t(5), MIN));
        s.hold(t(2));
        assert_eq!(s.hold_until(), t(5), "a hold never shrinks");
    }
}
