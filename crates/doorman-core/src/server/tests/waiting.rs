//! A client granted less than it is owed because others still hold the
//! capacity is told to come back sooner.

use super::*;

#[test]
fn a_waiting_client_refreshes_after_a_quarter_interval() {
    let mut c = core_with(0);
    let g = get(&mut c, t(1), "a", ask("nolearn", 100.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (100.0, 8));
    // b is owed 50, all 100 are still a's: it waits, and comes back in 2 s.
    let g = get(&mut c, t(2), "b", ask("nolearn", 100.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (0.0, 2));
    let g = get(&mut c, t(3), "a", ask("nolearn", 100.0, Some(100.0)));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 8));
    let g = get(&mut c, t(4), "b", ask("nolearn", 100.0, Some(0.0)));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 8));
    // A client that wants less than its share is not waiting.
    let g = get(&mut c, t(5), "c", ask("nolearn", 0.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (0.0, 8));
}
