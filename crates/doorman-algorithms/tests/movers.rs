//! Property test of `Shares::take_movers`: under any sequence of
//! arrivals, departures, demand changes, decisions, reports, capacity and
//! algorithm changes, a pass that looks only at the requesters it returns
//! (and keeps the streaming ones it leaves short of their target, as the
//! server's push pass does) misses no streaming holder whose grant differs
//! from what it would get. A holder starts streaming with a request (a
//! decision), as on a lease stream. Passes may take the movers a part at
//! a time (a push budget): a part leaves the rest noted, and a pass that
//! takes them all (in parts) still misses no one.

use doorman_algorithms::{Kind, RequesterId, Shares};
use doorman_lease::{Amount, Demand};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Arrive(i64, i64, f64),
    Leave(usize),
    Demand(usize, i64, i64, f64),
    /// A request; `true`: sent on a stream it just opened.
    Decide(usize, bool),
    Report(usize, f64),
    Capacity(f64),
    Kind(Kind),
    /// A pass that pushes to the streaming requesters picked by the mask
    /// (the rest are held back), taking the movers in parts of this size,
    /// all of them.
    Pass(u64, usize),
    /// A pass that takes one part of this size (a budget ran out).
    Part(u64, usize),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::FairShare),
        Just(Kind::ProportionalShare),
        Just(Kind::Static),
        Just(Kind::NoAlgorithm),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let wants = prop_oneof![Just(0.0), 0.0f64..500.0, Just(100.0)];
    prop_oneof![
        3 => (0i64..3, 1i64..4, wants.clone()).prop_map(|(p, s, w)| Op::Arrive(p, s, w)),
        1 => any::<usize>().prop_map(Op::Leave),
        2 => (any::<usize>(), 0i64..3, 1i64..4, wants).prop_map(|(i, p, s, w)| Op::Demand(i, p, s, w)),
        6 => (any::<usize>(), prop::bool::weighted(0.2)).prop_map(|(i, o)| Op::Decide(i, o)),
        1 => (any::<usize>(), 0.0f64..300.0).prop_map(|(i, o)| Op::Report(i, o)),
        1 => (0.0f64..1500.0).prop_map(Op::Capacity),
        1 => kind().prop_map(Op::Kind),
        3 => (any::<u64>(), 1usize..8).prop_map(|(m, n)| Op::Pass(m, n)),
        2 => (any::<u64>(), 1usize..8).prop_map(|(m, n)| Op::Part(m, n)),
    ]
}

fn amount(v: f64) -> Amount {
    Amount::new("test", v).unwrap()
}

fn differs(s: &mut Shares<()>, id: RequesterId) -> bool {
    let (has, would) = (s.has(id), s.would_get(id));
    (has - would).abs() > 1e-9 * has.max(would).max(1.0)
}

/// The pass: looks at the movers only, in parts of `part`, and checks
/// that no other streaming holder's grant differs from what it would get.
fn pass(
    s: &mut Shares<()>,
    streaming: &[RequesterId],
    (mask, part): (u64, usize),
) -> Result<(), TestCaseError> {
    let mut movers = Vec::new();
    loop {
        let (some, more) = s.take_movers(part);
        prop_assert!(some.len() <= part);
        movers.extend(some);
        if !more {
            break;
        }
    }
    for id in streaming {
        if !movers.contains(id) {
            prop_assert!(!differs(s, *id), "{id:?} differs but was not returned");
        }
    }
    look(s, streaming, &movers, mask);
    Ok(())
}

/// What a pass does with the `movers` it took: pushes to the streaming
/// ones the mask picks, and keeps those it leaves short.
fn look(s: &mut Shares<()>, streaming: &[RequesterId], movers: &[RequesterId], mask: u64) {
    let movers = movers.iter().copied().filter(|id| streaming.contains(id));
    for (i, id) in movers.enumerate() {
        if mask >> (i % 64) & 1 == 1 && differs(s, id) {
            let would = s.would_get(id);
            s.set_has(id, amount(would));
        }
        s.keep_mover(id);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_pass_over_the_movers_misses_no_one(
        start in kind(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut s: Shares<()> = Shares::new(start, amount(300.0));
        let mut live: Vec<RequesterId> = Vec::new();
        let mut streaming: Vec<RequesterId> = Vec::new();
        for op in ops {
            let pick = |i: usize| (!live.is_empty()).then(|| live[i % live.len()]);
            match op {
                Op::Arrive(p, sc, w) => live.push(s.insert(&[Demand::new(p, sc, w).unwrap()], ())),
                Op::Leave(i) => if let Some(id) = pick(i) {
                    s.remove(id);
                    live.retain(|x| *x != id);
                    streaming.retain(|x| *x != id);
                },
                Op::Demand(i, p, sc, w) => if let Some(id) = pick(i) {
                    s.set_demands(id, &[Demand::new(p, sc, w).unwrap()]);
                },
                Op::Decide(i, opens) => if let Some(id) = pick(i) {
                    s.decide(id);
                    if opens && !streaming.contains(&id) {
                        streaming.push(id);
                    }
                },
                Op::Report(i, o) => if let Some(id) = pick(i) {
                    s.set_outstanding(id, Some(amount(o)));
                },
                Op::Capacity(c) => s.set_capacity(amount(c)),
                Op::Kind(k) => s.set_kind(k),
                Op::Pass(mask, part) => pass(&mut s, &streaming, (mask, part))?,
                Op::Part(mask, part) => {
                    let (some, _) = s.take_movers(part);
                    look(&mut s, &streaming, &some, mask);
                }
            }
        }
        pass(&mut s, &streaming, (0, 3))?;
    }
}
