//! A lowering that arrives, end to end: a real server with its default
//! minimum request interval (1 s) and two clients of the library. A holds
//! the whole capacity; B arrives; FAIR_SHARE lowers A at A's next request.
//! The lowered grant counts at its old amount until A shows it got the
//! lower one (docs/algorithms.md, "A lowered grant counts at its old
//! amount"): A is told to come back at the minimum interval, so the
//! difference is free at the server within that interval and a round trip
//! of A's lowering, and B (waiting: it comes back every quarter of its
//! refresh interval, at least every second) takes it at its next request.
//! What the two hold never exceeds the capacity meanwhile. The clients
//! poll: on a lease stream the lowering is pushed and acknowledged at once
//! (`stream.rs`).

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, Mode, RateOptions, RateResource};
use doorman_core::server::Sharded;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, IsolatedServer};

/// Refreshed every 4 s (a waiting client comes back every second), leases
/// long enough that none ends during the test.
fn config() -> TestConfig {
    TestConfig::new().resource(Resource::fair("*", 100.0).lease(30).refresh(4))
}

/// What the server counts A for beyond its grant (`lowered_from`), if
/// anything.
fn lowered_at_server(s: &IsolatedServer, id: &str) -> Option<f64> {
    let st = s.state.core().status(doorman_server::lease_clock(), 10);
    st.resources
        .iter()
        .flat_map(|r| &r.leases)
        .find(|l| l.id == id)
        .and_then(|l| l.lowered_from)
}

async fn client(s: &IsolatedServer, id: &str) -> Client {
    Client::builder()
        .servers([s.addr()])
        .client_id(id)
        .fallback(Fallback::Pessimistic)
        .lease_stream(false)
        .build()
        .await
        .unwrap()
}

/// When each step happened, from the moment A saw its lowered grant.
#[derive(Debug)]
struct Steps {
    /// The server stopped counting A's old grant.
    freed: Duration,
    /// B held its share.
    b_served: Duration,
}

/// Polls every 5 ms until B holds its share, checking that A and B never
/// hold more than the capacity together.
async fn watch(s: &IsolatedServer, a: &RateResource, b: &RateResource) -> Steps {
    let start = Instant::now();
    let mut lowered = None;
    let mut freed = None;
    let held = |r: &RateResource| {
        if r.mode() == Mode::Lease {
            r.capacity()
        } else {
            0.0
        }
    };
    while start.elapsed() < Duration::from_secs(20) {
        let (ha, hb) = (held(a), held(b));
        assert!(ha + hb <= 100.0 + 1e-9, "A {ha} + B {hb} > 100");
        let now = Instant::now();
        if lowered.is_none() && ha < 100.0 {
            assert!(
                lowered_at_server(s, "a").is_some(),
                "A lowered, not counted at its old 100"
            );
            lowered = Some(now);
        }
        if let Some(l) = lowered {
            if freed.is_none() && lowered_at_server(s, "a").is_none() {
                freed = Some(now - l);
            }
            if hb >= 50.0 - 1e-9 {
                return Steps {
                    freed: freed.expect("B was served before A's old grant was freed"),
                    b_served: now - l,
                };
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("B never got its share (A lowered at {lowered:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowering_that_arrives_frees_the_difference_within_the_minimum_interval() {
    let cfg = config().parse();
    let o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    assert_eq!(
        o.min_request_interval,
        Duration::from_secs(1),
        "the default"
    );
    let s = IsolatedServer::start(o).expect("server starts");
    let ca = client(&s, "a").await;
    let a = ca.rate_resource("r", RateOptions::wants(100.0)).unwrap();
    eventually("A holds 100", Duration::from_secs(5), || {
        a.mode() == Mode::Lease && a.capacity() == 100.0
    })
    .await;
    let cb = client(&s, "b").await;
    let b = cb.rate_resource("r", RateOptions::wants(100.0)).unwrap();
    let steps = watch(&s, &a, &b).await;
    println!("{steps:?}");
    // The minimum interval, and a round trip and the client's timer on
    // loopback.
    assert!(steps.freed <= Duration::from_millis(1_300), "{steps:?}");
    // Then B's next request: it waits at most a second (a quarter of 4 s).
    assert!(steps.b_served <= Duration::from_millis(2_300), "{steps:?}");
    assert_eq!(a.capacity(), 50.0);
    ca.close().await;
    cb.close().await;
}
