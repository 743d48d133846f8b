//! The blocking client from plain threads against a real server: the rate
//! held to the lease across many threads, a gauge's concurrency bound, a
//! deadline, and a clear error (no panic) inside an async runtime.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::blocking::{self, BlockingError};
use doorman_client::{AcquireError, Client, ClientError, GaugeOptions, Mode, RateOptions};
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::IsolatedServer;

fn config() -> TestConfig {
    TestConfig::new()
        .resource(Resource::fair("*", 40.0).lease(10).refresh(2))
        .resource(Resource::new("pool", 3.0, "STATIC").lease(10).refresh(2))
}

fn server() -> IsolatedServer {
    let cfg = config().parse();
    let o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    IsolatedServer::start(o).expect("server starts")
}

fn leased(check: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < end, "no lease in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn many_threads_share_the_leased_rate_and_a_gauge_bounds_concurrency() {
    let s = server();
    let c = blocking::Client::connect(Client::builder().servers([s.addr()])).unwrap();
    let r = c.rate_resource("db", RateOptions::wants(20.0)).unwrap();
    leased(|| r.mode() == Mode::Lease && r.capacity() == 20.0);
    let ops = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (r, ops) = (r.clone(), ops.clone());
            std::thread::spawn(move || {
                while start.elapsed() < Duration::from_secs(3) {
                    r.wait().unwrap();
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let n = ops.load(Ordering::Relaxed);
    // 20/s over 3 s plus one burst (2) and the threads' last permits:
    // a broken limiter gives thousands, a stalled one a handful.
    assert!((45..=80).contains(&n), "{n} permits in 3 s at 20/s");

    let g = c.gauge_resource("pool", GaugeOptions::wants(8.0)).unwrap();
    leased(|| g.mode() == Mode::Lease && g.capacity() == 3.0);
    let (now, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (g, now, peak) = (g.clone(), now.clone(), peak.clone());
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let _permit = g.mark().unwrap();
                    let in_use = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(in_use, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    now.fetch_sub(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "at most the capacity in use"
    );
    c.close();
}

#[test]
fn a_deadline_is_an_error_and_async_contexts_are_refused() {
    let s = server();
    let c = blocking::Client::connect(Client::builder().servers([s.addr()])).unwrap();
    let zero = c.rate_resource("zero", RateOptions::wants(0.0)).unwrap();
    leased(|| zero.mode() == Mode::Lease);
    let t = Instant::now();
    let e = zero.wait_timeout(Duration::from_millis(200)).unwrap_err();
    assert!(t.elapsed() >= Duration::from_millis(200));
    let deadline = AcquireError::Deadline {
        resource: "zero".into(),
    };
    assert_eq!(e, BlockingError::Acquire(deadline));

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        assert_eq!(zero.wait(), Err(BlockingError::InAsyncContext));
        let builder = Client::builder().servers([s.addr()]);
        let e = blocking::Client::connect(builder).unwrap_err();
        assert!(matches!(e, ClientError::InAsyncContext), "{e}");
        // spawn_blocking is where sync code belongs: it works there.
        let z = zero.clone();
        let r = tokio::task::spawn_blocking(move || z.wait_timeout(Duration::from_millis(50)));
        let e = r.await.unwrap().unwrap_err();
        assert!(
            matches!(e, BlockingError::Acquire(AcquireError::Deadline { .. })),
            "{e}"
        );
    });
    c.close();
    // Dropping the last handle inside a runtime must not panic either.
    rt.block_on(async move { drop((c, zero)) });
}
