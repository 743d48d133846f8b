//! The lease stream across levels: a root, two leaves streaming to it,
//! and a streaming client on each leaf. A holds the whole capacity
//! through leaf 1; B opens the resource at leaf 2. The root pushes leaf 1
//! its lower share, leaf 1 pushes A, A acknowledges, leaf 1 reports what
//! it has out at once, and the root pushes leaf 2 what was freed, which
//! leaf 2 pushes to B: B holds its half long before anyone's refresh
//! (40 s; a waiting node's quarter of it, 10 s). A and B never hold more
//! than the capacity together. A raise at the root (a config reload)
//! reaches both clients the same way.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, Mode, RateOptions, RateResource};
use doorman_core::config::Config;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, IsolatedServer};

fn root_config(capacity: f64) -> TestConfig {
    let r = Resource::fair("*", capacity).lease(60).refresh(40);
    TestConfig::new().resource(r.learning(0))
}

/// The root reads `file` (re-read every 50 ms); a leaf has no config.
fn server(file: &Path, parent: Option<&IsolatedServer>) -> IsolatedServer {
    let source = match parent {
        None => ConfigSource::File(file.to_path_buf()),
        Some(_) => ConfigSource::Inline(Arc::new(Config::empty())),
    };
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), source);
    o.reload_interval = Duration::from_millis(50);
    o.parent = parent.map(|p| vec![p.addr()]).unwrap_or_default();
    IsolatedServer::start(o).expect("server starts")
}

async fn client(leaf: &IsolatedServer, id: &str) -> (Client, RateResource) {
    let c = Client::builder()
        .servers([leaf.addr()])
        .client_id(id)
        .fallback(Fallback::Pessimistic)
        .lease_stream(true)
        .build()
        .await
        .unwrap();
    let r = c.rate_resource("r", RateOptions::wants(100.0)).unwrap();
    (c, r)
}

fn held(r: &RateResource) -> f64 {
    if r.mode() == Mode::Lease {
        r.capacity()
    } else {
        0.0
    }
}

/// Until `done` holds of A's and B's grants (or `limit`), checking every
/// 2 ms that together they never hold more than `capacity`; how long.
async fn watch(
    (a, b): (&RateResource, &RateResource),
    capacity: f64,
    limit: Duration,
    done: impl Fn(f64, f64) -> bool,
) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        let (ha, hb) = (held(a), held(b));
        assert!(ha + hb <= capacity + 1e-9, "A {ha} + B {hb} > {capacity}");
        if done(ha, hb) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_move_through_a_level_on_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("root.toml");
    std::fs::write(&file, root_config(100.0).toml()).unwrap();
    let root = server(&file, None);
    let leaves = [server(&file, Some(&root)), server(&file, Some(&root))];
    let (ca, a) = client(&leaves[0], "a").await;
    eventually("A holds 100", Duration::from_secs(5), || held(&a) == 100.0).await;
    let (cb, b) = client(&leaves[1], "b").await;
    let half = |ha: f64, hb: f64| ha <= 50.0 + 1e-9 && hb >= 50.0 - 1e-9;
    let served = watch((&a, &b), 100.0, Duration::from_secs(8), half).await;
    println!("B served its half after {served:?}");
    assert!(served.is_some(), "B not served within 8 s (refresh 40 s)");
    assert_eq!(root.lease_streams(), 2.0, "both leaves stream to the root");
    let pushed = |s: &IsolatedServer| {
        let text = s.state.metrics_text();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("doorman_server_pushed_grants_total "));
        line.and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(pushed(&root) >= 2.0, "the root pushed to the leaves");
    let before = [pushed(&leaves[0]), pushed(&leaves[1])];
    assert!(before[0] >= 1.0, "leaf 1 pushed A its lower share");
    // A raise at the root reaches both clients without a refresh.
    std::fs::write(&file, root_config(200.0).toml()).unwrap();
    let raised = |ha: f64, hb: f64| ha >= 100.0 - 1e-9 && hb >= 100.0 - 1e-9;
    let served = watch((&a, &b), 200.0, Duration::from_secs(8), raised).await;
    println!("the raise reached both after {served:?}");
    assert!(served.is_some(), "the raise did not reach both within 8 s");
    let after = [pushed(&leaves[0]), pushed(&leaves[1])];
    println!("pushed by the leaves: {before:?}, then {after:?}");
    assert!(
        after[0] > before[0] && after[1] > before[1],
        "each leaf pushed the raise"
    );
    ca.close().await;
    cb.close().await;
}
