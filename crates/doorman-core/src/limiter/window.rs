//! Estimating what a resource wants from how it is used (the client
//! library's `Wants::Auto`, the server's Envoy rate limit service), over a
//! sliding window of one-second slots (10 s by default).
//!
//! * Rate resources: the rate at which `wait`/`try_acquire` are called
//!   (permits asked for per second, refused attempts included), as an
//!   exponentially weighted moving average over the window's seconds (each
//!   second weighs [`DECAY`] times the one after it, so half the weight is
//!   on the last ~2.4 s): a step of demand is 30 % followed after one
//!   second and 60 % after three, so a short burst moves it little and a
//!   lasting change is followed within seconds (a plain mean over the
//!   window needed the whole 10 s). A steady rate is estimated exactly.
//!   Callers that
//!   loop on `wait()` can only call as fast as they are granted, so when more
//!   than a tenth of the `wait` calls in the window had to block, the
//!   estimate is raised by half (at least +1) to probe for more capacity;
//!   the server caps the grant at the fair share.
//! * Gauge resources: the peak of (in flight + waiting) over the window.
//!
//! Must not: read a clock (it is driven by the `now` it is given).

use doorman_lease::{Span, Time};

/// Number of one-second slots.
pub const WINDOW_SLOTS: usize = 10;

/// Weight of each second relative to the next one in the rate's moving
/// average.
pub const DECAY: f64 = 0.75;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    second: u64,
    permits: f64,
    waits: u64,
    blocked: u64,
    peak: f64,
}

/// A sliding window of per-second usage.
///
/// ```
/// use doorman_core::limiter::UsageWindow;
/// use doorman_lease::{Span, Time};
/// let t0 = Time::from_secs(100);
/// let mut w = UsageWindow::new(t0);
/// w.record_call(t0, 5.0);
/// assert_eq!(w.rate(t0 + Span::from_millis(500)), 10.0);
/// ```
#[derive(Debug, Clone)]
pub struct UsageWindow {
    origin: Time,
    slots: [Slot; WINDOW_SLOTS],
}

impl UsageWindow {
    /// An empty window starting at `now`.
    pub fn new(now: Time) -> Self {
        UsageWindow {
            origin: now,
            slots: [Slot::default(); WINDOW_SLOTS],
        }
    }

    /// Time since the origin (zero before it).
    fn since(&self, now: Time) -> Span {
        (now - self.origin).max(Span::ZERO)
    }

    fn slot(&mut self, now: Time) -> &mut Slot {
        let second = self.since(now).whole_secs() as u64;
        let s = &mut self.slots[(second % WINDOW_SLOTS as u64) as usize];
        if s.second != second {
            *s = Slot {
                second,
                ..Slot::default()
            };
        }
        s
    }

    /// A rate acquisition attempt of `n` permits.
    pub fn record_call(&mut self, now: Time, n: f64) {
        self.slot(now).permits += n;
    }

    /// A `wait` call finished; `blocked` if it had to wait.
    pub fn record_wait(&mut self, now: Time, blocked: bool) {
        let s = self.slot(now);
        s.waits += 1;
        s.blocked += u64::from(blocked);
    }

    /// The level of a gauge (in flight + waiting) at `now`.
    pub fn record_level(&mut self, now: Time, level: f64) {
        let s = self.slot(now);
        s.peak = s.peak.max(level);
    }

    fn live(&self, now: Time) -> impl Iterator<Item = &Slot> {
        let second = self.since(now).whole_secs() as u64;
        self.slots
            .iter()
            .filter(move |s| s.second + (WINDOW_SLOTS as u64) > second && s.second <= second)
    }

    /// Estimated permits per second wanted: the moving average of the
    /// per-second rates of the current (partial) second and the previous
    /// ones in the window, each second weighing [`DECAY`] times the next.
    pub fn rate(&self, now: Time) -> f64 {
        let elapsed = self.since(now).as_secs_f64();
        let current = elapsed as u64;
        let (mut permits, mut spans, mut weight) = (0.0, 0.0, 1.0);
        let (mut waits, mut blocked) = (0, 0);
        for age in 0..=current.min(WINDOW_SLOTS as u64 - 1) {
            let second = current - age;
            let s = &self.slots[(second % WINDOW_SLOTS as u64) as usize];
            if s.second == second {
                permits += weight * s.permits;
                waits += s.waits;
                blocked += s.blocked;
            }
            spans += weight * if age == 0 { elapsed.fract() } else { 1.0 };
            weight *= DECAY;
        }
        // A quarter second at least, so the first calls do not look like a
        // huge rate.
        let rate = permits / spans.max(0.25);
        if waits > 0 && blocked * 10 > waits {
            (rate * 1.5).max(rate + 1.0)
        } else {
            rate
        }
    }

    /// Peak gauge level over the window.
    pub fn peak(&self, now: Time) -> f64 {
        self.live(now).map(|s| s.peak).fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_over_the_window() {
        let t0 = Time::from_secs(1_000);
        let mut w = UsageWindow::new(t0);
        for i in 0..200 {
            w.record_call(t0 + Span::from_millis(i * 50), 1.0);
        }
        // 200 calls over 10 s.
        let r = w.rate(t0 + Span::from_millis(10_000));
        assert!((r - 20.0).abs() < 2.5, "{r}");
        // Old slots fall out of the window.
        assert_eq!(w.rate(t0 + Span::secs(30)), 0.0);
    }

    #[test]
    fn a_change_of_demand_is_followed_within_seconds() {
        let t0 = Time::from_secs(1_000);
        let mut w = UsageWindow::new(t0);
        // 10/s for 10 s, then 40/s; the estimate read as time goes.
        for i in 0..100 {
            w.record_call(t0 + Span::from_millis(i * 100), 1.0);
        }
        let steady = w.rate(t0 + Span::from_millis(10_000));
        assert!((steady - 10.0).abs() < 1e-9, "steady: {steady}");
        let mut after = Vec::new();
        for i in 0..120 {
            w.record_call(t0 + Span::from_millis(10_000 + i * 25), 1.0);
            if (i + 1) % 40 == 0 {
                after.push(w.rate(t0 + Span::from_millis(10_000 + (i + 1) * 25)));
            }
        }
        let (after_1, after_3) = (after[0], after[2]);
        assert!(after_1 > 15.0 && after_1 < 25.0, "one second in: {after_1}");
        assert!(
            after_3 > 25.0 && after_3 < 35.0,
            "three seconds in: {after_3}"
        );
    }

    #[test]
    fn blocked_waits_raise_the_estimate() {
        let t0 = Time::from_secs(1_000);
        let mut w = UsageWindow::new(t0);
        for i in 0..10 {
            let t = t0 + Span::from_millis(i * 100);
            w.record_call(t, 1.0);
            w.record_wait(t, true);
        }
        // 10 calls in the first 0.999 s, all blocked: 1.5 × 10 / 0.999.
        let r = w.rate(t0 + Span::from_millis(999));
        assert!((r - 15.0 / 0.999).abs() < 1e-9, "{r}");
    }

    #[test]
    fn gauge_peak() {
        let t0 = Time::from_secs(1_000);
        let mut w = UsageWindow::new(t0);
        w.record_level(t0, 3.0);
        w.record_level(t0 + Span::secs(2), 7.0);
        w.record_level(t0 + Span::secs(3), 1.0);
        assert_eq!(w.peak(t0 + Span::secs(5)), 7.0);
        assert_eq!(w.peak(t0 + Span::secs(13)), 0.0);
    }
}
