//! `doorman config push|get` against a real etcd, with two running servers
//! reading their config from the key.

use doorman_core::server::Sharded;
use std::process::Command;
use std::time::Duration;

use doorman_server::server::{start, ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, EtcdProcess};

const BIN: &str = env!("CARGO_BIN_EXE_doorman");
const KEY: &str = "/doorman/config";

fn config(capacity: f64) -> String {
    let r = Resource::fair("*", capacity).lease(20).refresh(5);
    TestConfig::new().resource(r).toml()
}

fn push(etcd: &str, file: &std::path::Path) -> std::process::Output {
    Command::new(BIN)
        .args(["config", "push", "--etcd", etcd, "--key", KEY])
        .arg(file)
        .output()
        .unwrap()
}

/// A server on a free port reading its config from `e`'s key.
fn from_etcd(e: &EtcdProcess) -> ServerOptions {
    let config = ConfigSource::Etcd {
        etcd: e.endpoints().into(),
        key: KEY.into(),
    };
    ServerOptions::new("127.0.0.1:0".parse().unwrap(), config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_configs_reach_running_servers_and_bad_ones_are_refused() {
    let e = EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, config(100.0)).unwrap();
    let out = push(&e.endpoint(), &good);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("pushed to /doorman/config"));

    let mut servers = Vec::new();
    for _ in 0..2 {
        let mut o = from_etcd(&e);
        o.min_request_interval = Duration::ZERO;
        servers.push(start(o).await.expect("server starts from the etcd config"));
    }
    let capacity =
        |s: &doorman_server::server::RunningServer| s.state.core().config().templates()[0].capacity;
    assert!(servers.iter().all(|s| capacity(s) == 100.0));
    assert_eq!(
        servers[0].state.core().config().source(),
        "etcd:/doorman/config"
    );

    // A new config applies on both servers within a second.
    std::fs::write(&good, config(42.0)).unwrap();
    let out = push(&e.endpoint(), &good);
    assert!(out.status.success());
    eventually("pushed config applied", Duration::from_secs(1), || {
        servers.iter().all(|s| capacity(s) == 42.0)
    })
    .await;

    // An invalid file is refused by the CLI with every problem; nothing is written.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[resources]]\nidentifier_glob = \"*\"\ncapacity = -1\n[resources.algorithm]\nkind = \"NOPE\"\nlease_length = 5\nrefresh_interval = 1\n").unwrap();
    let out = push(&e.endpoint(), &bad);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("capacity: must be >= 0")
            && stderr.contains("unknown algorithm kind \"NOPE\""),
        "{stderr}"
    );
    assert!(stderr.contains("not pushed"), "{stderr}");
    let got = Command::new(BIN)
        .args(["config", "get", "--etcd", &e.endpoint(), "--key", KEY])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&got.stdout), config(42.0));

    // An invalid value written straight into etcd is rejected by the servers.
    doorman_etcd::audit::push(
        &e.endpoints().into(),
        KEY,
        "capacity = \"lots\"",
        "test",
        "push",
    )
    .await
    .unwrap();
    eventually("invalid config counted", Duration::from_secs(2), || {
        servers.iter().all(|s| {
            let text = s.state.metrics_text();
            text.contains("doorman_server_config_reloads_total{result=\"error\"} 1")
        })
    })
    .await;
    assert!(
        servers.iter().all(|s| capacity(s) == 42.0),
        "the old config stays"
    );
    for s in servers {
        s.shutdown().await;
    }
}

#[test]
fn server_flags_are_checked() {
    let out = Command::new(BIN)
        .args(["server", "--config", "etcd:/x", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --etcd"));
    let out = Command::new(BIN)
        .args([
            "server",
            "--election-key",
            "/x",
            "--parent",
            "127.0.0.1:1",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--election-key needs --etcd"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_started_before_its_config_is_pushed_waits_for_it() {
    let e = EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"));
    let o = from_etcd(&e);
    let s = start(o)
        .await
        .expect("starts although the key is not pushed yet");
    let now = doorman_server::lease_clock();
    let why = s.state.core().readiness(now).unwrap_err();
    assert!(
        why.to_string()
            .contains("no config at etcd key /doorman/config"),
        "{why}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, config(7.0)).unwrap();
    assert!(push(&e.endpoint(), &file).status.success());
    eventually(
        "the pushed config is applied",
        Duration::from_secs(5),
        || {
            s.state
                .core()
                .readiness(doorman_server::lease_clock())
                .is_ok()
        },
    )
    .await;
    assert_eq!(s.state.core().config().templates()[0].capacity, 7.0);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_whose_etcd_is_down_at_start_waits_and_applies_its_config() {
    let mut e = EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, config(9.0)).unwrap();
    assert!(push(&e.endpoint(), &file).status.success());
    e.stop();
    let o = from_etcd(&e);
    let s = start(o).await.expect("starts although etcd is down");
    let why = s
        .state
        .core()
        .readiness(doorman_server::lease_clock())
        .unwrap_err();
    assert!(
        why.to_string()
            .contains("cannot read the config at etcd key /doorman/config yet"),
        "{why}"
    );
    e.restart().unwrap();
    eventually(
        "the config is read once etcd answers",
        Duration::from_secs(15),
        || {
            s.state
                .core()
                .readiness(doorman_server::lease_clock())
                .is_ok()
        },
    )
    .await;
    assert_eq!(s.state.core().config().templates()[0].capacity, 9.0);
    s.shutdown().await;
}

/// Etcd down at start and nothing pushed yet: once etcd answers, readiness
/// says the key is missing (not that etcd cannot be read), and a push then
/// applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_pending_on_a_down_etcd_says_the_key_is_missing_once_etcd_answers() {
    let mut e = EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"));
    e.stop();
    let s = start(from_etcd(&e))
        .await
        .expect("starts although etcd is down");
    let why = || {
        s.state
            .core()
            .readiness(doorman_server::lease_clock())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(why().contains("cannot read the config"), "{}", why());
    e.restart().unwrap();
    eventually(
        "readiness names the missing key",
        Duration::from_secs(15),
        || why().contains("no config at etcd key /doorman/config"),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, config(7.0)).unwrap();
    assert!(push(&e.endpoint(), &file).status.success());
    eventually("the pushed config applies", Duration::from_secs(15), || {
        why().is_empty()
    })
    .await;
    assert_eq!(s.state.core().config().templates()[0].capacity, 7.0);
    s.shutdown().await;
}
