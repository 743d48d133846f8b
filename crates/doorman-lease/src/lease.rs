//! Lease terms: when a lease expires and how often its holder must refresh.
//!
//! Must not: decide capacity (that is `doorman_algorithms::Shares`).

use crate::time::{Span, Time};

/// A lease on capacity as handed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lease {
    /// Capacity granted.
    pub capacity: f64,
    /// When it expires (server side, millisecond precision).
    pub expiry: Time,
    /// Seconds until the holder should refresh.
    pub refresh_interval: i64,
}

impl Lease {
    /// The expiry as sent on the wire: whole seconds, rounded down, so the
    /// holder always believes its lease ends no later than the server does.
    pub fn wire_expiry(&self) -> i64 {
        self.expiry.whole_secs()
    }

    /// The lease a holder of ours keeps from an answer decided at `at`
    /// (the grantor's clock) to the request it sent at `sent_at` (its
    /// own): [`WireLease::sent`], then [`WireLease::received`], as the
    /// wire's two halves do. The simulator, which has no wire, passes its
    /// leases through this.
    ///
    /// ```
    /// use doorman_lease::{Lease, Span, Time};
    /// let l = Lease { capacity: 2.0, expiry: Time::from_millis(61_999), refresh_interval: 5 };
    /// // Decided at 31.999 s (30 s left) for a request sent at 31.990 s:
    /// // held for 30 s less 1 %, from when the request left.
    /// let held = l.through_wire(Time::from_millis(31_999), Time::from_millis(31_990));
    /// assert_eq!(held.expiry, Time::from_millis(31_990 + 29_700));
    /// ```
    pub fn through_wire(&self, at: Time, sent_at: Time) -> Lease {
        WireLease::sent(self, at).received(sent_at)
    }

    /// What is left of the lease at `now`, zero once it has ended (the
    /// wire's `remaining_ms`).
    ///
    /// ```
    /// use doorman_lease::{Lease, Span, Time};
    /// let l = Lease { capacity: 2.0, expiry: Time::from_secs(100), refresh_interval: 5 };
    /// assert_eq!(l.remaining(Time::from_millis(97_500)), Span::from_millis(2_500));
    /// assert_eq!(l.remaining(Time::from_secs(101)), Span::ZERO);
    /// ```
    pub fn remaining(&self, now: Time) -> Span {
        (self.expiry - now).max(Span::ZERO)
    }

    /// The lease a holder keeps from an answer to the request it sent at
    /// `sent_at` (its own clock): with the sender's `remaining` length, it
    /// ends that long after `sent_at`, less [`CLOCK_RATE_BOUND`] of it
    /// ([`held_for`]), so it ends no later than the sender counts it
    /// whatever the two wall clocks say (the answer was decided after the
    /// request left) while the two monotonic clocks' rates differ by less
    /// than the bound; without it (an original Doorman peer), at
    /// `expiry_secs`, the sender's absolute end, which only holds if the
    /// clocks agree.
    ///
    /// ```
    /// use doorman_lease::{Lease, Span, Time};
    /// // The sender's clock is an hour ahead: its absolute end means
    /// // nothing here, its remaining length does (less 1 %: 100 ms).
    /// let sent = Time::from_secs(1_000);
    /// let l = Lease::received(5.0, 2, 4_600 + 10, Some(Span::secs(10)), sent);
    /// assert_eq!(l.expiry, Time::from_millis(1_009_900));
    /// assert_eq!(Lease::received(5.0, 2, 1_010, None, sent).expiry, Time::from_secs(1_010));
    /// ```
    pub fn received(
        capacity: f64,
        refresh_interval: i64,
        expiry_secs: i64,
        remaining: Option<Span>,
        sent_at: Time,
    ) -> Lease {
        let expiry = match remaining {
            Some(r) => sent_at + held_for(r),
            None => Time::from_secs(expiry_secs),
        };
        Lease {
            capacity,
            expiry,
            refresh_interval,
        }
    }

    /// How long until the holder should refresh (at least a second).
    pub fn refresh_period(&self) -> Span {
        Span::secs(self.refresh_interval.max(1))
    }

    /// The delay before retrying a failed refresh: `backoff`, but never
    /// longer than the `last` lease's refresh period. That is how often the
    /// holder asks when all is well, so retrying at that pace adds no load,
    /// and a recovered server hears from everyone within one interval (the
    /// design doc: "retry in another refresh_interval seconds").
    pub fn retry_delay(last: Option<&Lease>, backoff: Span) -> Span {
        last.map_or(backoff, |l| backoff.min(l.refresh_period()))
    }
}

/// A lease as it crosses the wire: its capacity and refresh interval, its
/// end in whole seconds of the sender's clock, rounded down (all an
/// original Doorman peer sends and reads), and what it had left when sent
/// (`remaining_ms`, which our peers send). The one rule of both halves:
/// `doorman-proto` maps it to the message field by field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WireLease {
    /// Capacity granted.
    pub capacity: f64,
    /// Seconds until the holder should refresh.
    pub refresh_interval: i64,
    /// The end, whole seconds of the sender's clock, rounded down.
    pub expiry_secs: i64,
    /// What it had left when sent, if the sender says.
    pub remaining: Option<Span>,
}

impl WireLease {
    /// Lease `l` as sent at `at` (the sender's clock).
    pub fn sent(l: &Lease, at: Time) -> WireLease {
        WireLease {
            capacity: l.capacity,
            refresh_interval: l.refresh_interval,
            expiry_secs: l.wire_expiry(),
            remaining: Some(l.remaining(at)),
        }
    }

    /// The lease kept from it, in an answer to a request sent at
    /// `sent_at` (the receiver's clock): [`Lease::received`].
    pub fn received(self, sent_at: Time) -> Lease {
        Lease::received(
            self.capacity,
            self.refresh_interval,
            self.expiry_secs,
            self.remaining,
            sent_at,
        )
    }
}

/// The most a holder's monotonic clock may run slower than the clock of
/// the server that granted its lease, as a fraction of the server's rate.
/// A holder keeps a lease for its remaining length less this share of it
/// (Chubby's rule), so it stops using it no later than the server stops
/// counting it while the rates differ by less. NTP slews a clock by at
/// most 500 ppm, so two synchronised hosts differ by at most 1 000 ppm;
/// the bound is ten times that, for virtual machines whose clocks do
/// worse. It costs a lease that runs out 1 % of its length (0.14 s of a
/// 14 s lease); a lease renewed in time loses nothing.
pub const CLOCK_RATE_BOUND: f64 = 0.01;

/// How long a holder keeps a lease the server says has `remaining` left:
/// that less [`CLOCK_RATE_BOUND`] of it, rounded down to the millisecond.
///
/// ```
/// use doorman_lease::{held_for, Span};
/// assert_eq!(held_for(Span::secs(14)), Span::from_millis(13_860));
/// assert_eq!(held_for(Span::from_millis(-5)), Span::ZERO);
/// ```
pub fn held_for(remaining: Span) -> Span {
    let ms = remaining.as_millis().max(0);
    let margin = (ms as f64 * CLOCK_RATE_BOUND).ceil() as i64;
    Span::from_millis(ms - margin)
}

/// How long a receiver must go on counting something its sender says may
/// last `remaining` more (the other side of [`held_for`]: an upper bound,
/// measured from when the answer arrived): that plus [`CLOCK_RATE_BOUND`]
/// of it, rounded up to the millisecond.
///
/// ```
/// use doorman_lease::{counted_for, Span};
/// assert_eq!(counted_for(Span::secs(5)), Span::from_millis(5_050));
/// ```
pub fn counted_for(remaining: Span) -> Span {
    let ms = remaining.as_millis().max(0);
    let margin = (ms as f64 * CLOCK_RATE_BOUND).ceil() as i64;
    Span::from_millis(ms.saturating_add(margin))
}

/// The lease terms of a resource's algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseTerms {
    /// Lease length in seconds (≥ 1).
    pub lease_length: i64,
    /// Refresh interval at the root, in seconds (≥ 1).
    pub refresh_interval: i64,
    /// Factor by which the refresh interval shrinks per level below the
    /// root (0 < factor ≤ 1; default 0.5).
    pub decay_factor: f64,
}

/// The default `decay_factor`.
pub const DEFAULT_DECAY_FACTOR: f64 = 0.5;

/// The refresh interval at `level` (0 = root): `refresh × decay^level`,
/// rounded down, never below 1 second.
///
/// ```
/// use doorman_lease::scaled_refresh_interval;
/// assert_eq!(scaled_refresh_interval(16, 0.5, 0), 16);
/// assert_eq!(scaled_refresh_interval(16, 0.5, 2), 4);
/// assert_eq!(scaled_refresh_interval(5, 0.5, 1), 2);
/// assert_eq!(scaled_refresh_interval(2, 0.5, 5), 1);
/// ```
pub fn scaled_refresh_interval(refresh_interval: i64, decay_factor: f64, level: u32) -> i64 {
    let level = i32::try_from(level).unwrap_or(i32::MAX);
    let scaled = (refresh_interval as f64) * decay_factor.powi(level);
    if scaled.is_finite() {
        (scaled.floor() as i64).max(1)
    } else {
        1
    }
}

impl LeaseTerms {
    /// A lease of `capacity` starting `now` for a server at `level`,
    /// never outliving `upstream_expiry` (the server's own lease from its
    /// parent, if it has one).
    ///
    /// ```
    /// use doorman_lease::{LeaseTerms, Time};
    /// let terms = LeaseTerms { lease_length: 60, refresh_interval: 16, decay_factor: 0.5 };
    /// let l = terms.lease(Time::from_secs(1000), 1, Some(Time::from_secs(1030)), 5.0);
    /// assert_eq!(l.expiry, Time::from_secs(1030));
    /// assert_eq!(l.refresh_interval, 8);
    /// ```
    pub fn lease(
        &self,
        now: Time,
        level: u32,
        upstream_expiry: Option<Time>,
        capacity: f64,
    ) -> Lease {
        let mut expiry = now + Span::secs(self.lease_length);
        if let Some(up) = upstream_expiry {
            expiry = expiry.min(up);
        }
        Lease {
            capacity,
            expiry,
            refresh_interval: scaled_refresh_interval(
                self.refresh_interval,
                self.decay_factor,
                level,
            ),
        }
    }
}
