//! Property tests of the share algorithms: the tree-based `Shares` against a
//! naive reference, plus the invariants Σ grants ≤ C and grant ≤ wants,
//! max-min fairness, order independence and convergence.

use doorman_algorithms::{Kind, RequesterId, Shares};
use doorman_lease::{Amount, Demand};
use proptest::prelude::*;

/// (priority, subclients, wants)
type D = (i64, i64, f64);

fn tol(c: f64) -> f64 {
    1e-9 * c.max(1.0)
}

/// Naive reference: sort each band, fill from the top band down.
fn reference_targets(kind: Kind, cap: f64, demands: &[D]) -> Vec<f64> {
    let mut targets = vec![0.0; demands.len()];
    let mut prios: Vec<i64> = demands.iter().map(|d| d.0).collect();
    prios.sort_unstable_by(|a, b| b.cmp(a));
    prios.dedup();
    let mut remaining = cap;
    for p in prios {
        let idx: Vec<usize> = (0..demands.len()).filter(|&i| demands[i].0 == p).collect();
        let w: f64 = idx.iter().map(|&i| demands[i].2).sum();
        let s: f64 = idx.iter().map(|&i| demands[i].1 as f64).sum();
        if w <= remaining {
            for &i in &idx {
                targets[i] = demands[i].2;
            }
        } else if kind == Kind::FairShare {
            // Iterative water filling.
            let mut left = remaining;
            let mut open: Vec<usize> = idx.clone();
            loop {
                let sub: f64 = open.iter().map(|&i| demands[i].1 as f64).sum();
                let level = left / sub;
                let (sat, unsat): (Vec<usize>, Vec<usize>) = open
                    .iter()
                    .partition(|&&i| demands[i].2 <= level * demands[i].1 as f64);
                if sat.is_empty() {
                    for &i in &unsat {
                        targets[i] = level * demands[i].1 as f64;
                    }
                    break;
                }
                for &i in &sat {
                    targets[i] = demands[i].2;
                    left -= demands[i].2;
                }
                open = unsat;
                if open.is_empty() {
                    break;
                }
            }
        } else {
            let e = remaining / s;
            let mut x = 0.0;
            let mut extra = 0.0;
            for &i in &idx {
                let fair = e * demands[i].1 as f64;
                if demands[i].2 <= fair {
                    x += fair - demands[i].2;
                } else {
                    extra += demands[i].2 - fair;
                }
            }
            for &i in &idx {
                let fair = e * demands[i].1 as f64;
                targets[i] = if demands[i].2 <= fair {
                    demands[i].2
                } else {
                    fair + (demands[i].2 - fair) * (x / extra).min(1.0)
                };
            }
        }
        remaining = (remaining - w.min(remaining)).max(0.0);
    }
    targets
}

fn build(kind: Kind, cap: f64, demands: &[D]) -> (Shares<usize>, Vec<RequesterId>) {
    let mut s = Shares::new(kind, Amount::new("capacity", cap).unwrap());
    let ids = demands
        .iter()
        .enumerate()
        .map(|(i, &(p, sc, w))| s.insert(&[Demand::new(p, sc, w).unwrap()], i))
        .collect();
    (s, ids)
}

fn demand() -> impl Strategy<Value = D> {
    (
        0i64..3,
        1i64..6,
        prop_oneof![Just(0.0), 0.0f64..1000.0, Just(100.0)],
    )
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::FairShare), Just(Kind::ProportionalShare)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn targets_match_reference(kind in kind(), cap in 0.0f64..3000.0,
                               demands in prop::collection::vec(demand(), 1..40)) {
        let (mut s, ids) = build(kind, cap, &demands);
        let want = reference_targets(kind, cap, &demands);
        for (id, w) in ids.iter().zip(&want) {
            let t = s.target(*id);
            prop_assert!((t - w).abs() <= 1e-7 * w.max(1.0), "target {} vs reference {}", t, w);
        }
    }

    #[test]
    fn grants_never_exceed_capacity_or_wants(kind in kind(), cap in 0.0f64..3000.0,
            demands in prop::collection::vec(demand(), 1..30),
            order in prop::collection::vec(0usize..1000, 1..200),
            changes in prop::collection::vec((0usize..1000, demand()), 0..20)) {
        let (mut s, ids) = build(kind, cap, &demands);
        let mut live: Vec<bool> = vec![true; ids.len()];
        for (step, k) in order.iter().enumerate() {
            let i = k % ids.len();
            if !live[i] {
                continue;
            }
            // Interleave wants changes and departures.
            if let Some((j, d)) = changes.get(step) {
                let j = j % ids.len();
                if live[j] {
                    if d.2 > 990.0 {
                        s.remove(ids[j]);
                        live[j] = false;
                    } else {
                        s.set_demands(ids[j], &[Demand::new(d.0, d.1, d.2).unwrap()]);
                    }
                }
            }
            if !live[i] {
                continue;
            }
            let g = s.decide(ids[i]);
            prop_assert!(g >= 0.0);
            prop_assert!(g <= s.wants(ids[i]) + tol(cap), "grant {} > wants {}", g, s.wants(ids[i]));
            let total: f64 = ids.iter().zip(&live).filter(|(_, l)| **l).map(|(id, _)| s.has(*id)).sum();
            prop_assert!(total <= cap + tol(cap), "Σ grants {} > capacity {}", total, cap);
            prop_assert!((s.totals().has - total).abs() <= tol(total));
        }
    }

    #[test]
    fn fair_share_is_max_min_fair(cap in 0.0f64..3000.0,
                                  demands in prop::collection::vec((Just(0i64), 1i64..6, 0.0f64..1000.0), 1..40)) {
        let (mut s, ids) = build(Kind::FairShare, cap, &demands);
        let t: Vec<f64> = ids.iter().map(|id| s.target(*id)).collect();
        let sum_t: f64 = t.iter().sum();
        let sum_w: f64 = demands.iter().map(|d| d.2).sum();
        prop_assert!((sum_t - sum_w.min(cap)).abs() <= 1e-7 * cap.max(1.0));
        // A demand held below its wants is at the water level; nobody with a
        // smaller per-subclient share could give to it.
        for (i, d) in demands.iter().enumerate() {
            prop_assert!(t[i] <= d.2 + 1e-9);
            if t[i] < d.2 - 1e-7 {
                let level_i = t[i] / d.1 as f64;
                for (j, e) in demands.iter().enumerate() {
                    let level_j = t[j] / e.1 as f64;
                    prop_assert!(level_j <= level_i + 1e-7 * level_i.max(1.0),
                        "demand {} at level {} below wants while {} has level {}", i, level_i, j, level_j);
                }
            }
        }
    }

    #[test]
    fn targets_do_not_depend_on_order(kind in kind(), cap in 0.0f64..3000.0,
            demands in prop::collection::vec(demand(), 1..30), seed in any::<u64>()) {
        let (mut a, ids_a) = build(kind, cap, &demands);
        let mut perm: Vec<usize> = (0..demands.len()).collect();
        let mut x = seed | 1;
        for i in (1..perm.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            perm.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let shuffled: Vec<D> = perm.iter().map(|&i| demands[i]).collect();
        let (mut b, ids_b) = build(kind, cap, &shuffled);
        for (k, &i) in perm.iter().enumerate() {
            let ta = a.target(ids_a[i]);
            let tb = b.target(ids_b[k]);
            prop_assert!((ta - tb).abs() <= 1e-9 * ta.max(1.0));
        }
    }

    #[test]
    fn refresh_rounds_converge_to_targets(kind in kind(), cap in 0.0f64..3000.0,
            demands in prop::collection::vec(demand(), 1..30), start in 0usize..30) {
        let (mut s, ids) = build(kind, cap, &demands);
        // Arbitrary starting grants from a previous state, within capacity.
        let mut left = cap;
        for (i, id) in ids.iter().enumerate().skip(start % ids.len()) {
            let g = (demands[i].2 * 0.7).min(left);
            left -= g;
            s.set_has(*id, Amount::new("has", g).unwrap());
        }
        for _ in 0..2 {
            for id in &ids {
                s.decide(*id);
            }
        }
        for id in &ids {
            let t = s.target(*id);
            prop_assert!((s.has(*id) - t).abs() <= 1e-7 * cap.max(1.0), "has {} target {}", s.has(*id), t);
        }
    }
}

#[test]
fn bad_values_are_rejected_by_constructors() {
    assert!(Amount::new("capacity", f64::NAN).is_err());
    assert!(Amount::new("capacity", f64::INFINITY).is_err());
    assert!(Amount::new("capacity", -0.1).is_err());
    assert!(Demand::new(0, 0, 1.0).is_err());
    assert!(Demand::new(0, -5, 1.0).is_err());
    assert!(Demand::new(0, 1, f64::NEG_INFINITY).is_err());
    assert!(Demand::new(0, 1, -1.0).is_err());
    let e = Demand::new(0, 1, f64::NAN).unwrap_err().to_string();
    assert!(e.contains("wants"), "{e}");
    assert_eq!(
        Amount::new("x", -0.0).unwrap().get().to_bits(),
        0.0f64.to_bits()
    );
}

#[test]
fn reference_agrees_with_worked_examples() {
    let r = reference_targets(
        Kind::FairShare,
        100.0,
        &[
            (0, 1, 0.0),
            (0, 1, 24.0),
            (0, 1, 25.2),
            (0, 1, 100.0),
            (0, 1, 100.0),
        ],
    );
    for (g, w) in r.iter().zip([0.0, 24.0, 25.2, 25.4, 25.4]) {
        assert!((g - w).abs() < 1e-9);
    }
}
