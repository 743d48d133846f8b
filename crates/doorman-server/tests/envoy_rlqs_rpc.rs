//! Envoy's RLQS as Envoy's own client code calls it (the generated
//! `RateLimitQuotaServiceClient` of `envoy-types`), against a server in
//! this process: the assignment (a token bucket from the grant, a time to
//! live from the lease), re-assignment when the demand moves, unmatched
//! buckets, bad bucket ids and access rules, and the metrics. The
//! behaviour with real Envoys is `envoy.rs`.

use doorman_testkit::rpc as common;

use std::time::Duration;

use common::{server_with, ManualClock};
use doorman_server::server::RunningServer;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tokio::sync::mpsc;
use tonic::Streaming;

/// Capacity 10/s for `edge/*`, leases of 60 s refreshed every 4 s.
const CONFIG: &str = r#"
[[resources]]
identifier_glob = "edge/name=*"
capacity = 10
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 4
learning_mode_duration = 0

[envoy]
unmatched = "over_limit"
"#;

/// A bucket id of `(key, value)` entries.
fn bucket(entries: &[(&str, &str)]) -> Option<BucketId> {
    Some(BucketId {
        bucket: entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

fn usage(name: &str, allowed: u64, denied: u64, elapsed: Option<i64>) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: bucket(&[("name", name)]),
        time_elapsed: elapsed.map(|s| PbDuration {
            seconds: s,
            nanos: 0,
        }),
        num_requests_allowed: allowed,
        num_requests_denied: denied,
    }
}

/// A stream: the sender of usage reports and the answers.
async fn open(
    s: &RunningServer,
    first: Vec<BucketQuotaUsage>,
) -> (
    mpsc::Sender<RateLimitQuotaUsageReports>,
    Streaming<RateLimitQuotaResponse>,
) {
    let mut c = RateLimitQuotaServiceClient::connect(format!("http://{}", s.grpc_addr))
        .await
        .expect("connects");
    let (tx, rx) = mpsc::channel(8);
    tx.send(RateLimitQuotaUsageReports {
        domain: "edge".into(),
        bucket_quota_usages: first,
    })
    .await
    .unwrap();
    let answers = c
        .stream_rate_limit_quotas(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    (tx, answers)
}

/// The next answer's assignment: (tokens per fill, fill interval s, time
/// to live s), or the blanket rule.
async fn next(answers: &mut Streaming<RateLimitQuotaResponse>) -> (Result<(u32, i64), i32>, i64) {
    let r = tokio::time::timeout(Duration::from_secs(10), answers.message())
        .await
        .expect("an answer in time")
        .expect("no error")
        .expect("not the end");
    let action = r.bucket_action.into_iter().next().expect("one bucket");
    let Some(BucketAction::QuotaAssignmentAction(a)) = action.bucket_action else {
        panic!("not an assignment");
    };
    let ttl = a.assignment_time_to_live.expect("a time to live").seconds;
    let strategy = match a.rate_limit_strategy.and_then(|s| s.strategy) {
        Some(Strategy::TokenBucket(t)) => Ok((
            t.tokens_per_fill.expect("tokens").value,
            t.fill_interval.expect("interval").seconds,
        )),
        Some(Strategy::BlanketRule(r)) => Err(r),
        other => panic!("{other:?}"),
    };
    (strategy, ttl)
}

#[tokio::test]
async fn a_bucket_is_assigned_its_grant_for_the_leases_time_and_again_when_demand_moves() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    // A first report without elapsed time asks for the whole capacity.
    let (tx, mut answers) = open(&s, vec![usage("a", 1, 0, None)]).await;
    let (strategy, ttl) = next(&mut answers).await;
    assert_eq!(strategy, Ok((10, 1)), "10 per second");
    assert!((58..=60).contains(&ttl), "the lease's 60 s: {ttl}");
    // A second stream (another Envoy) on the same bucket: FAIR_SHARE gives
    // each half once the first refreshes.
    let (tx2, mut answers2) = open(&s, vec![usage("a", 1, 0, None)]).await;
    let _ = next(&mut answers2).await;
    // The first reports: 60 requests in 3 s (allowed or not), a demand of
    // 20/s, more than 10 % above what it asked: it is re-assigned at once,
    // with its share of the capacity.
    clock.advance(3.0);
    tx.send(RateLimitQuotaUsageReports {
        domain: "edge".into(),
        bucket_quota_usages: vec![usage("a", 30, 30, Some(3))],
    })
    .await
    .unwrap();
    let (strategy, _) = next(&mut answers).await;
    assert_eq!(strategy, Ok((5, 1)), "half of 10 per second");
    let text = s.state.metrics_text();
    assert_eq!(
        common::metric(&text, "doorman_server_envoy_rlqs_streams"),
        Some(2.0)
    );
    assert!(
        common::metric(&text, "doorman_server_envoy_rlqs_bucket_reports_total").unwrap_or(0.0)
            >= 3.0
    );
    drop((tx, tx2));
    s.shutdown().await;
}

#[tokio::test]
async fn an_unmatched_bucket_gets_the_configured_blanket_rule() {
    let clock = ManualClock::new();
    let unmatched = BucketQuotaUsage {
        bucket_id: bucket(&[("other", "x")]),
        ..usage("a", 1, 0, None)
    };
    let ok = CONFIG.replace("unmatched = \"over_limit\"", "unmatched = \"ok\"");
    for (config, rule, why) in [
        (CONFIG, BlanketRule::DenyAll, "unmatched = over_limit"),
        (&ok, BlanketRule::AllowAll, "unmatched = ok"),
    ] {
        let s = server_with(config, &clock).await;
        let (_tx, mut answers) = open(&s, vec![unmatched.clone()]).await;
        let (strategy, _) = next(&mut answers).await;
        assert_eq!(strategy, Err(rule as i32), "{why}");
        s.shutdown().await;
    }
}

#[tokio::test]
async fn a_bad_bucket_id_or_a_refused_caller_ends_the_stream_naming_why() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let empty = BucketQuotaUsage {
        bucket_id: bucket(&[]),
        ..usage("a", 1, 0, None)
    };
    let (_tx, mut answers) = open(&s, vec![empty]).await;
    let e = answers.message().await.expect_err("refused");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(
        e.message().contains("bucket_quota_usages[0].bucket_id"),
        "{}",
        e.message()
    );
    s.shutdown().await;
    let s = common::server_refusing_anonymous(CONFIG, &clock).await;
    let (_tx, mut answers) = open(&s, vec![usage("a", 1, 0, None)]).await;
    let e = answers.message().await.expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("edge/name=a"), "{}", e.message());
    s.shutdown().await;
}
