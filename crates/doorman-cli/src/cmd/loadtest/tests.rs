//! The load generator against in-process servers, with short durations.

use super::*;
use doorman_core::config::Config;
use doorman_core::server::Sharded;
use doorman_server::server::{start, ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};

fn config_of(glob: &str) -> std::sync::Arc<Config> {
    let r = Resource::fair(glob, 100.0).lease(60).refresh(5);
    TestConfig::new().resource(r).parse()
}

fn config() -> std::sync::Arc<Config> {
    config_of("loadtest-*")
}

fn opts(server: String, duration: f64) -> Options {
    Options {
        server,
        protocol: Protocol::Capacity,
        clients: 20,
        resources: 2,
        resource_prefix: "loadtest-".into(),
        wants: 10.0,
        concurrency: 4,
        rate: None,
        duration,
        warmup: 0.2,
        connections: 2,
        capacity: Some(100.0),
        timeout: 2.0,
        json: false,
        server_pid: None,
        tls: Default::default(),
    }
}

async fn server() -> doorman_server::server::RunningServer {
    let cfg = config();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    start(o).await.unwrap()
}

#[test]
fn percentiles_of_a_known_distribution() {
    let mut h = histogram();
    for v in 1..=1000u64 {
        h.record(v).unwrap();
    }
    let l = latency(&h);
    assert!((l.p50 as i64 - 500).abs() <= 1, "{l:?}");
    assert!((l.p90 as i64 - 900).abs() <= 1, "{l:?}");
    assert!((l.p99 as i64 - 990).abs() <= 1, "{l:?}");
    assert!((l.p999 as i64 - 999).abs() <= 1, "{l:?}");
    assert_eq!(l.max, 1000);
    assert!((l.mean - 500.5).abs() < 0.5);
}

/// A `--server-pid` that exits during the run (here a `sleep` standing in
/// for a server that dies) costs the report its CPU figures, not the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_pid_that_exits_mid_run_leaves_the_rest_of_the_report() {
    let s = server().await;
    let mut child = std::process::Command::new("sleep")
        .arg("0.5")
        .spawn()
        .unwrap();
    let pid = child.id();
    // Reaped once it exits, so its /proc entry goes away.
    let reaper = std::thread::spawn(move || child.wait());
    let o = Options {
        server_pid: Some(pid),
        ..opts(s.grpc_addr.to_string(), 1.0)
    };
    let r = run(o).await.unwrap();
    assert!(reaper.join().unwrap().unwrap().success());
    assert!(r.server_cpu.is_none(), "{:?}", r.server_cpu);
    assert!(r.rpcs > 0 && r.errors.is_empty(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measures_a_server_and_stops_on_time() {
    let s = server().await;
    let t = Instant::now();
    // The server runs in this process: its CPU is this process's.
    let o = Options {
        server_pid: Some(std::process::id()),
        ..opts(s.grpc_addr.to_string(), 1.0)
    };
    let r = run(o).await.unwrap();
    let cpu = r.server_cpu.expect("--server-pid reports the server's CPU");
    assert!(cpu.cpu_s > 0.0 && cpu.us_per_rpc > 0.0, "{cpu:?}");
    assert!((cpu.us_per_rpc - cpu.cpu_s * 1e6 / r.rpcs as f64).abs() < 1e-6);
    let wall = t.elapsed();
    assert!(
        wall < Duration::from_secs_f64(1.2 + 2.0 + 0.5),
        "ran {wall:?}"
    );
    assert!(
        r.duration_s >= 1.0 && r.duration_s < 2.0,
        "{}",
        r.duration_s
    );
    assert!(r.rpcs > 0 && r.errors.is_empty(), "{r:?}");
    let l = r.latency_us;
    assert!(
        l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max,
        "{l:?}"
    );
    assert!((r.rpcs_per_s - r.rpcs as f64 / r.duration_s).abs() < 1e-6);
    // 20 clients × 10 ≤ 100 each resource would exceed it: 200 wanted, 100 there.
    assert_eq!(r.granted.len(), 2);
    for g in r.granted.values() {
        assert!(*g <= 100.0 + 1e-9 && *g >= 95.0, "granted {g}");
    }
    // The server saw exactly the client ids and resources asked for.
    assert_eq!(s.state.core().lease_count(), 40);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_redirect_on_the_same_host() {
    let master = server().await;
    let standby = server().await;
    standby
        .state
        .core()
        .step_down(Some(master.grpc_addr.to_string()));
    let r = run(opts(standby.grpc_addr.to_string(), 0.5)).await.unwrap();
    assert_eq!(r.redirects, 1);
    assert_eq!(r.server, master.grpc_addr.to_string());
    assert!(r.rpcs > 0 && r.errors.is_empty(), "{r:?}");
    assert_eq!(standby.state.core().lease_count(), 0);
    assert_eq!(master.state.core().lease_count(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_to_follow_a_redirect_to_another_host() {
    let standby = server().await;
    standby
        .state
        .core()
        .step_down(Some("192.0.2.1:6000".into()));
    let e = run(opts(standby.grpc_addr.to_string(), 0.5))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not on the host given"), "{e}");
}

#[tokio::test]
async fn bad_flags_are_refused_before_anything_is_sent() {
    let mut o = opts("127.0.0.1:1".into(), 0.3);
    o.wants = f64::NAN;
    assert!(run(o.clone())
        .await
        .unwrap_err()
        .to_string()
        .contains("--wants"));
    o.wants = 1.0;
    o.resources = 10_001;
    assert!(run(o.clone())
        .await
        .unwrap_err()
        .to_string()
        .contains("--resources"));
    o.resources = 1;
    o.server_pid = Some(u32::MAX);
    let e = run(o.clone()).await.unwrap_err().to_string();
    assert!(e.contains("--server-pid 4294967295"), "{e}");
    o.server_pid = None;
    o.rate = Some(0.0);
    let e = run(o.clone()).await.unwrap_err().to_string();
    assert!(e.contains("--rate"), "{e}");
    o.rate = None;
    o.concurrency = 0;
    assert!(run(o).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_sends_at_the_rate_given_and_no_faster() {
    let s = server().await;
    let o = Options {
        rate: Some(200.0),
        warmup: 0.0,
        ..opts(s.grpc_addr.to_string(), 1.0)
    };
    let r = run(o).await.unwrap();
    assert!(r.errors.is_empty(), "{r:?}");
    // Requests due in the second measured: 200 (the schedule starts at
    // the run's start; the last may still be in flight at the end).
    assert!(r.rpcs <= 200 && r.rpcs >= 190, "{} requests", r.rpcs);
    assert_eq!(r.rate, Some(200.0));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_counted_by_code() {
    let cfg = config();
    let mut so = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    so.min_request_interval = Duration::ZERO;
    let s = doorman_testkit::IsolatedServer::start(so).unwrap();
    let mut o = opts(s.addr(), 1.0);
    o.warmup = 0.0;
    o.timeout = 0.3;
    let load = tokio::spawn(run(o));
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.kill();
    let r = load.await.unwrap().unwrap();
    assert!(r.rpcs > 0, "requests succeeded before the kill");
    let failed: u64 = r.errors.values().sum();
    assert!(failed > 0, "requests after the kill fail: {r:?}");
    assert!(
        r.errors.keys().all(
            |k| ["Unavailable", "Unknown", "DeadlineExceeded", "Cancelled"].contains(&k.as_str())
        ),
        "{:?}",
        r.errors
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_envoys_rate_limit_service() {
    let cfg = config_of("loadtest/*");
    let s = start(ServerOptions::new(
        "127.0.0.1:0".parse().unwrap(),
        ConfigSource::Inline(cfg),
    ))
    .await
    .unwrap();
    let mut o = opts(s.grpc_addr.to_string(), 1.0);
    o.protocol = Protocol::Rls;
    let r = run(o).await.unwrap();
    assert!(r.rpcs > 0 && r.errors.is_empty(), "{r:?}");
    // Far more hits than the capacity of 100/s: most are over the limit.
    assert!(r.over_limit > 0 && r.over_limit < r.rpcs, "{r:?}");
    assert!(r.granted.is_empty());
    let st = s.state.status(10);
    let ids: Vec<&str> = st.resources.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "loadtest/resource=loadtest-0",
            "loadtest/resource=loadtest-1"
        ]
    );
    s.shutdown().await;
}
