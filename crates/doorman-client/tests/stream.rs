//! The lease stream end to end: a real server and clients of the library.
//! A holds the whole capacity; B arrives; on the stream the server pushes
//! A its lower share, A acknowledges it at once, and B is pushed what A
//! freed: B holds its share long before anyone's refresh (20 s, a waiting
//! client's quarter of it 5 s). Without the stream B waits for A's next
//! refresh. A stream cut short falls back to polling, and is opened
//! again later. (A server without the stream, the original's, is polled:
//! `doorman-faults interop`, "rust-poll".)

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, Mode, RateOptions, RateResource};
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, FaultProxy, IsolatedServer, LinkMode};

/// Refreshed every 20 s, leases long enough that none ends in a test.
fn server() -> IsolatedServer {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(60).refresh(20))
        .parse();
    let o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    IsolatedServer::start(o).expect("server starts")
}

async fn client(addr: &str, id: &str, stream: bool) -> Client {
    Client::builder()
        .servers([addr.to_string()])
        .client_id(id)
        .fallback(Fallback::Pessimistic)
        .lease_stream(stream)
        .build()
        .await
        .unwrap()
}

fn held(r: &RateResource) -> f64 {
    if r.mode() == Mode::Lease {
        r.capacity()
    } else {
        0.0
    }
}

/// A holds 100 of "r"; B opens it. How long until B holds its half
/// (`None`: not within `limit`), checking every 2 ms that A and B never
/// hold more than 100 together.
async fn newcomer(s: &IsolatedServer, stream: bool, limit: Duration) -> Option<Duration> {
    let ca = client(&s.addr(), "a", stream).await;
    let a = ca.rate_resource("r", RateOptions::wants(100.0)).unwrap();
    eventually("A holds 100", Duration::from_secs(5), || held(&a) == 100.0).await;
    let cb = client(&s.addr(), "b", stream).await;
    let start = Instant::now();
    let b = cb.rate_resource("r", RateOptions::wants(100.0)).unwrap();
    let mut served = None;
    while start.elapsed() < limit {
        let (ha, hb) = (held(&a), held(&b));
        assert!(ha + hb <= 100.0 + 1e-9, "A {ha} + B {hb} > 100");
        if hb >= 50.0 - 1e-9 {
            served = Some(start.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    ca.close().await;
    cb.close().await;
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_gets_its_share_pushed_long_before_a_refresh() {
    let s = server();
    let served = newcomer(&s, true, Duration::from_secs(4)).await;
    println!("B served after {served:?}");
    assert!(served.is_some(), "B not served within 4 s on the stream");
    let text = s.state.metrics_text();
    let count = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(count("doorman_server_pushed_grants_total") >= 2.0, "{text}");
    assert!(
        count("doorman_server_stream_requests_total") >= 3.0,
        "{text}"
    );
    assert_eq!(
        s.requests("GetCapacity"),
        0,
        "every request rode the streams"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_the_newcomer_waits_for_the_holders_refresh() {
    let s = server();
    let served = newcomer(&s, false, Duration::from_secs(4)).await;
    assert_eq!(served, None, "B got a share A holds until its refresh");
    assert!(s.requests("GetCapacity") >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_falls_back_to_polling_and_is_opened_again() {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(30).refresh(1))
        .parse();
    let o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    let s = IsolatedServer::start(o).expect("server starts");
    let proxy = FaultProxy::start(s.grpc_addr).await.unwrap();
    let c = client(&proxy.addr().to_string(), "c", true).await;
    let r = c.rate_resource("r", RateOptions::wants(10.0)).unwrap();
    eventually("streaming", Duration::from_secs(5), || {
        s.lease_streams() == 1.0
    })
    .await;
    assert_eq!(s.requests("GetCapacity"), 0);
    proxy.set(LinkMode::Reset);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set(LinkMode::Pass);
    eventually("polling", Duration::from_secs(5), || {
        s.lease_streams() == 0.0 && s.requests("GetCapacity") >= 2
    })
    .await;
    assert_eq!(r.mode(), Mode::Lease);
    // Opened again once the retry delay (10 s) has passed.
    eventually("streaming again", Duration::from_secs(15), || {
        s.lease_streams() == 1.0
    })
    .await;
    assert_eq!(r.mode(), Mode::Lease);
    c.close().await;
}

/// A graceful shutdown waits for every open call, and a lease stream
/// never ends by itself: the server ends its streams when it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_ends_its_lease_streams() {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(60).refresh(20))
        .parse();
    let o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    let s = doorman_server::server::start(o).await.unwrap();
    let c = client(&s.grpc_addr.to_string(), "a", true).await;
    let r = c.rate_resource("r", RateOptions::wants(10.0)).unwrap();
    eventually("a lease", Duration::from_secs(5), || held(&r) == 10.0).await;
    let open = || {
        s.state
            .metrics_text()
            .contains("doorman_server_lease_streams 1")
    };
    eventually("streaming", Duration::from_secs(2), open).await;
    let stopped = tokio::time::timeout(Duration::from_secs(2), s.shutdown()).await;
    assert!(stopped.is_ok(), "the open lease stream held the shutdown");
    c.close().await;
}
