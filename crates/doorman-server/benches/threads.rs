//! The core under concurrent requests: 1, 2, 4 and 8 threads each sending
//! one-resource GetCapacity requests, either on a resource of their own
//! (distinct: each in its own shard while there are enough shards) or all
//! on one resource (hot), through the core in its default shards and
//! through one shard (what one global lock was).
//! Throughput per thread count shows whether requests for different
//! resources contend; the hot resource shows what contention costs.
//! Results and the command are in BENCHMARKS.md.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]
// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use doorman_core::config::Config;
use doorman_core::server::{CapacityRequest, CoreOptions, ResourceAsk, Sharded, Who};
use doorman_lease::{Demand, Span, Time};
use doorman_state::core_locks::{default_shards, LockedCore};

fn config() -> Arc<Config> {
    let text = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 100\n\
                [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\n\
                refresh_interval = 10\nlearning_mode_duration = 0\n";
    Arc::new(Config::parse(text, "bench").expect("valid config"))
}

fn core(shards: usize) -> Arc<LockedCore> {
    let opts = CoreOptions {
        min_request_interval: Span::ZERO,
        ..CoreOptions::default()
    };
    let core = LockedCore::new(opts, config(), shards);
    (&core).become_master(Time::ZERO);
    Arc::new(core)
}

/// Thread `t`'s requests: 20 clients taking turns on its resource, which
/// is in shard `t` (modulo the shard count) unless all share the hot one.
fn requests(core: &LockedCore, t: usize, hot: bool) -> Vec<CapacityRequest> {
    let home = t % core.shard_count();
    let resource = match hot {
        true => "hot".to_string(),
        false => (0..)
            .map(|i| format!("r{t}-{i}"))
            .find(|id| core.shard_index(id) == home)
            .expect("some id lands in every shard"),
    };
    (0..20)
        .map(|c| CapacityRequest {
            who: Who::Client(format!("t{t}-c{c}").into()),
            resources: vec![ResourceAsk {
                resource_id: resource.clone(),
                demands: vec![Demand::new(0, 1, 10.0).expect("valid demand")],
                claim: None,
                outstanding: None,
            }],
        })
        .collect()
}

/// Wall time for `iters` requests spread over `threads` threads.
fn run(core: &Arc<LockedCore>, threads: usize, hot: bool, iters: u64) -> Duration {
    let per_thread = iters.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let reqs = requests(core, t, hot);
            s.spawn(move || {
                for i in 0..per_thread {
                    let req = &reqs[i as usize % reqs.len()];
                    let d = (&**core).decide(Time::from_secs(1), req);
                    std::hint::black_box(d.grants.expect("master"));
                }
            });
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    for (name, hot) in [("distinct", false), ("hot", true)] {
        let mut g = c.benchmark_group(format!("get_capacity_{name}"));
        g.sample_size(10).measurement_time(Duration::from_secs(2));
        g.throughput(Throughput::Elements(1));
        for (lock, shards) in [("sharded", default_shards()), ("one_lock", 1)] {
            for threads in [1, 2, 4, 8] {
                let core = core(shards);
                g.bench_function(BenchmarkId::new(lock, threads), |b| {
                    b.iter_custom(|iters| run(&core, threads, hot, iters))
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
