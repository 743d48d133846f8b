//! The client library under the faults of a real network and real hosts:
//! a link that silently drops packets, a master that hangs, and a client
//! whose wall clock is off. The invariant they guard: a client never uses
//! a lease after the server has ended it (or the server would hand the
//! capacity to someone else while it is still in use).

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use doorman_core::server::Sharded;
use doorman_lease::Span;
use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, Mode, RateOptions};
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, FaultProxy, IsolatedServer, LinkMode};

/// Leases of 3 s, refreshed every second.
fn config() -> TestConfig {
    TestConfig::new().resource(Resource::fair("*", 100.0).lease(3).refresh(1))
}

fn server() -> IsolatedServer {
    let cfg = config().parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    IsolatedServer::start_with(o, |_| {}).expect("server starts")
}

async fn client(servers: &[String], rpc_timeout: Duration, skew_ms: i64) -> Client {
    let clock: doorman_client::Clock =
        Arc::new(move || doorman_client::lease_clock() + Span::from_millis(skew_ms));
    Client::builder()
        .servers(servers.iter().cloned())
        .fallback(Fallback::Pessimistic)
        .rpc_timeout(rpc_timeout)
        .backoff(Duration::from_millis(50), Duration::from_millis(300))
        .clock(clock)
        .build()
        .await
        .unwrap()
}

/// How long after the link was cut the client stopped using its lease,
/// and when the server's record of that lease ended (both from `cut`).
async fn cut_and_time_the_lease_end(skew_ms: i64) -> (Duration, Duration) {
    let s = server();
    let proxy = FaultProxy::start(s.grpc_addr).await.unwrap();
    // An RPC deadline far beyond the lease: only the lease may end it.
    let c = client(
        &[proxy.addr().to_string()],
        Duration::from_secs(20),
        skew_ms,
    )
    .await;
    let r = c.rate_resource("r", RateOptions::wants(100.0)).unwrap();
    eventually("a lease of 100", Duration::from_secs(5), || {
        r.mode() == Mode::Lease && r.capacity() == 100.0
    })
    .await;
    proxy.set(LinkMode::Drop);
    let cut = Instant::now();
    let server_end = {
        let st = s.state.core().status(doorman_server::lease_clock(), 10);
        let lease = &st.resources[0].leases[0];
        Duration::from_secs_f64(lease.expires_in.max(0.0))
    };
    eventually("the lease ends", Duration::from_secs(40), || {
        r.mode() != Mode::Lease
    })
    .await;
    let used = cut.elapsed();
    proxy.set(LinkMode::Reset);
    drop(c);
    s.kill();
    (used, server_end)
}

/// A silent partition (packets dropped, no reset): the refresh in flight
/// hangs until its 20 s deadline, but the lease ends when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_ends_on_time_while_its_refresh_hangs() {
    let (used, server_end) = cut_and_time_the_lease_end(0).await;
    assert!(
        used <= server_end + Duration::from_millis(300),
        "used for {used:?} after the cut; the server's lease ended after {server_end:?}"
    );
}

/// A client whose wall clock is 30 s behind the server's holds a lease no
/// longer than the server counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_its_clock_behind_does_not_outlive_its_lease() {
    let (used, server_end) = cut_and_time_the_lease_end(-30_000).await;
    assert!(
        used <= server_end + Duration::from_millis(300),
        "used for {used:?} after the cut; the server's lease ended after {server_end:?}"
    );
}

/// A client whose wall clock is 30 s ahead still uses the leases it gets
/// (the server counts them: unused, they would strand capacity).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_its_clock_ahead_uses_its_leases() {
    let s = server();
    let c = client(&[s.addr()], Duration::from_secs(2), 30_000).await;
    let r = c.rate_resource("r", RateOptions::wants(40.0)).unwrap();
    eventually("a lease of 40 in use", Duration::from_secs(5), || {
        r.mode() == Mode::Lease && r.capacity() == 40.0
    })
    .await;
    // Over several refreshes it never falls back.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!((r.mode(), r.capacity()), (Mode::Lease, 40.0));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.close().await;
    s.kill();
}

/// A master that hangs (its host paused, packets dropped) is not asked
/// again first: after a call to it fails, discovery starts with the next
/// address, where a successor answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_hung_master_discovery_starts_at_the_next_address() {
    let (a, b) = (server(), server());
    let proxy = FaultProxy::start(a.grpc_addr).await.unwrap();
    let addrs = [proxy.addr().to_string(), b.addr()];
    let c = client(&addrs, Duration::from_millis(500), 0).await;
    let r = c.rate_resource("r", RateOptions::wants(10.0)).unwrap();
    eventually(
        "a lease from the first address",
        Duration::from_secs(5),
        || r.mode() == Mode::Lease,
    )
    .await;
    assert_eq!(c.connection().master.as_deref(), Some(addrs[0].as_str()));
    let dialled = proxy.accepted();
    proxy.set(LinkMode::Drop);
    eventually(
        "the second address answers",
        Duration::from_secs(10),
        || {
            c.connection().master.as_deref() == Some(addrs[1].as_str())
                && c.connection().last_error.is_none()
        },
    )
    .await;
    // Neither the rediscovery after the failure nor the refreshes since
    // dialled the hung address again (its channel was dropped with the
    // failure; asking it again would take a new connection).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(proxy.accepted(), dialled, "the hung master was asked again");
    c.close().await;
    a.kill();
    b.kill();
}

/// A process stopped past its lease (SIGSTOP, a frozen VM: here the
/// client's whole runtime blocked) resumes behind a silent partition: it
/// must not go on with the lease that ended while it was stopped until
/// its refresh fails. The watch (what the background task publishes)
/// shows the fallback at once on resuming, not after the RPC deadline.
#[test]
fn a_client_stopped_past_its_lease_resumes_without_it() {
    let s = server();
    let outer = tokio::runtime::Runtime::new().unwrap();
    let proxy = outer.block_on(FaultProxy::start(s.grpc_addr)).unwrap();
    // The client's own runtime, one thread: blocking it stops every task
    // of the client, its timers included, as a stopped process would.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = proxy.addr().to_string();
    let (c, r) = rt.block_on(async {
        let c = client(&[addr], Duration::from_secs(4), 0).await;
        let r = c.rate_resource("r", RateOptions::wants(100.0)).unwrap();
        eventually("a lease of 100", Duration::from_secs(5), || {
            r.mode() == Mode::Lease && r.capacity() == 100.0
        })
        .await;
        (c, r)
    });
    let watch = r.capacity_watch();
    let thread = std::thread::spawn(move || {
        rt.block_on(async {
            // The leases are 3 s long: stopped for 5 s.
            tokio::task::spawn(async { std::thread::sleep(Duration::from_secs(5)) });
            tokio::time::sleep(Duration::from_secs(12)).await;
            drop(r);
            c.close().await;
        })
    });
    proxy.set(LinkMode::Drop);
    std::thread::sleep(Duration::from_millis(5_300));
    let resumed = Instant::now();
    while watch.borrow().mode == Mode::Lease && resumed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = resumed.elapsed();
    assert!(
        seen < Duration::from_millis(500),
        "the ended lease was still published {seen:?} after resuming"
    );
    proxy.set(LinkMode::Reset);
    thread.join().unwrap();
    s.kill();
}
