//! Property test of `Shares::take_movers`: under any sequence of
//! arrivals, departures, demand changes, decisions, reports, capacity and
//! algorithm changes, a pass that looks only at the requesters it returns
//! (and keeps the streaming ones it leaves short of their target, as the
//! server's push pass does) misses no streaming holder whose grant differs
//! from what it would get. A holder starts streaming with a request (a
//! decision), as on a lease stream.

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
    /// (the rest are held back).
    Pass(u64),
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
        3 => any::<u64>().prop_map(Op::Pass),
    ]
}

fn amount(v: f64) -> Amount {
    Amount::new("test", v).unwrap()
}

fn differs(s: &mut Shares<()>, id: RequesterId) -> bool {
    let (has, would) = (s.has(id), s.would_get(id));
    (has - would).abs() > 1e-9 * has.max(would).max(1.0)
}

/// The pass: looks at the movers only, and checks that no other
/// streaming holder's grant differs from what it would get.
fn pass(s: &mut Shares<()>, streaming: &[RequesterId], mask: u64) -> Result<(), TestCaseError> {
    let movers = s.take_movers();
    for id in streaming {
        if !movers.contains(id) {
            prop_assert!(!differs(s, *id), "{id:?} differs but was not returned");
        }
    }
    let movers = movers.into_iter().filter(|id| streaming.contains(id));
    for (i, id) in movers.enumerate() {
        if mask >> (i % 64) & 1 == 1 && differs(s, id) {
            let would = s.would_get(id);
            s.set_has(id, amount(would));
        }
        s.keep_mover(id);
    }
    Ok(())
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
                Op::Pass(mask) => pass(&mut s, &streaming, mask)?,
            }
        }
        pass(&mut s, &streaming, 0)?;
    }
}
