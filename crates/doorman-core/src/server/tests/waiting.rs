//! A requester granted less than it is owed because others still hold the
//! capacity is told to come back sooner: a client by a shorter lease
//! interval, a downstream server beside its lease (its lease's interval
//! sets its own requesters').

use super::*;
use crate::server::UpstreamGrant;

#[test]
fn a_waiting_client_refreshes_after_a_quarter_interval() {
    let mut c = core_with(0);
    let g = get(&mut c, t(1), "a", ask("nolearn", 100.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (100.0, 8));
    // b is owed 50, all 100 are still a's: it waits, and comes back in 2 s.
    let g = get(&mut c, t(2), "b", ask("nolearn", 100.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (0.0, 2));
    // a is lowered to 50 and told to come back at the minimum interval
    // (1 s) to show it got it (lowered.rs); until then its 100 counts.
    let g = get(&mut c, t(3), "a", ask("nolearn", 100.0, Some(100.0)));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 1));
    let g = get(&mut c, t(3), "b", ask("nolearn", 100.0, Some(0.0)));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (0.0, 2));
    let g = get(&mut c, t(4), "a", ask("nolearn", 100.0, Some(50.0)));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 8));
    let g = get(&mut c, t(4), "b", ask("nolearn", 100.0, Some(0.0)));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 8));
    // A client that wants less than its share is not waiting.
    let g = get(&mut c, t(5), "c", ask("nolearn", 0.0, None));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (0.0, 8));
}

/// GetServerCapacity from node `id` (5 clients) for "nolearn".
fn node(id: &str, wants: f64, has: Option<f64>) -> CapacityRequest {
    CapacityRequest {
        who: Who::Server(Arc::from(id)),
        resources: vec![ResourceAsk {
            demands: vec![Demand::new(0, 5, wants).unwrap()],
            outstanding: Some(Amount::ZERO),
            ..ask("nolearn", wants, has)
        }],
    }
}

#[test]
fn a_waiting_server_is_told_to_come_back_sooner_beside_an_unchanged_lease() {
    let mut c = core_with(0);
    let g = c
        .get_capacity(t(1), &node("a", 100.0, None))
        .unwrap()
        .remove(0);
    assert_eq!((g.lease.capacity, g.next_refresh_interval), (100.0, None));
    // b is owed 50 that a still holds: it waits. Its lease keeps the
    // interval it hands out below it (8 s); the sooner refresh is beside.
    let g = c
        .get_capacity(t(2), &node("b", 100.0, None))
        .unwrap()
        .remove(0);
    assert_eq!(g.lease.capacity, 0.0);
    assert_eq!(
        (g.lease.refresh_interval, g.next_refresh_interval),
        (8, Some(2))
    );
    // A client's own interval is shortened instead (it hands out nothing).
    let g = get(&mut c, t(3), "c", ask("nolearn", 100.0, None));
    assert_eq!(
        (g.lease.refresh_interval, g.next_refresh_interval),
        (2, None)
    );
}

#[test]
fn an_intermediate_asks_sooner_but_hands_out_its_usual_intervals() {
    use super::intermediate::{leaf, parent_grant};
    let mut c = leaf(None);
    let ids = vec!["r".to_string()];
    get(&mut c, t(1), "a", ask("r", 10.0, None));
    c.upstream_request(t(1)).unwrap();
    let grant = UpstreamGrant {
        next_refresh_interval: Some(2),
        ..parent_grant(50.0, 61, 16, 0)
    };
    c.upstream_response(t(1), &ids, &[grant]);
    assert_eq!(c.next_upstream_wakeup(), Some(t(3)), "in 2 s, not 16");
    let g = get(&mut c, t(2), "a", ask("r", 10.0, None));
    assert_eq!(g.lease.refresh_interval, 8, "16 × decay, not 2 × decay");
    // Without the hint it asks at its lease's interval.
    c.upstream_request(t(3)).unwrap();
    c.upstream_response(t(3), &ids, &[parent_grant(50.0, 63, 16, 0)]);
    assert_eq!(c.next_upstream_wakeup(), Some(t(19)));
}
