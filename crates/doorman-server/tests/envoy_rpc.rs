//! Envoy's RLS as Envoy's own client code calls it (the generated
//! `RateLimitServiceClient` of `envoy-types`), against a server in this
//! process: descriptor statuses, hits, the unmatched choice, bad requests
//! and access rules. The behaviour with a real Envoy is `envoy.rs`.

use doorman_testkit::rpc as common;

use std::sync::Arc;

use common::{server_with, ManualClock};
use doorman_core::config::Config;
use doorman_server::server::{start, ConfigSource, ServerOptions};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use tonic::transport::Channel;

const CONFIG: &str = r#"
[[resources]]
identifier_glob = "edge/*"
capacity = 5
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0

[envoy]
unmatched = "over_limit"

[[envoy.descriptors]]
domain = "edge"
keys = ["tenant", "path"]
resource = "edge/tenants/{tenant}"
unit = "minute"
"#;

fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: hits,
    }
}

async fn rls(addr: std::net::SocketAddr) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects")
}

async fn ask(c: &mut RateLimitServiceClient<Channel>, r: RateLimitRequest) -> RateLimitResponse {
    c.should_rate_limit(r).await.expect("answered").into_inner()
}

#[tokio::test]
async fn hits_are_admitted_from_the_lease_with_statuses_for_the_headers() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = rls(s.grpc_addr).await;
    let api = || vec![descriptor(&[("generic_key", "api")])];
    // The first request leases for a demand of 4/s (one hit in the first
    // quarter second); the bucket starts at its burst (at least two
    // requests) and refills at that rate.
    let first = ask(&mut c, request("edge", api(), 1)).await;
    assert_eq!(first.overall_code, Code::Ok as i32, "the first hit passes");
    let status = &first.statuses[0];
    let limit = status.current_limit.as_ref().expect("a limit");
    assert_eq!(limit.unit, 1, "per second");
    assert!(
        limit.requests_per_unit >= 1 && limit.requests_per_unit <= 5,
        "{limit:?}"
    );
    // What is left after the hit, and when the bucket is full again: a
    // bucket of at most a second's worth is full within a second.
    assert!(
        status.limit_remaining <= limit.requests_per_unit,
        "{status:?}"
    );
    let reset = status.duration_until_reset.expect("a reset time");
    assert!((0..=1).contains(&reset.seconds), "{reset:?}");
    // A burst far above the lease is refused, and says so.
    let big = ask(&mut c, request("edge", api(), 1000)).await;
    assert_eq!(big.overall_code, Code::OverLimit as i32);
    assert_eq!(big.statuses[0].code, Code::OverLimit as i32);
    // So is a huge descriptor hits_addend, without leaving the bucket in
    // debt: a hit a little later passes.
    let mut huge = descriptor(&[("generic_key", "api")]);
    huge.hits_addend = Some(UInt64Value { value: u64::MAX });
    let r = ask(&mut c, request("edge", vec![huge], 1)).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let r = ask(&mut c, request("edge", api(), 1)).await;
    assert_eq!(r.overall_code, Code::Ok as i32, "no debt: {r:?}");
    // The client shows on the status page like any other.
    let st = s.state.status(10);
    let r = st.resources.iter().find(|r| r.id == "edge/generic_key=api");
    let ids: Vec<String> = r
        .map(|r| r.leases.iter().map(|l| l.id.clone()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["envoy-rls"]);
    s.shutdown().await;
}

#[tokio::test]
async fn mappings_units_and_unmatched_descriptors() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = rls(s.grpc_addr).await;
    let mapped = descriptor(&[("path", "/a"), ("tenant", "t1")]);
    let r = ask(&mut c, request("edge", vec![mapped], 1)).await;
    let limit = r.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!(limit.unit, 2, "per minute, as the mapping says");
    let st = s.state.status(10);
    assert!(
        st.resources.iter().any(|r| r.id == "edge/tenants/t1"),
        "mapped name"
    );
    // Domain "other" matches no template: over limit, as configured.
    let r = ask(&mut c, request("other", vec![descriptor(&[("k", "v")])], 1)).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert!(r.statuses[0].current_limit.is_none());
    let (_, body) = common::http_get(s.http_addr.unwrap(), "/metrics").await;
    let unmatched = "doorman_server_envoy_descriptors_total{protocol=\"rls\",result=\"unmatched\"}";
    assert_eq!(common::metric(&body, unmatched), Some(1.0), "{body}");
    s.shutdown().await;
}

#[tokio::test]
async fn unmatched_descriptors_pass_by_default() {
    let clock = ManualClock::new();
    let text = CONFIG.replace("unmatched = \"over_limit\"", "");
    let s = server_with(&text, &clock).await;
    let mut c = rls(s.grpc_addr).await;
    let r = ask(&mut c, request("other", vec![descriptor(&[("k", "v")])], 1)).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    s.shutdown().await;
}

#[tokio::test]
async fn bad_requests_name_the_field() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = rls(s.grpc_addr).await;
    let cases = [
        (
            request("", vec![descriptor(&[("a", "b")])], 1),
            "domain: must not be empty",
        ),
        (
            request("edge", vec![], 1),
            "descriptors: at least one descriptor is needed",
        ),
        (
            request("edge", vec![descriptor(&[])], 1),
            "descriptors[0].entries: at least one entry is needed",
        ),
        (
            request("edge", vec![descriptor(&[("a", "b"), ("", "c")])], 1),
            "descriptors[0].entries[1].key: must not be empty",
        ),
        (
            request("edge", vec![descriptor(&[("a", &"x".repeat(2000))])], 1),
            "descriptors[0]: the resource id it names",
        ),
        (
            request("edge", vec![descriptor(&[("a", "b\nc")])], 1),
            "descriptors[0]: keys and values must not contain control characters",
        ),
    ];
    for (req, message) in cases {
        let e = c.should_rate_limit(req).await.expect_err(message);
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{message}");
        assert!(
            e.message().starts_with(message),
            "{} vs {message}",
            e.message()
        );
    }
    // Still serving.
    let r = ask(&mut c, request("edge", vec![descriptor(&[("a", "b")])], 1)).await;
    assert_eq!(r.statuses.len(), 1);
    s.shutdown().await;
}

#[tokio::test]
async fn access_rules_apply_to_envoy_callers() {
    let clock = ManualClock::new();
    let s = common::server_refusing_anonymous(CONFIG, &clock).await;
    let mut c = rls(s.grpc_addr).await;
    let e = c
        .should_rate_limit(request("edge", vec![descriptor(&[("a", "b")])], 1))
        .await
        .expect_err("an unauthenticated Envoy may not acquire");
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    assert!(e.message().contains("edge/a=b"), "{}", e.message());
    s.shutdown().await;
}

/// An open RLQS stream (as Envoy keeps one) does not hold up a server's
/// shutdown: the stream ends with UNAVAILABLE and the server stops. Its
/// buckets share one resource when a mapping drops a key's value.
#[tokio::test]
async fn rlqs_streams_end_when_the_server_stops() {
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
        rate_limit_quota_usage_reports::BucketQuotaUsage, BucketId, RateLimitQuotaUsageReports,
    };
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = RateLimitQuotaServiceClient::connect(format!("http://{}", s.grpc_addr))
        .await
        .expect("connects");
    let usage = |path: &str| BucketQuotaUsage {
        bucket_id: Some(BucketId {
            bucket: [("tenant", "t1"), ("path", path)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }),
        time_elapsed: None,
        num_requests_allowed: 1,
        num_requests_denied: 0,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(RateLimitQuotaUsageReports {
        domain: "edge".into(),
        bucket_quota_usages: vec![usage("/a"), usage("/b")],
    })
    .await
    .unwrap();
    let mut answers = c
        .stream_rate_limit_quotas(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let first = answers
        .message()
        .await
        .expect("an answer")
        .expect("not the end");
    assert_eq!(
        first.bucket_action.len(),
        2,
        "one assignment per bucket: {first:?}"
    );
    let st = s.state.status(10);
    let r = st
        .resources
        .iter()
        .find(|r| r.id == "edge/tenants/t1")
        .expect("one resource");
    assert_eq!(r.leases.len(), 1);
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), s.shutdown()).await;
    assert!(stopped.is_ok(), "the server stopped with a stream open");
    let end = answers.message().await;
    assert!(
        matches!(&end, Err(e) if e.code() == tonic::Code::Unavailable),
        "{end:?}"
    );
    drop(tx);
}

/// Hits on many resources at once from several connections, each request
/// naming resources of different shards in a different order: every
/// answer comes back, every resource gets a lease within its capacity and
/// is one lease in the core.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_hits_on_many_resources_each_get_a_lease() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let keys: Vec<String> = (0..32).map(|i| format!("k{i}")).collect();
    let mut tasks = Vec::new();
    for t in 0..4 {
        let mut c = rls(s.grpc_addr).await;
        let mut keys = keys.clone();
        keys.rotate_left(t * 8);
        if t % 2 == 1 {
            keys.reverse();
        }
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let ds = keys
                    .iter()
                    .map(|k| descriptor(&[("generic_key", k.as_str())]))
                    .collect();
                let r = ask(&mut c, request("edge", ds, 1)).await;
                assert_eq!(r.statuses.len(), 32);
            }
        }));
    }
    for t in tasks {
        t.await.expect("no task panicked");
    }
    let mut c = rls(s.grpc_addr).await;
    let ds = keys
        .iter()
        .map(|k| descriptor(&[("generic_key", k.as_str())]))
        .collect();
    let r = ask(&mut c, request("edge", ds, 0)).await;
    for (k, st) in keys.iter().zip(&r.statuses) {
        let limit = st.current_limit.as_ref().expect("a limit");
        assert!(
            limit.requests_per_unit >= 1 && limit.requests_per_unit <= 5,
            "{k}: {limit:?}"
        );
    }
    let st = s.state.status(100);
    for k in &keys {
        let id = format!("edge/generic_key={k}");
        let r = st.resources.iter().find(|r| r.id == id).expect("leased");
        assert_eq!(r.leases.len(), 1, "{id}");
    }
    s.shutdown().await;
}

/// On a leaf, a descriptor's first hits wait for the parent: the leaf
/// has no capacity for the resource until its parent answers (a network
/// round trip), then admits from its share.
#[tokio::test]
async fn a_leafs_first_hits_wait_for_its_parents_answer() {
    // Real time: the leaf and its requester act on their own schedules.
    let real = |config: Arc<Config>| {
        let mut o =
            ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(config));
        o.min_request_interval = std::time::Duration::ZERO;
        o
    };
    let root = start(real(Arc::new(Config::parse(CONFIG, "t.toml").unwrap())))
        .await
        .expect("root starts");
    let mut o = real(Arc::new(Config::empty()));
    o.parent = vec![root.grpc_addr.to_string()];
    let leaf = start(o).await.expect("leaf starts");
    let mut c = rls(leaf.grpc_addr).await;
    let first = ask(&mut c, request("edge", vec![descriptor(&[("k", "v")])], 1)).await;
    assert_eq!(
        first.overall_code,
        Code::OverLimit as i32,
        "no capacity yet"
    );
    let admitted = || {
        let mut c = c.clone();
        async move {
            let r = ask(&mut c, request("edge", vec![descriptor(&[("k", "v")])], 1)).await;
            r.overall_code == Code::Ok as i32
        }
    };
    doorman_testkit::eventually_async(
        "the leaf admits from its parent's grant",
        std::time::Duration::from_secs(5),
        admitted,
    )
    .await;
    leaf.shutdown().await;
    root.shutdown().await;
}
