//! Config reload from a file: a good change applies with leases kept; a bad
//! one is rejected, counted, and the running config stays.

use doorman_testkit::rpc as common;

use std::time::Duration;

use common::*;
use doorman_server::server::{start, ConfigSource};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::eventually_async;

fn config(capacity: f64) -> String {
    let r = Resource::fair("fair", capacity).lease(20).refresh(4);
    TestConfig::new().resource(r).toml()
}

async fn status(http: std::net::SocketAddr) -> serde_json::Value {
    let (_, body) = http_get(http, "/api/v1/status").await;
    serde_json::from_str(&body).expect("status is JSON")
}

#[tokio::test]
async fn file_changes_apply_and_bad_configs_are_kept_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doorman.toml");
    std::fs::write(&path, config(100.0)).unwrap();
    let clock = ManualClock::new();
    let mut o = opts(ConfigSource::File(path.clone()), &clock);
    o.reload_interval = Duration::from_millis(20);
    let s = start(o).await.unwrap();
    let http = s.http_addr.unwrap();
    let mut c = client(s.grpc_addr).await;
    assert_eq!(cap(&mut c, "a", "fair", 80.0, None).await, 80.0);

    std::fs::write(&path, config(40.0)).unwrap();
    eventually_async("capacity 40 applied", Duration::from_secs(5), || async {
        status(http).await["resources"][0]["capacity"] == 40.0
    })
    .await;
    let st = status(http).await;
    assert_eq!(
        st["resources"][0]["has"], 80.0,
        "the lease survived the reload"
    );
    assert_eq!(st["resources"][0]["requesters"], 1);
    assert_eq!(cap(&mut c, "a", "fair", 80.0, Some(80.0)).await, 40.0);

    std::fs::write(
        &path,
        "[[resources]]\nidentifier_glob = \"fair\"\ncapacity = -5\n",
    )
    .unwrap();
    eventually_async("bad config counted", Duration::from_secs(5), || async {
        let (_, body) = http_get(http, "/metrics").await;
        metric(
            &body,
            "doorman_server_config_reloads_total{result=\"error\"}",
        ) == Some(1.0)
    })
    .await;
    let st = status(http).await;
    assert_eq!(st["resources"][0]["capacity"], 40.0, "old config kept");
    assert_eq!(st["config_source"], path.display().to_string());
    assert_eq!(cap(&mut c, "a", "fair", 80.0, Some(40.0)).await, 40.0);
    s.shutdown().await;
}

#[tokio::test]
async fn a_bad_config_at_start_is_refused_with_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[resources]]\ncapacity = -1\n[resources.algorithm]\nkind = \"NOPE\"\nlease_length = 1\nrefresh_interval = 1\n",
    )
    .unwrap();
    let clock = ManualClock::new();
    let e = start(opts(ConfigSource::File(path), &clock))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("identifier_glob: missing"), "{e}");
    assert!(e.contains("capacity: must be >= 0"), "{e}");
    assert!(e.contains("unknown algorithm kind \"NOPE\""), "{e}");
}

#[tokio::test]
async fn a_root_without_its_config_file_waits_not_ready_until_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doorman.toml");
    let clock = ManualClock::new();
    let mut o = opts(ConfigSource::File(path.clone()), &clock);
    o.reload_interval = Duration::from_millis(20);
    let s = start(o).await.expect("starts without its file");
    let http = s.http_addr.unwrap();
    let (status, body) = http_get(http, "/readyz").await;
    assert!(status.contains("503"), "{status}");
    assert!(body.contains("waiting for the config file"), "{body}");
    let (status, _) = http_get(http, "/healthz").await;
    assert!(status.contains("200"), "alive all the same: {status}");
    let mut c = client(s.grpc_addr).await;
    let e = c
        .get_capacity(pb_request("a", "fair"))
        .await
        .expect_err("nothing is granted without a config");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().starts_with("no config yet"), "{e:?}");
    // A placeholder with only comments is still no config, and not an error.
    std::fs::write(&path, "# the config is coming\n").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(http_get(http, "/readyz").await.0.contains("503"));
    let (_, metrics) = http_get(http, "/metrics").await;
    let errors = "doorman_server_config_reloads_total{result=\"error\"}";
    assert_eq!(metric(&metrics, errors), None, "no false alert");
    std::fs::write(&path, config(40.0)).unwrap();
    eventually_async(
        "ready once the file is there",
        Duration::from_secs(5),
        || async { http_get(http, "/readyz").await.0.contains("200") },
    )
    .await;
    assert_eq!(cap(&mut c, "a", "fair", 100.0, None).await, 40.0);
    s.shutdown().await;
}

fn pb_request(client: &str, resource: &str) -> doorman_proto::doorman::GetCapacityRequest {
    doorman_proto::doorman::GetCapacityRequest {
        client_id: client.into(),
        resource: vec![rr(resource, 1.0, None)],
    }
}
