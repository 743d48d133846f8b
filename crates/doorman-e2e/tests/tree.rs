//! Trees of real servers on 127.0.0.1 with real clients: convergence,
//! fairness and priorities across levels, a leaf dying, a parent away.
//!
//! Settings: root lease 6 s, refresh 2 s, decay 0.5, so parents refresh
//! every 2 s, leaves every 1 s and clients every 1 s (floor). Every lease in
//! a subtree is capped at the root's lease, so a renewal must reach the
//! clients (here ≤ 2 s through two levels) within lease − refresh − 1 s of
//! whole-second rounding: 6 − 2 − 1 = 3 s (see docs/architecture.md).

use doorman_core::server::Sharded;
use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, Mode, RateOptions, RateResource};
use doorman_core::config::Config;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_state::state::Unready;
use doorman_testkit::IsolatedServer;

use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::eventually;

fn root_config() -> TestConfig {
    TestConfig::new().resource(Resource::fair("*", 100.0).lease(6).refresh(2))
}

fn opts(addr: &str, parent: Option<&IsolatedServer>) -> ServerOptions {
    let cfg = match parent {
        None => root_config().parse(),
        Some(_) => Arc::new(Config::empty()),
    };
    let mut o = ServerOptions::new(addr.parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    o.parent_timeout = Duration::from_millis(500);
    if let Some(p) = parent {
        o.parent = vec![p.addr()];
    }
    o
}

fn server(parent: Option<&IsolatedServer>) -> IsolatedServer {
    IsolatedServer::start(opts("127.0.0.1:0", parent)).expect("server starts")
}

async fn clients(
    leaf: &IsolatedServer,
    n: usize,
    priority: i64,
    wants: f64,
) -> Vec<(Client, RateResource)> {
    let mut out = vec![];
    for _ in 0..n {
        let c = Client::builder()
            .servers([leaf.addr()])
            .fallback(Fallback::Pessimistic)
            .rpc_timeout(Duration::from_millis(500))
            .backoff(Duration::from_millis(50), Duration::from_millis(300))
            .build()
            .await
            .unwrap();
        let r = c
            .rate_resource("res", RateOptions::wants(wants).priority(priority))
            .unwrap();
        out.push((c, r));
    }
    out
}

fn total(cs: &[(Client, RateResource)]) -> f64 {
    cs.iter().map(|(_, r)| r.capacity()).sum()
}

fn close(v: &[f64], want: &[f64], tol: f64) -> bool {
    v.len() == want.len() && v.iter().zip(want).all(|(a, b)| (a - b).abs() <= tol)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_levels_converge_within_capacity() {
    let root = server(None);
    let parent = server(Some(&root));
    let leaves = [server(Some(&parent)), server(Some(&parent))];
    let mut cs = clients(&leaves[0], 4, 0, 40.0).await;
    cs.extend(clients(&leaves[1], 4, 0, 40.0).await);
    // Demand 320 > capacity 100. Leaves refresh every 1 s: 5 intervals.
    let reached = eventually("95 of 100 handed out", Duration::from_secs(6), || {
        total(&cs) >= 95.0
    })
    .await;
    eprintln!("reached {:.1} of 100 after {reached:?}", total(&cs));
    // The ramp may overshoot once: a leaf whose demand reaches the parent
    // first is granted more than its share and hands it out; when the other
    // leaf's demand arrives its grant shrinks, and the shortfall lasts at
    // most one client refresh interval (1 s here; docs/architecture.md,
    // "Shortfall"). After that, demand is static: never above capacity.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let start = Instant::now();
    let mut peak = 0.0f64;
    while start.elapsed() < Duration::from_secs(3) {
        peak = peak.max(total(&cs));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(peak <= 100.0 + 1e-6, "peak {peak}");
    eventually("the fair split, 12.5 each", Duration::from_secs(10), || {
        let each: Vec<f64> = cs.iter().map(|(_, r)| r.capacity()).collect();
        close(&each, &[12.5; 8], 0.01)
    })
    .await;
    assert_eq!(
        root.state.core().lease_count(),
        1,
        "the root sees one requester: the parent"
    );
    let st = root.state.core().status(doorman_server::lease_clock(), 10);
    assert_eq!(
        st.resources[0].subclients, 8.0,
        "8 clients aggregated in its band"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_capacity_everyone_gets_their_wants() {
    let root = server(None);
    let parent = server(Some(&root));
    let leaf = server(Some(&parent));
    let cs = clients(&leaf, 4, 0, 10.0).await;
    eventually("wants granted", Duration::from_secs(8), || {
        cs.iter().all(|(_, r)| r.capacity() == 10.0)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fairness_crosses_levels() {
    let root = server(None);
    let a = server(Some(&root));
    let b = server(Some(&root));
    let ca = clients(&a, 1, 0, 100.0).await;
    let cb = clients(&b, 3, 0, 100.0).await;
    eventually("1/4 and 3/4", Duration::from_secs(10), || {
        close(&[total(&ca), total(&cb)], &[25.0, 75.0], 0.01)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_cross_levels() {
    let root = server(None);
    let a = server(Some(&root));
    let b = server(Some(&root));
    let high = clients(&a, 1, 10, 60.0).await;
    let low = clients(&b, 2, 0, 100.0).await;
    // Band 10 takes 60 first; band 0 shares the remaining 40.
    eventually("60 / 20 / 20", Duration::from_secs(10), || {
        close(
            &[total(&high), low[0].1.capacity(), low[1].1.capacity()],
            &[60.0, 20.0, 20.0],
            0.01,
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leafs_share_goes_back_to_the_others() {
    let root = server(None);
    let a = server(Some(&root));
    let b = server(Some(&root));
    let ca = clients(&a, 1, 0, 100.0).await;
    let cb = clients(&b, 1, 0, 100.0).await;
    eventually("50 / 50", Duration::from_secs(10), || {
        close(&[total(&ca), total(&cb)], &[50.0, 50.0], 0.01)
    })
    .await;
    a.kill();
    // a's client falls back when its lease (≤ 6 s) runs out; the root
    // forgets a's lease when it expires and b's next refreshes take it.
    eventually("a's client in fallback", Duration::from_secs(10), || {
        ca[0].1.mode() == Mode::Pessimistic
    })
    .await;
    assert_eq!(ca[0].1.capacity(), 0.0);
    eventually("b gets everything", Duration::from_secs(15), || {
        total(&cb) == 100.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_parent_drains_its_leaves_until_it_returns() {
    let root = server(None);
    let parent = server(Some(&root));
    let parent_addr = parent.addr();
    let leaf = server(Some(&parent));
    let cs = clients(&leaf, 2, 0, 30.0).await;
    eventually("granted", Duration::from_secs(8), || total(&cs) == 60.0).await;
    parent.kill();
    let gone = Instant::now();
    // The leaf's own lease from the parent (≤ 6 s) runs out: capacity 0;
    // the clients' leases never outlive it.
    eventually("leaf drained", Duration::from_secs(10), || {
        leaf.state
            .core()
            .status(doorman_server::lease_clock(), 0)
            .resources
            .iter()
            .all(|r| r.capacity == 0.0)
    })
    .await;
    eventually("clients at 0", Duration::from_secs(8), || total(&cs) == 0.0).await;
    assert!(gone.elapsed() <= Duration::from_secs(10));
    let _back = IsolatedServer::start(opts(&parent_addr, Some(&root))).expect("parent restarts");
    eventually("recovered", Duration::from_secs(12), || total(&cs) == 60.0).await;
}

/// A leaf whose parent does not answer is not ready even before any
/// client comes (it checks the parent with Discovery), says why, and
/// exports the link's state; under a live parent it is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_whose_parent_never_answers_is_not_ready() {
    let dead_addr = format!("127.0.0.1:{}", doorman_testkit::free_port().unwrap());
    let mut o = opts("127.0.0.1:0", None);
    o.config = ConfigSource::Inline(Arc::new(Config::empty()));
    o.parent = vec![dead_addr];
    let leaf = doorman_server::server::start(o).await.unwrap();
    eventually("not ready", Duration::from_secs(5), || {
        leaf.state
            .readiness()
            .is_err_and(|e| matches!(&e, Unready::Parent(why) if why.contains("the parent has not answered since start")))
    })
    .await;
    let text = leaf.state.metrics_text();
    assert!(
        text.contains("doorman_server_parent_connected 0\n"),
        "{text}"
    );
    assert!(
        text.contains("doorman_server_parent_errors_total{code=\"Unavailable\"}"),
        "{text}"
    );
    leaf.shutdown().await;

    let root = server(None);
    let mut o = opts("127.0.0.1:0", Some(&root));
    o.config = ConfigSource::Inline(Arc::new(Config::empty()));
    let leaf = doorman_server::server::start(o).await.unwrap();
    eventually("the parent answered", Duration::from_secs(5), || {
        let text = leaf.state.metrics_text();
        !text.contains("doorman_server_parent_last_success_timestamp_seconds 0\n")
    })
    .await;
    assert_eq!(leaf.state.readiness(), Ok(()));
    let text = leaf.state.metrics_text();
    assert!(
        text.contains("doorman_server_parent_connected 1\n"),
        "{text}"
    );
    leaf.shutdown().await;
}
