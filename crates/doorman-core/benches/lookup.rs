//! Template lookup at the documented scale: 10 000 ids that match no glob
//! (the worst case: every candidate is tried) against a config of 50 000
//! templates, with the literal-prefix index (`Config::find`) and with a
//! plain scan of every glob in file order (what `find` did before), in one
//! run; once with globs of distinct literal prefixes (`svc{i}/db/*`), once
//! with globs that share one prefix and differ in their literal suffix
//! (`db/*/x{i}`), once with globs that share both their literal prefix and
//! their literal suffix and differ only in the middle (`db/*/x{i}/*`, told
//! apart by the middle-literal filter). Then the largest request the
//! protocol allows (10 000 resources, all new) decided by a core with the
//! first and the last config: how long one GetCapacity at the documented
//! limits holds the core lock. Results and the command are in
//! BENCHMARKS.md.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use doorman_core::config::Config;
use doorman_core::limits::MAX_RESOURCES_PER_REQUEST;
use doorman_core::server::{
    CapacityRequest, CoreOptions, ResourceAsk, ServerCore, Sharded, Who, DECIDE_STEP,
};
use doorman_lease::{Demand, Time};

const TEMPLATES: usize = 50_000;
const IDS: usize = 10_000;

fn config(glob: impl Fn(usize) -> String) -> Config {
    let mut text = String::new();
    for i in 0..TEMPLATES {
        text.push_str(&format!(
            "[[resources]]\nidentifier_glob = \"{}\"\ncapacity = 10\n\
             [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 5\n",
            glob(i)
        ));
    }
    Config::parse(&text, "bench").expect("valid config")
}

fn bench(c: &mut Criterion) {
    let unknown = |prefix: &str| -> Vec<String> {
        (0..IDS).map(|i| format!("{prefix}unknown{i}/y")).collect()
    };
    let distinct = config(|i| format!("svc{i}/db/*"));
    bench_config(c, "distinct_prefixes", &distinct, &unknown(""), true);
    // Every id has the shared prefix: only the suffix filter is left.
    let shared = config(|i| format!("db/*/x{i}"));
    bench_config(c, "one_shared_prefix", &shared, &unknown("db/"), false);
    let middles = config(|i| format!("db/*/x{i}/*"));
    bench_config(
        c,
        "shared_prefix_and_suffix",
        &middles,
        &unknown("db/"),
        false,
    );
    largest_request(c, "distinct_prefixes", Arc::new(distinct), |i| {
        format!("svc{}/db/x", i * 5)
    });
    largest_request(c, "shared_prefix_and_suffix", Arc::new(middles), |i| {
        format!("db/a/x{}/b", i * 5)
    });
}

/// One GetCapacity of 10 000 new resources (each matching one of the
/// 50 000 templates) on a fresh master core, whole and its first step of
/// `DECIDE_STEP` (the servers take the core lock per step).
fn largest_request(c: &mut Criterion, name: &str, cfg: Arc<Config>, id: impl Fn(usize) -> String) {
    let req = CapacityRequest {
        who: Who::Client("big".into()),
        resources: (0..MAX_RESOURCES_PER_REQUEST)
            .map(|i| ResourceAsk {
                resource_id: id(i),
                demands: vec![Demand::new(0, 1, 10.0).expect("valid demand")],
                claim: None,
                outstanding: None,
            })
            .collect(),
    };
    let fresh = || {
        let mut core = ServerCore::new(CoreOptions::default(), cfg.clone());
        core.become_master(Time::ZERO);
        core
    };
    let mut g = c.benchmark_group(format!(
        "largest_request_10k_new_resources_50k_templates/{name}"
    ));
    g.sample_size(10);
    g.bench_function("one_step", |b| {
        b.iter_batched(
            fresh,
            |mut core| {
                let asks = &req.resources[..DECIDE_STEP];
                let n = core.with_shard(0, |node, s| {
                    s.decide_asks(node, Time::from_secs(1), &req.who, asks)
                        .map(|g| g.len())
                });
                (core, n)
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("get_capacity", |b| {
        b.iter_batched(
            fresh,
            // The core is returned so that dropping it is not timed.
            |mut core| {
                let n = core.get_capacity(Time::from_secs(1), &req).map(|g| g.len());
                (core, n)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// `Config::find` for every id; with `scan`, also every glob in file order
/// (the same cost for both configs: the scan ignores how globs look).
fn bench_config(c: &mut Criterion, name: &str, cfg: &Config, ids: &[String], scan: bool) {
    let globs: Vec<glob::Pattern> = cfg
        .templates()
        .iter()
        .map(|t| glob::Pattern::new(&t.identifier_glob).expect("valid glob"))
        .collect();
    let mut g = c.benchmark_group(format!("lookup_10k_unknown_ids_50k_templates/{name}"));
    g.sample_size(10);
    g.bench_function("indexed", |b| {
        b.iter(|| ids.iter().filter(|id| cfg.find(id).is_some()).count())
    });
    if scan {
        g.bench_function("plain_scan", |b| {
            b.iter(|| {
                ids.iter()
                    .filter(|id| globs.iter().any(|p| p.matches(id)))
                    .count()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
