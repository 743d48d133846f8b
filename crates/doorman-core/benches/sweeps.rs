//! The core's whole-server operations at 100 000 resources (two leases
//! each). A server holds its core lock for one step of a status snapshot,
//! of the metrics or of cleanup, for a config reload and for the readiness
//! check: those times are how long each could stall requests. Whole passes
//! (the lock released between steps) are measured for comparison.
//! Results and the command are in BENCHMARKS.md.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use doorman_core::config::Config;
use doorman_core::server::{CapacityRequest, CoreOptions, ResourceAsk, ServerCore, Sharded, Who};
use doorman_lease::{Demand, Time};

const RESOURCES: usize = 100_000;

fn config() -> Arc<Config> {
    let text = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 100\n\
                [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 3600\n\
                refresh_interval = 60\nlearning_mode_duration = 0\n";
    Arc::new(Config::parse(text, "bench").expect("valid config"))
}

fn populated() -> ServerCore {
    let mut core = ServerCore::new(CoreOptions::default(), config());
    core.become_master(Time::ZERO);
    for client in ["a", "b"] {
        let resources = (0..RESOURCES)
            .map(|i| ResourceAsk {
                resource_id: format!("r{i}"),
                demands: vec![Demand::new(0, 1, 10.0).expect("valid demand")],
                claim: None,
                outstanding: None,
            })
            .collect();
        let req = CapacityRequest {
            who: Who::Client(client.into()),
            resources,
        };
        core.get_capacity(Time::from_secs(1), &req).expect("master");
    }
    core
}

fn bench(c: &mut Criterion) {
    let mut core = populated();
    let now = Time::from_secs(2);
    let mut g = c.benchmark_group("whole_server_100k_resources");
    g.sample_size(10);
    g.bench_function("held/status_step", |b| {
        b.iter(|| {
            let mut out = Vec::new();
            core.with_shard(0, |n, s| s.status_step(n, now, 100, 0, &mut out));
            out.len()
        })
    });
    g.bench_function("held/gauges_step", |b| {
        b.iter(|| {
            let mut out = Vec::new();
            core.with_shard(0, |n, s| s.gauges_step(n, now, 0, &mut out));
            out.len()
        })
    });
    g.bench_function("held/cleanup_step", |b| {
        b.iter(|| core.with_shard(0, |n, s| s.cleanup_step(n, now, 0)))
    });
    g.bench_function("held/reload", |b| b.iter(|| core.replace_config(config())));
    g.bench_function("held/readiness", |b| b.iter(|| core.readiness(now).is_ok()));
    g.bench_function("pass/status", |b| {
        b.iter(|| core.status(now, 0).resources.len())
    });
    g.bench_function("pass/cleanup", |b| b.iter(|| core.cleanup(now)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
