//! The tower layers limit a real service.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use doorman_client::tower::{GaugeLayer, Mode, RateLimitLayer, ResourceExhausted};
use doorman_client::{Client, Fallback, GaugeOptions, RateOptions};
use tower::{Layer, ServiceExt};

/// A client with no server: optimistic fallback applies the wants at once.
async fn offline() -> Client {
    Client::builder()
        .servers(["127.0.0.1:1"])
        .fallback(Fallback::Optimistic)
        .rpc_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn rate_layer_waits_for_permits() {
    let c = offline().await;
    let rate = c.rate_resource("api", RateOptions::wants(10.0)).unwrap();
    assert_eq!(rate.capacity(), 10.0);
    let svc = RateLimitLayer::new(rate).layer(tower::service_fn(|x: u32| async move {
        Ok::<_, Infallible>(x + 1)
    }));
    let start = tokio::time::Instant::now();
    for i in 0..21 {
        assert_eq!(svc.clone().oneshot(i).await.unwrap(), i + 1);
    }
    // 21 calls at 10/s with a burst of 1: 2 s of virtual time.
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took <= Duration::from_millis(2200),
        "{took:?}"
    );
}

#[tokio::test]
async fn gauge_layer_bounds_concurrency() {
    let c = offline().await;
    let gauge = c.gauge_resource("pool", GaugeOptions::wants(3.0)).unwrap();
    let now = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let (n2, p2) = (now.clone(), peak.clone());
    let svc = GaugeLayer::new(gauge).layer(tower::service_fn(move |_: ()| {
        let (now, peak) = (n2.clone(), p2.clone());
        async move {
            let v = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(v, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, Infallible>(())
        }
    }));
    let calls: Vec<_> = (0..12)
        .map(|_| tokio::spawn(svc.clone().oneshot(())))
        .collect();
    for c in calls {
        c.await.unwrap().unwrap();
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3);
}

/// Reject sheds load at once once the burst is spent; each rejection is a
/// ResourceExhausted that maps to RESOURCE_EXHAUSTED and 429.
#[tokio::test(start_paused = true)]
async fn reject_mode_sheds_load_at_once() {
    let c = offline().await;
    let rate = c.rate_resource("shed", RateOptions::wants(10.0)).unwrap();
    let svc = RateLimitLayer::new(rate)
        .mode(Mode::Reject)
        .layer(tower::service_fn(
            |x: u32| async move { Ok::<_, Infallible>(x) },
        ));
    let start = tokio::time::Instant::now();
    let mut rejected = 0;
    for i in 0..20 {
        if let Err(e) = svc.clone().oneshot(i).await {
            let ex = ResourceExhausted::find(&e).expect("a ResourceExhausted");
            assert_eq!(ex.resource, "shed");
            assert_eq!(ex.to_status().code(), tonic::Code::ResourceExhausted);
            rejected += 1;
        }
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "nothing waited");
    assert!(
        rejected >= 18,
        "a burst of 1 at 10/s: {rejected} of 20 rejected"
    );
    assert_eq!(ResourceExhausted::HTTP_STATUS, 429);
}

/// WaitWithTimeout gives up after its timeout; a weighted call takes its
/// weight in permits.
#[tokio::test(start_paused = true)]
async fn timeouts_and_weights() {
    let c = offline().await;
    let rate = c
        .rate_resource("weighted", RateOptions::wants(10.0))
        .unwrap();
    let svc = RateLimitLayer::new(rate)
        .mode(Mode::WaitWithTimeout(Duration::from_millis(250)))
        .weighted(|n: &u32| *n)
        .layer(tower::service_fn(
            |n: u32| async move { Ok::<_, Infallible>(n) },
        ));
    let start = tokio::time::Instant::now();
    // At 10/s with a burst of 1, a call larger than the burst goes through
    // once a full burst is there and leaves the bucket in debt by its
    // weight, so the long-run rate holds.
    // The bucket starts empty.
    assert_eq!(svc.clone().oneshot(1).await.unwrap(), 1); // after 100 ms
    assert_eq!(svc.clone().oneshot(2).await.unwrap(), 2); // 100 ms more, debt 1
    assert_eq!(svc.clone().oneshot(5).await.unwrap(), 5); // 200 ms more, debt 4
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(390) && took <= Duration::from_millis(450),
        "{took:?}"
    );
    // The debt of 4 needs 500 ms to clear: more than the 250 ms allowed.
    let e = svc.clone().oneshot(1).await.unwrap_err();
    let ex = ResourceExhausted::find(&e).expect("a ResourceExhausted");
    assert!(ex.why.contains("deadline"), "{ex}");
}
