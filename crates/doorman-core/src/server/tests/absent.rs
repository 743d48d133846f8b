//! A requester that misses its refresh by a whole interval counts as
//! wanting no more than it holds (`absent.rs`), here and in what this
//! server asks its parent for, until it asks again.

use super::intermediate::{leaf_granted, parent_grant};
use super::*;

/// Σ wants of the one resource in this intermediate's next upstream ask.
fn wants_upstream(c: &mut ServerCore, now: i64) -> f64 {
    let asks = c.upstream_asks(t(now));
    asks[0].bands.iter().map(|b| b.2).sum()
}

#[test]
fn an_absent_requester_stops_asking_the_parent_for_more_than_it_holds() {
    let mut c = leaf_granted(150.0, parent_grant(100.0, 200, 8, 0));
    let g = get(&mut c, t(2), "a", ask("r", 150.0, Some(0.0)));
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
        get(&mut c, t(now), "a", ask("r", 150.0, Some(100.0)));
        c.cleanup(t(now + 1));
        assert_eq!(wants_upstream(&mut c, now + 1), 150.0, "at {}", now + 1);
    }
    // Its last refresh was due at 18; by 22 it has missed it by an interval.
    c.cleanup(t(21));
    assert_eq!(wants_upstream(&mut c, 21), 150.0);
    c.cleanup(t(22));
    assert_eq!(wants_upstream(&mut c, 22), 100.0, "capped at its 100");
}
