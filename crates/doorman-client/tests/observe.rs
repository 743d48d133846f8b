//! What an application can watch, against real servers: a resource's
//! capacity, lease expiry and phase through `capacity_watch()` (leased,
//! learning-zero, fallback when the server dies), when each state began,
//! and the client's connection state.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant, SystemTime};

use doorman_client::{Client, Fallback, Mode, Phase, RateOptions};
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::IsolatedServer;

fn server(learning: i64) -> IsolatedServer {
    server_with(
        Resource::fair("*", 100.0)
            .lease(4)
            .refresh(1)
            .learning(learning),
    )
}

fn server_with(resource: Resource) -> IsolatedServer {
    let cfg = TestConfig::new().resource(resource).parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    IsolatedServer::start(o).expect("server starts")
}

async fn client(s: &IsolatedServer) -> Client {
    Client::builder()
        .servers([s.addr()])
        .fallback(Fallback::Pessimistic)
        .rpc_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

/// Waits for a state `ok` accepts, returning it.
async fn until(
    rx: &mut tokio::sync::watch::Receiver<doorman_client::CapacityState>,
    ok: impl Fn(&doorman_client::CapacityState) -> bool,
) -> doorman_client::CapacityState {
    let r = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| ok(s))).await;
    r.expect("state in time").expect("sender alive").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_follows_lease_and_fallback_and_the_connection_is_reported() {
    let s = server(0);
    let addr = s.addr();
    let c = client(&s).await;
    let r = c.rate_resource("w", RateOptions::wants(30.0)).unwrap();
    let mut rx = r.capacity_watch();
    let leased = until(&mut rx, |st| st.phase == Phase::Leased).await;
    assert_eq!((leased.capacity, leased.mode), (30.0, Mode::Lease));
    let expiry = leased.lease_expiry.expect("a lease has an expiry");
    assert!(expiry > SystemTime::now(), "{expiry:?}");
    let conn = c.connection();
    assert_eq!(conn.master.as_deref(), Some(addr.as_str()));
    assert!(
        conn.last_success.is_some() && conn.last_error.is_none(),
        "{conn:?}"
    );

    s.kill();
    let fallback = until(&mut rx, |st| st.phase == Phase::Fallback).await;
    assert_eq!((fallback.capacity, fallback.mode), (0.0, Mode::Pessimistic));
    assert_eq!(fallback.lease_expiry, None);
    let conn = c.connection();
    assert!(conn.last_error.is_some(), "{conn:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_master_in_learning_mode_shows_as_learning_zero() {
    let s = server(300);
    let c = client(&s).await;
    let r = c.rate_resource("l", RateOptions::wants(30.0)).unwrap();
    let mut rx = r.capacity_watch();
    let st = until(&mut rx, |st| matches!(st.phase, Phase::LearningZero { .. })).await;
    let Phase::LearningZero { seconds_left } = st.phase else {
        unreachable!("waited for it")
    };
    assert!(
        seconds_left > 290.0 && seconds_left <= 300.0,
        "{seconds_left}"
    );
    assert_eq!((st.capacity, st.mode), (0.0, Mode::Lease));
    assert!(st.note.unwrap().starts_with("learning mode"));
    c.close().await;
}

/// A watcher that reads late still learns when the capacity took effect
/// (the fault harness's auditor dates what a client used by it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_says_when_it_began_not_when_it_was_read() {
    let s = server_with(
        Resource::fair("*", 100.0)
            .lease(120)
            .refresh(60)
            .learning(0),
    );
    let c = client(&s).await;
    let start = Instant::now();
    let r = c.rate_resource("since", RateOptions::wants(30.0)).unwrap();
    // The grant needs a round trip to the server: it applies after this.
    let created = Instant::now();
    let rx = r.capacity_watch();
    let deadline = start + Duration::from_secs(10);
    while r.capacity() != 30.0 {
        assert!(Instant::now() < deadline, "no lease in 10 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let applied = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let st = rx.borrow().clone();
    assert_eq!((st.capacity, st.phase), (30.0, Phase::Leased));
    assert!(
        st.since >= created && st.since <= applied,
        "began {:?} after the resource, seen applied {:?} after it",
        st.since.saturating_duration_since(created),
        applied - created
    );
    c.close().await;
}

/// A renewal at the same capacity is a new state (a later expiry) but
/// keeps `since`: the capacity has applied since the first grant; and it
/// is no change in `capacity_changes()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_at_the_same_capacity_keeps_since() {
    let s = server(0);
    let c = client(&s).await;
    let r = c
        .rate_resource("renewed", RateOptions::wants(30.0))
        .unwrap();
    let mut changes = r.capacity_changes();
    let mut rx = r.capacity_watch();
    let first = until(&mut rx, |st| st.phase == Phase::Leased).await;
    let renewed = until(&mut rx, |st| st.lease_expiry > first.lease_expiry).await;
    assert_eq!((renewed.capacity, renewed.phase), (30.0, Phase::Leased));
    assert_eq!(renewed.since, first.since, "{first:?} then {renewed:?}");
    // The feed of every change has the grant, dated as the watch dated
    // it, and nothing for the renewal.
    let seen: Vec<_> = std::iter::from_fn(|| changes.try_next().ok())
        .map(|st| (st.capacity, st.mode, st.since))
        .collect();
    assert_eq!(
        seen.last(),
        Some(&(30.0, Mode::Lease, first.since)),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|x| x.1 == Mode::Lease).count(),
        1,
        "{seen:?}"
    );
    c.close().await;
}
