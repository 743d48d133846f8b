//! The tower layers limit a real service.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use doorman_client::tower::{GaugeLayer, RateLimitLayer};
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
    let svc =
        RateLimitLayer::new(rate).layer(tower::service_fn(
            |x: u32| async move { Ok::<_, ()>(x + 1) },
        ));
    let start = tokio::time::Instant::now();
    for i in 0..21 {
        assert_eq!(svc.clone().oneshot(i).await, Ok(i + 1));
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
            Ok::<_, ()>(())
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
