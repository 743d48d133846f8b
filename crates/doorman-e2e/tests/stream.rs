//! The lease stream through a failover: a client streams to master A;
//! A abdicates to B; the client's next renewal on A's stream is answered
//! with the redirect, which ends it, and the client opens its stream at B,
//! its lease never lapsing on the way.

use std::sync::Arc;
use std::time::Duration;

use doorman_client::{Client, Fallback, Mode, RateOptions};
use doorman_core::server::Sharded;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, InMemoryElection, IsolatedServer};

/// Leases of 10 s refreshed every second; learning mode of 3 s.
fn opts(election: &InMemoryElection) -> ServerOptions {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(10).refresh(1).learning(3))
        .parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.election = Arc::new(election.clone());
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_master_redirects_its_streams_and_they_reopen_at_the_new_one() {
    let election = InMemoryElection::new();
    let a = IsolatedServer::start(opts(&election)).unwrap();
    eventually("a master", Duration::from_secs(2), || {
        a.state.core().is_master()
    })
    .await;
    let b = IsolatedServer::start(opts(&election)).unwrap();
    eventually("b knows a", Duration::from_secs(2), || {
        b.state.core().master_address().is_some()
    })
    .await;
    let c = Client::builder()
        .servers([a.addr(), b.addr()])
        .client_id("c")
        .fallback(Fallback::Pessimistic)
        .build()
        .await
        .unwrap();
    let r = c.rate_resource("r", RateOptions::wants(10.0)).unwrap();
    eventually("a lease from a", Duration::from_secs(5), || {
        r.mode() == Mode::Lease
    })
    .await;
    eventually("streaming to a", Duration::from_secs(2), || {
        a.lease_streams() == 1.0
    })
    .await;
    election.abdicate();
    eventually("b master", Duration::from_secs(2), || {
        b.state.core().is_master()
    })
    .await;
    let moved = eventually("streaming to b, not a", Duration::from_secs(5), || {
        assert_eq!(r.mode(), Mode::Lease, "the lease lapsed");
        b.lease_streams() == 1.0 && a.lease_streams() == 0.0
    });
    moved.await;
    let before = b.state.metrics.stream_requests_seen();
    eventually("renewals at b", Duration::from_secs(3), || {
        b.state.metrics.stream_requests_seen() > before
    })
    .await;
    assert_eq!(r.mode(), Mode::Lease);
    c.close().await;
}
