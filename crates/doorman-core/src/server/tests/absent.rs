//! A requester that misses its refresh by a whole interval counts as
//! wanting no more than it holds (`absent.rs`), here and in what this
//! server asks its parent for, until it asks again.

use super::intermediate::{leaf_granted, parent_grant};
use super::*;

/// A request of our client library, whose claims say what they have left
/// (an original client's do not: see
/// `an_original_client_refreshing_every_5_s_is_not_absent`).
fn ours(resource: &str, wants: f64, has: f64) -> ResourceAsk {
    let mut a = ask(resource, wants, Some(has));
    if let Some(c) = a.claim.as_mut() {
        c.remaining = Some(Span::secs(3600));
    }
    a
}

/// Σ wants of the one resource in this intermediate's next upstream ask.
fn wants_upstream(c: &mut ServerCore, now: i64) -> f64 {
    let asks = c.with_shard(0, |n, s| s.upstream_asks(n, t(now)));
    asks[0].bands.iter().map(|b| b.2).sum()
}

#[test]
fn an_absent_requester_stops_asking_the_parent_for_more_than_it_holds() {
    let mut c = leaf_granted(150.0, parent_grant(100.0, 200, 8, 0));
    let g = get(&mut c, t(2), "a", ours("r", 150.0, 0.0));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (100.0, 4));
    // Its refresh is due at 6; by 10 it has missed it by a whole interval.
    c.cleanup(t(9));
    assert_eq!(wants_upstream(&mut c, 9), 150.0);
    c.cleanup(t(10));
    assert_eq!(wants_upstream(&mut c, 10), 100.0, "capped at its 100");
    // Its lease still counts: a newcomer gets nothing of it.
    assert_eq!(
        get(&mut c, t(11), "b", ask("r", 50.0, None)).lease.capacity,
        0.0
    );
    // Back, it wants 150 again.
    get(&mut c, t(12), "a", ask("r", 150.0, Some(100.0)));
    assert_eq!(wants_upstream(&mut c, 12), 200.0, "150 for a, 50 for b");
}

#[test]
fn a_requester_that_refreshes_on_time_is_never_absent() {
    let mut c = leaf_granted(150.0, parent_grant(100.0, 200, 8, 0));
    for now in (2..60).step_by(4) {
        get(&mut c, t(now), "a", ask("r", 150.0, Some(100.0)));
        // Just before the next refresh, and again after it.
        for at in [now + 3, now + 5] {
            c.cleanup(t(at));
            assert_eq!(wants_upstream(&mut c, at), 150.0, "at {at}");
        }
    }
}

/// A waiting requester is told to come back sooner; one that comes back
/// at its regular interval instead (a client with a longer minimum of its
/// own) is not absent, and gets its share once it is free.
#[test]
fn a_waiting_requester_that_keeps_its_regular_interval_is_not_absent() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("nolearn", 100.0, None));
    let g = get(&mut c, t(2), "b", ask("nolearn", 100.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (0.0, 2));
    // a's refresh 7 s later still counts b's whole demand: a shrinks to 50.
    c.cleanup(t(9));
    let g = get(&mut c, t(9), "a", ask("nolearn", 100.0, Some(100.0)));
    assert_eq!(g.lease.capacity, 50.0);
    // a shows it got it (lowered.rs).
    get(&mut c, t(10), "a", ask("nolearn", 100.0, Some(50.0)));
    // b comes back 8 s later, not 2: its regular interval.
    let g = get(&mut c, t(10), "b", ask("nolearn", 100.0, Some(0.0)));
    assert_eq!(g.lease.capacity, 50.0);
}

/// A requester's key stays where it was filed while it keeps asking, and
/// is re-filed at its deadline when it comes up: one that stops after a
/// few refreshes is absent at its last deadline, not earlier or later.
#[test]
fn a_requester_that_stops_is_absent_at_its_last_deadline() {
    let mut c = leaf_granted(150.0, parent_grant(100.0, 200, 8, 0));
    for now in [2, 6, 10, 14] {
        get(&mut c, t(now), "a", ours("r", 150.0, 100.0));
        c.cleanup(t(now + 1));
        assert_eq!(wants_upstream(&mut c, now + 1), 150.0, "at {}", now + 1);
    }
    // Its last refresh was due at 18; by 22 it has missed it by an interval.
    c.cleanup(t(21));
    assert_eq!(wants_upstream(&mut c, 21), 150.0);
    c.cleanup(t(22));
    assert_eq!(wants_upstream(&mut c, 22), 100.0, "capped at its 100");
}

/// The original Doorman client asks every 5 s whatever interval it is
/// given. Two of them told to come back every second are not absent
/// between their requests, and share the capacity (each was capped at what
/// it held while the other asked: one kept everything, the other got 0
/// for good; measured with the fault harness).
#[test]
fn an_original_client_refreshing_every_5_s_is_not_absent() {
    let text = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 25\n[resources.algorithm]\n\
                kind = \"FAIR_SHARE\"\nlease_length = 10\nrefresh_interval = 1\n\
                learning_mode_duration = 0\n";
    let cfg = Arc::new(Config::parse(text, "t.toml").unwrap());
    let mut c = ServerCore::new(CoreOptions::default(), cfg);
    c.become_master(t(0));
    let mut held = [0.0, 0.0];
    get(&mut c, t(0), "go-0", ask("r", 30.0, None));
    held[0] = get(&mut c, t(1), "go-0", ask("r", 30.0, None))
        .lease
        .capacity;
    held[1] = get(&mut c, t(3), "go-1", ask("r", 30.0, None))
        .lease
        .capacity;
    assert_eq!(held, [25.0, 0.0], "the first comer holds it all");
    for round in 1..6 {
        let now = 1 + 5 * round;
        for (i, who) in ["go-0", "go-1"].into_iter().enumerate() {
            let at = t(now + 2 * i as i64);
            c.cleanup(at);
            held[i] = get(&mut c, at, who, ask("r", 30.0, Some(held[i])))
                .lease
                .capacity;
        }
    }
    assert_eq!(held, [12.5, 12.5]);
}
