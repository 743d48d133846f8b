//! A root shared by an original Go Doorman intermediate server and one of
//! ours, with the exact GetServerCapacity message each sends (the
//! original's read from youtube/doorman `go/server/doorman/server.go`: one
//! band at priority 1, `num_clients`, `wants`, no `has`, no `outstanding`).
//! FAIR_SHARE must split the capacity by clients, whichever server they sit
//! behind. `doorman-faults interop` runs the same tree with the real Go
//! binaries.

use doorman_testkit::rpc as common;

use common::{client, server_with};
use doorman_proto::doorman as pb;
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::ManualClock;

fn config() -> TestConfig {
    TestConfig::new().resource(Resource::fair("res", 100.0).lease(20).refresh(5))
}

fn band(priority: i64, num_clients: i64, wants: f64) -> pb::PriorityBandAggregate {
    pb::PriorityBandAggregate {
        priority,
        num_clients,
        wants,
    }
}

/// What the original intermediate sends for its clients' total.
fn original(clients: i64, wants: f64) -> pb::GetServerCapacityRequest {
    pb::GetServerCapacityRequest {
        report: None,
        server_id: "original-intermediate:15101".into(),
        resource: vec![pb::ServerCapacityResourceRequest {
            resource_id: "res".into(),
            has: None,
            wants: vec![band(1, clients, wants)],
            outstanding: None,
            has_remaining_ms: None,
        }],
    }
}

/// What our intermediate sends for clients at the default priority 0.
fn ours(clients: i64, wants: f64, has: Option<pb::Lease>) -> pb::GetServerCapacityRequest {
    pb::GetServerCapacityRequest {
        report: None,
        server_id: "our-intermediate:6001".into(),
        resource: vec![pb::ServerCapacityResourceRequest {
            resource_id: "res".into(),
            has,
            wants: vec![band(0, clients, wants)],
            outstanding: Some(0.0),
            has_remaining_ms: None,
        }],
    }
}

#[tokio::test]
async fn an_original_intermediate_and_ours_share_by_clients() {
    let clock = ManualClock::new();
    let s = server_with(&config().toml(), &clock).await;
    let mut c = client(s.grpc_addr).await;
    let (mut theirs, mut mine) = (0.0, 0.0);
    let mut has = None;
    for _ in 0..4 {
        let r = c.get_server_capacity(original(2, 160.0)).await.unwrap();
        theirs = r.into_inner().response[0].gets.capacity;
        let r = c.get_server_capacity(ours(2, 160.0, has)).await.unwrap();
        let lease = r.into_inner().response[0].gets;
        (mine, has) = (lease.capacity, Some(lease));
    }
    assert_eq!(
        (theirs, mine),
        (50.0, 50.0),
        "2 clients each of 4: half each"
    );
    assert!(theirs + mine <= 100.0);
    s.shutdown().await;
}

#[tokio::test]
async fn bands_of_our_own_intermediates_keep_their_priority() {
    let clock = ManualClock::new();
    let s = server_with(&config().toml(), &clock).await;
    let mut c = client(s.grpc_addr).await;
    let high = |id: &str| pb::GetServerCapacityRequest {
        report: None,
        server_id: id.into(),
        resource: vec![pb::ServerCapacityResourceRequest {
            resource_id: "res".into(),
            has: None,
            wants: vec![band(1, 2, 160.0)],
            outstanding: Some(0.0),
            has_remaining_ms: None,
        }],
    };
    let mut got = (0.0, 0.0);
    for _ in 0..4 {
        let r = c.get_server_capacity(high("urgent:6002")).await.unwrap();
        got.0 = r.into_inner().response[0].gets.capacity;
        let r = c.get_server_capacity(ours(2, 160.0, None)).await.unwrap();
        got.1 = r.into_inner().response[0].gets.capacity;
    }
    assert_eq!(got, (100.0, 0.0), "band 1 is served first when it says so");
    s.shutdown().await;
}
