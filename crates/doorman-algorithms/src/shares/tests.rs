//! Unit tests of every rule of `Shares`, including the worked examples of
//! the algorithms issue (also in docs/algorithms.md).

use super::*;

fn amt(x: f64) -> Amount {
    Amount::new("test", x).unwrap()
}

fn client(wants: f64) -> Demand {
    Demand::new(0, 1, wants).unwrap()
}

/// Inserts one single-band requester per (priority, subclients, wants).
fn setup(kind: Kind, cap: f64, demands: &[(i64, i64, f64)]) -> (Shares<()>, Vec<RequesterId>) {
    let mut s = Shares::new(kind, amt(cap));
    let ids = demands
        .iter()
        .map(|&(p, sc, w)| s.insert(&[Demand::new(p, sc, w).unwrap()], ()))
        .collect();
    (s, ids)
}

/// Everyone refreshes `rounds` times, in order.
fn rounds(s: &mut Shares<()>, ids: &[RequesterId], rounds: usize) -> Vec<f64> {
    for _ in 0..rounds {
        for id in ids {
            s.decide(*id);
        }
    }
    ids.iter().map(|id| s.has(*id)).collect()
}

fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "got {got:?}, want {want:?}");
    }
}

fn steady(kind: Kind, cap: f64, wants: &[f64]) -> Vec<f64> {
    let d: Vec<_> = wants.iter().map(|w| (0, 1, *w)).collect();
    let (mut s, ids) = setup(kind, cap, &d);
    rounds(&mut s, &ids, 3)
}

#[test]
fn worked_example_120_three_clients() {
    assert_close(
        &steady(Kind::FairShare, 120.0, &[1000.0, 50.0, 10.0]),
        &[60.0, 50.0, 10.0],
    );
    assert_close(
        &steady(Kind::ProportionalShare, 120.0, &[1000.0, 50.0, 10.0]),
        &[69.690722, 40.309278, 10.0],
    );
}

#[test]
fn worked_example_100_four_clients() {
    assert_close(
        &steady(Kind::FairShare, 100.0, &[10.0, 25.0, 40.0, 100.0]),
        &[10.0, 25.0, 32.5, 32.5],
    );
    assert_close(
        &steady(Kind::ProportionalShare, 100.0, &[10.0, 25.0, 40.0, 100.0]),
        &[10.0, 25.0, 27.5, 37.5],
    );
}

#[test]
fn worked_example_fair_with_zero_wants() {
    assert_close(
        &steady(Kind::FairShare, 100.0, &[0.0, 24.0, 25.2, 100.0, 100.0]),
        &[0.0, 24.0, 25.2, 25.4, 25.4],
    );
}

#[test]
fn worked_example_subclient_weights() {
    let (mut s, ids) = setup(
        Kind::FairShare,
        120.0,
        &[(0, 6, 1000.0), (0, 4, 500.0), (0, 2, 200.0)],
    );
    assert_close(&rounds(&mut s, &ids, 3), &[60.0, 40.0, 20.0]);
}

/// Requesters arrive one by one, each deciding as it arrives.
fn arrive(kind: Kind, cap: f64, wants: &[f64]) -> (Shares<()>, Vec<RequesterId>, Vec<f64>) {
    let mut s = Shares::new(kind, amt(cap));
    let mut ids = vec![];
    let mut got = vec![];
    for w in wants {
        let id = s.insert(&[client(*w)], ());
        got.push(s.decide(id));
        ids.push(id);
    }
    (s, ids, got)
}

#[test]
fn worked_example_first_round_waits_for_leased_capacity() {
    let (mut s, ids, first) = arrive(Kind::ProportionalShare, 120.0, &[60.0, 75.0, 10.0]);
    assert_close(&first, &[60.0, 60.0, 0.0]);
    // Steady state: e = 40, under = {10} leaves 30, shared 20:35.
    let got = rounds(&mut s, &ids, 3);
    assert_close(
        &got,
        &[40.0 + 20.0 * 30.0 / 55.0, 40.0 + 35.0 * 30.0 / 55.0, 10.0],
    );
}

#[test]
fn under_capacity_everyone_gets_wants() {
    for kind in [Kind::FairShare, Kind::ProportionalShare] {
        assert_close(
            &steady(kind, 500.0, &[100.0, 50.0, 0.0]),
            &[100.0, 50.0, 0.0],
        );
    }
}

#[test]
fn zero_capacity_grants_nothing() {
    for kind in [Kind::FairShare, Kind::ProportionalShare] {
        assert_close(&steady(kind, 0.0, &[10.0, 20.0]), &[0.0, 0.0]);
    }
}

#[test]
fn static_caps_per_subclient_and_ignores_total() {
    let (mut s, ids) = setup(
        Kind::Static,
        10.0,
        &[(0, 1, 5.0), (0, 1, 50.0), (0, 3, 50.0)],
    );
    assert_close(&rounds(&mut s, &ids, 1), &[5.0, 10.0, 30.0]);
}

#[test]
fn no_algorithm_grants_wants_beyond_capacity() {
    assert_close(
        &steady(Kind::NoAlgorithm, 10.0, &[100.0, 200.0]),
        &[100.0, 200.0],
    );
}

#[test]
fn bands_are_served_strictly_from_the_top() {
    for kind in [Kind::FairShare, Kind::ProportionalShare] {
        // Band 10 wants 70 of 100; band 5 shares the remaining 30; band 0 gets nothing.
        let (mut s, ids) = setup(
            kind,
            100.0,
            &[
                (10, 1, 40.0),
                (10, 1, 30.0),
                (5, 1, 50.0),
                (5, 1, 50.0),
                (0, 1, 10.0),
            ],
        );
        assert_close(&rounds(&mut s, &ids, 3), &[40.0, 30.0, 15.0, 15.0, 0.0]);
        let bands = s.bands();
        assert_eq!(
            bands.iter().map(|b| b.priority).collect::<Vec<_>>(),
            [10, 5, 0]
        );
        assert_close(
            &bands.iter().map(|b| b.allotted).collect::<Vec<_>>(),
            &[70.0, 30.0, 0.0],
        );
    }
}

#[test]
fn a_server_with_several_bands_gets_the_sum() {
    let mut s = Shares::new(Kind::FairShare, amt(100.0));
    let server = s.insert(
        &[
            Demand::new(10, 2, 40.0).unwrap(),
            Demand::new(0, 3, 300.0).unwrap(),
        ],
        (),
    );
    let other = s.insert(&[Demand::new(0, 1, 100.0).unwrap()], ());
    // Band 10: 40 to the server. Band 0 shares 60 over 4 subclients: 45 + 15.
    assert_close(&rounds(&mut s, &[server, other], 3), &[85.0, 15.0]);
    assert_eq!(s.wants(server), 340.0);
    assert_eq!(s.demands(server), vec![(10, 2.0, 40.0), (0, 3.0, 300.0)]);
}

#[test]
fn same_band_twice_is_merged() {
    let mut s = Shares::new(Kind::FairShare, amt(100.0));
    let id = s.insert(&[client(10.0), client(15.0)], ());
    assert_eq!(s.demands(id), vec![(0, 2.0, 25.0)]);
}

#[test]
fn a_leaving_requester_frees_its_share() {
    let (mut s, ids) = setup(Kind::FairShare, 90.0, &[(0, 1, 100.0); 3]);
    assert_close(&rounds(&mut s, &ids, 2), &[30.0, 30.0, 30.0]);
    s.remove(ids[2]);
    assert_eq!(s.len(), 2);
    assert_close(&rounds(&mut s, &ids[..2], 2), &[45.0, 45.0]);
    assert!(s.remove(ids[2]).is_none(), "double remove is a no-op");
    assert_eq!(s.has(ids[2]), 0.0);
}

#[test]
fn wants_change_is_seen_at_once() {
    let (mut s, ids) = setup(Kind::FairShare, 100.0, &[(0, 1, 100.0), (0, 1, 100.0)]);
    assert_close(&rounds(&mut s, &ids, 2), &[50.0, 50.0]);
    s.set_demands(ids[1], &[client(10.0)]);
    assert_eq!(s.target(ids[0]), 90.0);
    assert_close(&rounds(&mut s, &ids, 2), &[90.0, 10.0]);
    // Moving to another band re-places the demand.
    s.set_demands(ids[1], &[Demand::new(7, 1, 100.0).unwrap()]);
    assert_eq!(s.target(ids[1]), 100.0);
    assert_eq!(s.target(ids[0]), 0.0);
}

#[test]
fn never_hands_out_capacity_leased_to_others() {
    let (mut s, ids, first) = arrive(Kind::FairShare, 100.0, &[100.0, 100.0]);
    // The second client's target is 50, but nothing is free until the first shrinks.
    assert_eq!(first, vec![100.0, 0.0]);
    assert_eq!(s.target(ids[1]), 50.0);
    assert_eq!(s.decide(ids[0]), 50.0);
    assert_eq!(s.decide(ids[1]), 50.0);
}

#[test]
fn capacity_drop_shrinks_grants_without_overcommitting() {
    let (mut s, ids) = setup(Kind::FairShare, 100.0, &[(0, 1, 100.0), (0, 1, 100.0)]);
    rounds(&mut s, &ids, 2);
    s.set_capacity(amt(40.0));
    // The first to refresh sees 50 leased to the other, so nothing is
    // free, but shrinking to its new share (20) from the 50 it holds
    // raises nothing: it is not squeezed to 0 while the other catches up.
    assert_eq!(s.decide(ids[0]), 20.0);
    assert_eq!(s.totals().has, 70.0, "less than the 100 before");
    assert_eq!(s.decide(ids[1]), 20.0);
    assert_eq!(s.totals().has, 40.0);
    assert_close(&rounds(&mut s, &ids, 2), &[20.0, 20.0]);
    // What it holds is kept only up to its target: a grower waits for
    // what is free.
    s.set_demands(ids[0], &[Demand::new(0, 1, 5.0).unwrap()]);
    assert_eq!(s.target(ids[1]), 35.0);
    assert_eq!(s.decide(ids[1]), 20.0, "40 less the 20 the other holds");
    assert_eq!(s.decide(ids[0]), 5.0);
    assert_eq!(s.decide(ids[1]), 35.0);
}

#[test]
fn learning_within_a_bound_echoes_claims_and_grows_towards_targets() {
    let mut s = Shares::new(Kind::FairShare, amt(100.0));
    let a = s.insert(&[client(80.0)], ());
    let b = s.insert(&[client(10.0)], ());
    // a claims 20 and is owed 80 (its target within its wants); only 60
    // may be handed out in all.
    assert_eq!(s.decide_learning_grow(a, amt(20.0), 60.0), 60.0);
    // b claims 30 but wants 10: its claim is echoed, within the bound.
    assert_eq!(s.decide_learning_grow(b, amt(30.0), 60.0), 0.0);
    assert_eq!(s.decide_learning_grow(b, amt(30.0), 90.0), 30.0);
    assert_eq!(s.totals().has, 90.0);
}

#[test]
fn learning_mode_echoes_claims_within_what_is_free() {
    let mut s = Shares::new(Kind::FairShare, amt(100.0));
    let a = s.insert(&[client(80.0)], ());
    let b = s.insert(&[client(80.0)], ());
    let c = s.insert(&[client(80.0)], ());
    assert_eq!(s.decide_learning(a, amt(70.0)), 70.0);
    assert_eq!(s.decide_learning(b, Amount::ZERO), 0.0);
    assert_eq!(
        s.decide_learning(c, amt(500.0)),
        30.0,
        "only what a leaves free"
    );
    assert_eq!(s.totals().has, 100.0);
}

#[test]
fn learning_within_capacity_never_sums_above_it() {
    let mut s = Shares::new(Kind::FairShare, amt(100.0));
    let a = s.insert(&[client(80.0)], ());
    let b = s.insert(&[client(80.0)], ());
    assert_eq!(s.decide_learning_within(a, amt(70.0)), 70.0);
    assert_eq!(s.decide_learning_within(b, amt(70.0)), 30.0, "only 30 left");
    assert_eq!(s.totals().has, 100.0);
    assert_eq!(
        s.decide_learning_within(a, amt(40.0)),
        40.0,
        "a claim can shrink"
    );
}

#[test]
fn safe_capacity_configured_or_per_subclient() {
    let (s, _) = setup(Kind::FairShare, 120.0, &[(0, 1, 1.0), (0, 3, 1.0)]);
    assert_eq!(s.safe_capacity(Some(7.0)), 7.0);
    assert_eq!(s.safe_capacity(None), 30.0);
    let empty: Shares<()> = Shares::new(Kind::FairShare, amt(120.0));
    assert_eq!(empty.safe_capacity(None), 120.0);
}

#[test]
fn totals_and_data() {
    let mut s: Shares<&str> = Shares::new(Kind::ProportionalShare, amt(10.0));
    let a = s.insert(&[client(4.0)], "a");
    let b = s.insert(&[Demand::new(1, 2, 6.0).unwrap()], "b");
    s.decide(a);
    s.decide(b);
    let t = s.totals();
    assert_eq!(
        (t.wants, t.has, t.subclients, t.requesters),
        (10.0, 10.0, 3.0, 2)
    );
    assert_eq!(s.get(a), Some(&"a"));
    *s.get_mut(b).unwrap() = "bee";
    assert_eq!(s.remove(b), Some("bee"));
    assert_eq!(s.ids().collect::<Vec<_>>(), vec![a]);
    // Slots are reused.
    let c = s.insert(&[client(1.0)], "c");
    assert_eq!(c.index(), b.index());
    assert_eq!(s.has(c), 0.0);
}

#[test]
fn kind_change_applies_at_next_decision() {
    let (mut s, ids) = setup(Kind::NoAlgorithm, 10.0, &[(0, 1, 100.0)]);
    assert_eq!(s.decide(ids[0]), 100.0);
    s.set_kind(Kind::FairShare);
    assert_eq!(s.target(ids[0]), 10.0);
    assert_eq!(s.decide(ids[0]), 10.0);
}

#[test]
fn learning_honours_claims_first_come_within_capacity() {
    let mut s = Shares::new(Kind::FairShare, Amount::new("c", 100.0).unwrap());
    let d = |w| [Demand::new(0, 1, w).unwrap()];
    let (a, b, c) = (
        s.insert(&d(10.0), ()),
        s.insert(&d(10.0), ()),
        s.insert(&d(10.0), ()),
    );
    let claim = |x| Amount::new("has", x).unwrap();
    assert_eq!(
        s.decide_learning(a, claim(450.0)),
        100.0,
        "never above capacity"
    );
    assert_eq!(s.decide_learning(b, claim(50.0)), 0.0, "nothing left");
    assert_eq!(s.decide_learning(a, claim(60.0)), 60.0, "a claims less now");
    assert_eq!(s.decide_learning(b, claim(50.0)), 40.0);
    assert_eq!(s.decide_learning(c, claim(5.0)), 0.0);
    assert!(s.totals().has <= 100.0);
    // STATIC: per requester, capacity × subclients.
    let mut st = Shares::new(Kind::Static, Amount::new("c", 10.0).unwrap());
    let x = st.insert(&[Demand::new(0, 3, 5.0).unwrap()], ());
    assert_eq!(st.decide_learning(x, claim(450.0)), 30.0);
}

#[test]
fn a_requesters_outstanding_beyond_its_grant_counts_as_taken() {
    let (mut s, ids) = setup(Kind::FairShare, 100.0, &[(0, 1, 100.0), (0, 1, 100.0)]);
    s.set_has(ids[0], amt(100.0));
    // ids[0] still has 100 handed out below it; its share shrinks to 50.
    s.set_outstanding(ids[0], Some(amt(100.0)));
    assert_eq!(s.decide(ids[0]), 50.0);
    assert_eq!(s.decide(ids[1]), 0.0, "its 100 are still out");
    assert_eq!(s.totals().taken, 100.0);
    assert_eq!(s.totals().has, 50.0);
    s.set_outstanding(ids[0], Some(amt(70.0)));
    assert_eq!(s.decide(ids[1]), 30.0);
    // A report never raises what a requester counts as taking.
    s.set_outstanding(ids[0], Some(amt(1e9)));
    assert_eq!(s.outstanding(ids[0]), 70.0);
    s.set_outstanding(ids[0], None);
    assert_eq!(s.decide(ids[1]), 50.0);
    s.remove(ids[0]);
    assert_eq!(s.totals().taken, 50.0, "a removed requester takes nothing");
}

/// The generation moves with what someone would get, and only then: a
/// renewal that changes nothing leaves it (a pushing server skips the
/// resource), a new demand, grant or requester moves it.
#[test]
fn the_generation_moves_only_when_a_grant_may_move() {
    let mut s: Shares<()> = Shares::new(Kind::FairShare, amt(100.0));
    let a = s.insert(&[client(60.0)], ());
    s.decide(a);
    let g = s.generation();
    s.set_demands(a, &[client(60.0)]);
    s.decide(a);
    assert_eq!(s.generation(), g, "a renewal as it was");
    s.set_demands(a, &[client(70.0)]);
    assert_ne!(s.generation(), g, "a new demand");
    let g = s.generation();
    s.decide(a);
    assert_ne!(s.generation(), g, "a new grant");
    let g = s.generation();
    s.insert(&[client(10.0)], ());
    assert_ne!(s.generation(), g, "a newcomer");
}
