//! When each request of `doorman loadtest` is sent, and from when its
//! latency is timed. Closed loop (the default): each of the K workers sends
//! its next request as soon as the last one is answered, timed from the
//! send. Open loop (`--rate R`): request k is due at start + k / R whatever
//! happened before, and is timed from when it was due, as wrk2 does: a
//! server that stalls makes the requests due meanwhile late, and that
//! lateness is in the percentiles instead of slowing the load down
//! (coordinated omission).
//!
//! Must not: send a request before it is due.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The schedule of one run.
#[derive(Debug)]
pub(super) struct Pace {
    /// When request 0 is due (open loop).
    origin: Instant,
    /// Requests per second over all workers; `None`: closed loop.
    rate: Option<f64>,
    /// The next request's number (open loop).
    next: AtomicU64,
}

impl Pace {
    pub fn new(origin: Instant, rate: Option<f64>) -> Self {
        Pace {
            origin,
            rate,
            next: AtomicU64::new(0),
        }
    }

    /// Waits until the next request is due and says when that was (the
    /// time its latency counts from); `None` once requests would be due at
    /// or after `end`. A request already late is not waited for.
    pub async fn next(&self, end: Instant) -> Option<Instant> {
        let Some(rate) = self.rate else {
            let now = Instant::now();
            return (now < end).then_some(now);
        };
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        let due = self.origin + Duration::from_secs_f64(k as f64 / rate);
        if due >= end {
            return None;
        }
        tokio::time::sleep_until(due.into()).await;
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_loop_requests_are_due_on_a_fixed_schedule_and_timed_from_it() {
        let origin = Instant::now();
        let end = origin + Duration::from_secs(60);
        let pace = Pace::new(origin, Some(1000.0));
        assert_eq!(pace.next(end).await, Some(origin));
        // The sender stalls for 200 ms: the next request was due 1 ms after
        // the first and is sent at once, its latency counting from then.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let due = pace.next(end).await.unwrap();
        assert_eq!(due, origin + Duration::from_millis(1));
        assert!(due.elapsed() >= Duration::from_millis(199), "{due:?}");
        // A request not yet due is waited for.
        let pace = Pace::new(Instant::now() + Duration::from_millis(50), Some(10.0));
        let due = pace.next(end).await.unwrap();
        assert!(Instant::now() >= due);
        // Nothing is due at or after the end.
        let pace = Pace::new(origin, Some(1.0));
        assert!(pace.next(origin + Duration::from_millis(1)).await.is_some());
        assert_eq!(pace.next(origin + Duration::from_millis(1)).await, None);
    }

    #[tokio::test]
    async fn closed_loop_sends_now_until_the_end() {
        let pace = Pace::new(Instant::now(), None);
        let end = Instant::now() + Duration::from_secs(60);
        let before = Instant::now();
        let at = pace.next(end).await.unwrap();
        assert!(at >= before && at <= Instant::now());
        assert_eq!(pace.next(before).await, None);
    }
}
