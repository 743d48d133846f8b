//! Overhead of the top half: `try_acquire` and `wait` on a resource with
//! plenty of capacity (so they never block), uncontended and with 8 tasks
//! contending. No server: an optimistic client applies its wants at once.
//! Results and the command are in BENCHMARKS.md.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]
// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use doorman_client::{Client, Fallback, RateOptions, RateResource};

fn resource(rt: &tokio::runtime::Runtime) -> (Client, RateResource) {
    rt.block_on(async {
        let c = Client::builder()
            .servers(["127.0.0.1:1"])
            .fallback(Fallback::Optimistic)
            .build()
            .await
            .unwrap();
        let r = c.rate_resource("bench", RateOptions::wants(1e12)).unwrap();
        (c, r)
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_client, r) = resource(&rt);
    let mut g = c.benchmark_group("client");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("try_acquire", |b| b.iter(|| black_box(r.try_acquire())));
    g.bench_function("wait", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    r.wait().await;
                }
                start.elapsed()
            })
        })
    });
    const PER_TASK: u64 = 10_000;
    g.throughput(Throughput::Elements(8 * PER_TASK));
    g.bench_function("try_acquire_8_tasks", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let tasks: Vec<_> = (0..8)
                        .map(|_| {
                            let r = r.clone();
                            tokio::spawn(async move {
                                for _ in 0..PER_TASK {
                                    black_box(r.try_acquire());
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
