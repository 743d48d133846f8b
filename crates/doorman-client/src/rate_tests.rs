//! Token bucket behaviour under tokio's paused clock: deterministic, no
//! real sleeping.

use super::*;
use crate::resource::Kind;
use crate::resource::{Handle, Shared};
use doorman_core::client::Mode;
use std::time::Duration;
use tokio::time::{advance, sleep};

fn rate(capacity: f64) -> RateResource {
    let shared = Shared::detached(
        Kind::Rate,
        Wants::Fixed(capacity),
        Duration::from_millis(100),
    );
    shared.apply(capacity, Mode::Lease);
    RateResource {
        shared: Handle(shared),
    }
}

async fn saturate(r: &RateResource, n: u32, secs: u64) -> u64 {
    let end = crate::clock::instant() + Duration::from_secs(secs);
    let mut permits = 0;
    while crate::clock::instant() < end {
        r.wait_n(n).await;
        permits += u64::from(n);
    }
    permits
}

#[tokio::test(start_paused = true)]
async fn saturating_wait_loop_matches_the_rate() {
    for cap in [7.0, 100.0, 2500.0] {
        let r = rate(cap);
        let got = saturate(&r, 1, 10).await as f64;
        let want = cap * 10.0;
        assert!(
            (got - want).abs() <= want * 0.02 + 1.0,
            "capacity {cap}: {got} permits in 10 s"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn weighted_waits_count_permits() {
    let r = rate(100.0);
    let got = saturate(&r, 10, 10).await as f64;
    assert!((got - 1000.0).abs() <= 20.0 + 10.0, "{got}");
    // A request larger than the burst (10 here) still goes through, at the rate.
    let got = saturate(&r, 50, 10).await as f64;
    assert!((got - 1000.0).abs() <= 20.0 + 50.0, "{got}");
}

#[tokio::test(start_paused = true)]
async fn try_acquire_never_blocks_and_holds_the_rate() {
    let r = rate(200.0);
    let mut ok = 0;
    for _ in 0..10_000 {
        if r.try_acquire() {
            ok += 1;
        }
        advance(Duration::from_millis(1)).await;
    }
    assert!((ok as f64 - 2000.0).abs() <= 40.0, "{ok}");
    assert!(r.try_acquire_n(1) || !r.try_acquire_n(1000));
}

#[tokio::test(start_paused = true)]
async fn burst_is_bounded_when_the_rate_rises() {
    let r = rate(10.0);
    advance(Duration::from_secs(10)).await;
    // Burst at 10/s is max(1, 0.1 s × 10) = 1 permit.
    let mut n = 0;
    while r.try_acquire() {
        n += 1;
    }
    assert_eq!(n, 1);
    // Rising to 1000/s does not release accumulated idle time.
    r.shared.apply(1000.0, Mode::Lease);
    assert!(
        !r.try_acquire(),
        "no tokens accumulated at the new rate yet"
    );
    advance(Duration::from_secs(5)).await;
    let mut n = 0;
    while r.try_acquire() {
        n += 1;
    }
    assert_eq!(n, 100, "burst = 0.1 s × 1000/s");
    // Falling cuts the bucket to the new burst at once.
    advance(Duration::from_secs(5)).await;
    r.shared.apply(20.0, Mode::Lease);
    let mut n = 0;
    while r.try_acquire() {
        n += 1;
    }
    assert_eq!(n, 2);
}

#[tokio::test(start_paused = true)]
async fn zero_capacity_blocks_until_capacity_arrives() {
    let r = rate(0.0);
    assert!(!r.try_acquire());
    let r2 = r.shared.0.clone();
    let waiter = tokio::spawn(async move {
        let r = RateResource { shared: Handle(r2) };
        let start = crate::clock::instant();
        r.wait().await;
        crate::clock::instant() - start
    });
    sleep(Duration::from_secs(30)).await;
    assert!(!waiter.is_finished(), "capacity 0 blocks");
    r.shared.apply(50.0, Mode::Lease);
    let waited = waiter.await.unwrap();
    assert!(
        waited >= Duration::from_secs(30) && waited <= Duration::from_millis(30_050),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_wait_takes_nothing() {
    let r = rate(10.0);
    advance(Duration::from_secs(1)).await; // one token (burst 1)
    assert!(r.try_acquire());
    {
        let fut = r.wait_n(1);
        tokio::pin!(fut);
        assert!(futures_poll_once(fut.as_mut()).await.is_none());
    }
    advance(Duration::from_millis(100)).await;
    assert!(
        r.try_acquire(),
        "the token refilled meanwhile is still there"
    );
}

async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        v = f => Some(v),
        _ = std::future::ready(()) => None,
    }
}

#[tokio::test(start_paused = true)]
async fn auto_wants_converge_to_the_offered_load() {
    let shared = Shared::detached(Kind::Rate, Wants::Auto, Duration::from_millis(100));
    shared.apply(1000.0, Mode::Lease);
    let r = RateResource {
        shared: Handle(shared),
    };
    // Open loop: 50 calls per second, whatever is granted.
    for _ in 0..600 {
        r.try_acquire();
        advance(Duration::from_millis(20)).await;
    }
    let w = r.current_wants();
    assert!((w - 50.0).abs() <= 2.5, "auto wants {w}");
    // Load drops to 10/s: the estimate follows within the window.
    for _ in 0..120 {
        r.try_acquire();
        advance(Duration::from_millis(100)).await;
    }
    let w = r.current_wants();
    assert!((w - 10.0).abs() <= 1.0, "auto wants {w}");
}

#[tokio::test(start_paused = true)]
async fn auto_wants_probe_upwards_when_waits_block() {
    let shared = Shared::detached(Kind::Rate, Wants::Auto, Duration::from_millis(100));
    shared.apply(20.0, Mode::Lease);
    let r = RateResource {
        shared: Handle(shared),
    };
    saturate(&r, 1, 10).await;
    let w = r.current_wants();
    assert!(
        (29.0..=31.0).contains(&w),
        "granted 20/s and saturated: asks for 1.5 × {w}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tiny_capacity_waits_without_panicking() {
    let r = rate(1e-30);
    assert!(!r.try_acquire());
    let waited = tokio::time::timeout(Duration::from_secs(7200), r.wait()).await;
    assert!(
        waited.is_err(),
        "1e-30 permits/s: no permit within two hours"
    );
    let deep = tokio::time::timeout(Duration::from_secs(1), r.wait_n(u32::MAX)).await;
    assert!(deep.is_err());
}

/// A lease that ended while nothing ran (the process stopped past its
/// end, the background task not yet awake) applies no more: the first
/// acquisition, read or watcher after it sees what comes after it.
#[tokio::test(start_paused = true)]
async fn a_lease_that_ended_while_nothing_ran_applies_no_more() {
    use crate::resource::LeaseEnd;
    let shared = Shared::detached(Kind::Rate, Wants::Fixed(100.0), Duration::from_millis(100));
    let end = LeaseEnd {
        at: crate::clock::instant() + Duration::from_secs(10),
        after: (0.0, Mode::Pessimistic),
    };
    shared.publish((100.0, Mode::Lease), Some(end), Some(10_000), None);
    let r = RateResource {
        shared: Handle(shared.clone()),
    };
    let watch = r.capacity_watch();
    advance(Duration::from_millis(200)).await;
    assert!(r.try_acquire());
    advance(Duration::from_secs(13)).await;
    assert!(!r.try_acquire(), "a permit from a lease that ended");
    assert_eq!((r.capacity(), r.mode()), (0.0, Mode::Pessimistic));
    assert_eq!(watch.borrow().mode, Mode::Pessimistic);
    // A new lease published after it applies as usual.
    let end = LeaseEnd {
        at: crate::clock::instant() + Duration::from_secs(10),
        after: (0.0, Mode::Pessimistic),
    };
    shared.publish((50.0, Mode::Lease), Some(end), None, None);
    assert_eq!((r.capacity(), r.mode()), (50.0, Mode::Lease));
}

#[tokio::test(start_paused = true)]
async fn shadow_mode_lets_through_and_counts_but_never_lifts_a_refusal() {
    let r = rate(0.0);
    assert!(!r.try_acquire(), "enforced: no capacity, no permit");
    r.shared.set_shadow(true);
    for _ in 0..5 {
        assert!(r.try_acquire());
        r.wait_timeout(Duration::from_millis(1)).await.unwrap();
    }
    assert_eq!(r.would_refuse(), 10);
    let denied = doorman_core::client::Refused::Unexplained {
        message: "no".into(),
        denied: true,
    };
    r.shared
        .publish((0.0, Mode::Refused), None, None, Some(&denied));
    assert!(!r.try_acquire(), "a refusal is not lifted by shadow mode");
    let e = r.wait_timeout(Duration::from_millis(1)).await.unwrap_err();
    assert!(matches!(e, AcquireError::PermissionDenied { .. }), "{e:?}");
    assert_eq!(r.would_refuse(), 10);
}
