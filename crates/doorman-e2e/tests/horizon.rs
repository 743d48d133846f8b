//! An intermediate's horizon record against its parent's answers, with a
//! real etcd: the record must cover each new upstream lease right after
//! it arrives, or a child that asks then gets a lease cut short at the
//! old record (issue 46: datacenters renewing just after their region got
//! 6 s less than the region's lease).

use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, RateOptions};
use doorman_core::config::Config;
use doorman_core::server::Sharded;
use doorman_etcd::EtcdElection;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, EtcdProcess, IsolatedServer};

/// The root: leases of 20 s renewed every 4 s, so an intermediate's record
/// (its latest upstream lease + 2 s, moved on within 1 s of it) stands
/// about 2 s short of each new upstream lease until it is moved on.
fn root() -> IsolatedServer {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(20).refresh(4))
        .parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    IsolatedServer::start(o).expect("the root starts")
}

fn intermediate(root: &IsolatedServer, etcd: &EtcdProcess) -> IsolatedServer {
    let cfg = Arc::new(Config::empty());
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    o.parent = vec![root.addr()];
    o.election = Arc::new(EtcdElection {
        etcd: etcd.endpoints().into(),
        key: "/doorman/mid".into(),
        ttl: Duration::from_secs(3),
    });
    IsolatedServer::start(o).expect("the intermediate starts")
}

/// Three renewals in a row: 150 ms after the intermediate's upstream
/// lease moved on, its record (the bound on every lease it hands out)
/// already covers it. On the 1 s tick alone, each would hold with a
/// chance of about 15 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_covers_each_upstream_lease_as_soon_as_it_arrives() {
    let etcd = EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"));
    let root = root();
    let mid = intermediate(&root, &etcd);
    eventually(
        "the intermediate is master",
        Duration::from_secs(10),
        || mid.state.core().is_master(),
    )
    .await;
    let client = Client::builder()
        .servers([mid.addr()])
        .fallback(Fallback::Pessimistic)
        .build()
        .await
        .unwrap();
    let _r = client.rate_resource("r", RateOptions::wants(10.0)).unwrap();
    let backed = || mid.state.core().upstream_reach().backed;
    eventually("the parent answered", Duration::from_secs(10), || {
        backed() > doorman_server::lease_clock()
    })
    .await;
    for renewal in 1..=3 {
        let before = backed();
        let deadline = Instant::now() + Duration::from_secs(10);
        while backed() == before {
            assert!(
                Instant::now() < deadline,
                "no renewal {renewal} within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (upstream, bound) = (backed(), mid.state.core().lease_bound());
        let bound = bound.expect("a master electing through etcd keeps a record");
        assert!(
            bound >= upstream,
            "renewal {renewal}: 150 ms after the upstream lease moved on to \
             {upstream:?}, the record stood at {bound:?}"
        );
    }
    client.close().await;
}
