//! Per-request cost of the share algorithms at 1k … 1M demands on one
//! resource. Results and the command are in BENCHMARKS.md.
//!
//! * `decide`: a refresh with unchanged wants (band rules cached).
//! * `update`: a wants change (treap re-key), no decision.
//! * `update+decide`: a wants change followed by a decision, which must
//!   recompute the band rule: the worst case of a request.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use doorman_algorithms::{Kind, RequesterId, Shares};
use doorman_lease::{Amount, Demand};
use std::time::Duration;

fn populated(kind: Kind, n: usize) -> (Shares<()>, Vec<RequesterId>) {
    let mut s = Shares::new(kind, Amount::new("capacity", n as f64 * 10.0).unwrap());
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let ids: Vec<_> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let wants = (x % 2000) as f64 / 100.0 + 1.0;
            s.insert(&[Demand::new(0, 1, wants).unwrap()], ())
        })
        .collect();
    for id in &ids {
        s.decide(*id);
    }
    (s, ids)
}

fn bench(c: &mut Criterion) {
    for kind in [Kind::FairShare, Kind::ProportionalShare] {
        let mut g = c.benchmark_group(kind.name());
        g.warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .sample_size(30);
        for n in [1_000usize, 10_000, 100_000, 1_000_000] {
            let (mut s, ids) = populated(kind, n);
            let mut i = 0usize;
            g.bench_with_input(BenchmarkId::new("decide", n), &n, |b, _| {
                b.iter(|| {
                    i = (i + 7919) % ids.len();
                    black_box(s.decide(ids[i]))
                })
            });
            let mut k = 0u64;
            g.bench_with_input(BenchmarkId::new("update", n), &n, |b, _| {
                b.iter(|| {
                    k += 1;
                    i = (i + 7919) % ids.len();
                    let d = Demand::new(0, 1, (k % 3000) as f64 / 100.0).unwrap();
                    s.set_demands(ids[i], black_box(&[d]));
                })
            });
            g.bench_with_input(BenchmarkId::new("update+decide", n), &n, |b, _| {
                b.iter(|| {
                    k += 1;
                    i = (i + 7919) % ids.len();
                    let d = Demand::new(0, 1, (k % 3000) as f64 / 100.0).unwrap();
                    s.set_demands(ids[i], &[d]);
                    black_box(s.decide(ids[i]))
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
