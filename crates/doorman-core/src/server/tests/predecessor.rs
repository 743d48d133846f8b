//! A newly elected intermediate master learns what its predecessors can
//! still have handed out (`predecessor_out`, from its parent) and hands
//! out what the parent granted beyond that while it learns, never what an
//! unanswered claimant still holds.

use super::intermediate::{leaf, parent_grant};
use super::*;

/// GetServerCapacity from the node `id` for "nolearn" (no learning mode).
fn node(id: &str, wants: f64, has: Option<f64>) -> CapacityRequest {
    CapacityRequest {
        who: Who::Server(Arc::from(id)),
        resources: vec![ResourceAsk {
            demands: vec![Demand::new(0, 5, wants).unwrap()],
            outstanding: Some(Amount::new("o", has.unwrap_or(0.0)).unwrap()),
            ..ask("nolearn", wants, has)
        }],
    }
}

#[test]
fn a_parent_tells_a_node_asking_without_a_claim_what_it_counts_as_taken() {
    let mut c = core_with(0);
    let first = |c: &mut ServerCore, now, req| c.get_capacity(t(now), &req).unwrap().remove(0);
    let g = first(&mut c, 1, node("a", 60.0, None));
    assert_eq!(
        (g.lease.capacity, g.predecessor_out),
        (60.0, Some(0.0)),
        "a new node"
    );
    let g = first(&mut c, 2, node("a", 60.0, Some(60.0)));
    assert_eq!(g.predecessor_out, None, "it claims its lease");
    // A new master of a (same node id) asks without a claim.
    let g = first(&mut c, 3, node("a", 10.0, None));
    assert_eq!(g.predecessor_out, Some(60.0));
    assert_eq!(g.lease.capacity, 60.0, "it inherits the lease");
    // A parent that is learning itself does not know: it says nothing.
    let mut learning = core_with(0);
    let fair = CapacityRequest {
        who: Who::Server(Arc::from("a")),
        resources: vec![ResourceAsk {
            outstanding: Some(Amount::ZERO),
            ..ask("fair", 10.0, None)
        }],
    };
    let g = learning.get_capacity(t(1), &fair).unwrap().remove(0);
    assert_eq!((g.decision, g.predecessor_out), (Decision::Learning, None));
}

/// A client claiming `has` (a lease from the previous master), ending at
/// t=90, refreshed every 4 s.
fn claim(wants: f64, has: f64) -> ResourceAsk {
    ResourceAsk {
        claim: Some(super::claim(has, t(90))),
        ..ask("r", wants, None)
    }
}

/// A leaf elected at t=0 whose parent grants 100 for 100 s, learning 60 s,
/// and says its predecessors can still have `p` out.
fn leaf_told(p: Option<f64>) -> ServerCore {
    let mut c = leaf(None);
    get(&mut c, t(1), "z", ask("r", 0.0, None));
    let grant = UpstreamGrant {
        predecessor_out: p,
        ..parent_grant(100.0, 100, 8, 60)
    };
    c.upstream_request(t(1)).unwrap();
    c.upstream_response(t(1), &["r".to_string()], &[grant]);
    c
}

#[test]
fn a_learning_master_hands_out_what_its_parent_granted_beyond_its_predecessors() {
    // The predecessors had 60 out; the parent grants 100: 40 are new.
    let mut c = leaf_told(Some(60.0));
    let g = get(&mut c, t(2), "a", claim(50.0, 20.0));
    assert_eq!(g.decision, Decision::Learning);
    assert_eq!(
        g.lease.capacity, 50.0,
        "its claim of 20 and 30 of the 40 new"
    );
    // b claims 30: the 40 new less what a took, plus its own claim.
    let g = get(&mut c, t(3), "b", claim(60.0, 30.0));
    assert_eq!(g.lease.capacity, 40.0);
    // Σ 90; what has not come back of the 60 (10) may still be out.
    let g = get(&mut c, t(4), "c", ask("r", 30.0, None));
    assert_eq!(g.lease.capacity, 0.0);
    // Without the parent's word, claims are only echoed.
    let mut c = leaf_told(None);
    assert_eq!(
        get(&mut c, t(2), "a", claim(50.0, 20.0)).lease.capacity,
        20.0
    );
}

#[test]
fn a_new_master_reports_its_predecessors_unclaimed_sub_leases_as_out() {
    // The predecessors had 60 out; a comes back claiming 20 of it.
    let mut c = leaf_told(Some(60.0));
    get(&mut c, t(2), "a", claim(50.0, 20.0));
    // Out below this node: a's 50 from this master, and up to 40 of the
    // predecessors' that nobody has brought back yet. The parent counts
    // both (reporting only the 50, it handed the 40 to this node's
    // siblings while the predecessors' clients still held it).
    let asks = c.upstream_request(t(9)).unwrap();
    assert_eq!(asks[0].outstanding, 90.0);
    get(&mut c, t(10), "b", claim(60.0, 30.0));
    let asks = c.upstream_request(t(17)).unwrap();
    assert_eq!(asks[0].outstanding, 100.0, "b's 40 and 10 still unclaimed");
}

#[test]
fn a_claim_left_unanswered_is_still_held_and_does_not_count() {
    let mut c = leaf(None);
    // Before the parent's first answer a and b claim leases of the
    // previous master: the claims are left unanswered (they keep them).
    assert!(answers(&mut c, t(1), "a", claim(50.0, 20.0)).is_empty());
    assert!(answers(&mut c, t(2), "b", claim(60.0, 30.0)).is_empty());
    // The predecessors had all 100 out: a third holder (50) never asks.
    let grant = UpstreamGrant {
        predecessor_out: Some(100.0),
        ..parent_grant(100.0, 100, 8, 60)
    };
    c.upstream_request(t(13)).unwrap();
    c.upstream_response(t(13), &["r".to_string()], &[grant]);
    // a is answered first: b still holds its 30, the third its 50.
    let g = get(&mut c, t(14), "a", claim(50.0, 20.0));
    assert_eq!(g.lease.capacity, 20.0, "only its own claim");
    let g = get(&mut c, t(15), "b", claim(60.0, 30.0));
    assert_eq!(g.lease.capacity, 30.0);
}

#[test]
fn a_claim_echoed_under_a_local_template_counts_like_any_answered_claim() {
    let local = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\n\
                 [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\n\
                 refresh_interval = 8\nlearning_mode_duration = 60\n";
    let mut c = leaf(Some(local));
    // Before the parent answers, y's claim is echoed within the local
    // template: y now holds this master's lease.
    assert_eq!(
        get(&mut c, t(1), "y", claim(50.0, 50.0)).lease.capacity,
        50.0
    );
    // The parent grants 100; the predecessors had 50 out (y's).
    let grant = UpstreamGrant {
        predecessor_out: Some(50.0),
        ..parent_grant(100.0, 100, 8, 60)
    };
    c.upstream_request(t(13)).unwrap();
    c.upstream_response(t(13), &["r".to_string()], &[grant]);
    // Nothing of the predecessors' is unaccounted for: a newcomer gets
    // the other 50 at once.
    assert_eq!(
        get(&mut c, t(14), "z", ask("r", 50.0, None)).lease.capacity,
        50.0
    );
}

#[test]
fn with_less_than_the_predecessors_had_the_bound_holds_claims_back() {
    // The parent grants 80; the predecessors had 100 out.
    let mut c = leaf_told(Some(100.0));
    c.upstream_response(
        t(1),
        &["r".to_string()],
        &[UpstreamGrant {
            predecessor_out: Some(100.0),
            ..parent_grant(80.0, 100, 8, 60)
        }],
    );
    // x claims 50: up to 50 more of the predecessors' may still be out,
    // so only 30 of the 80 can be x's (plain learning mode would echo 50:
    // 100 in all).
    assert_eq!(
        get(&mut c, t(2), "x", claim(50.0, 50.0)).lease.capacity,
        30.0
    );
    // y brings back the other 50: all is accounted for.
    assert_eq!(
        get(&mut c, t(3), "y", claim(50.0, 50.0)).lease.capacity,
        50.0
    );
}

/// The parent's word holds only until the grants the predecessors'
/// sub-leases came from end: from then on nothing of theirs is out, and a
/// learning master hands out all it holds. A hung master's clients, whose
/// leases ended with its own, got 0 until learning ended (10 s, measured
/// with the fault harness).
#[test]
fn once_the_predecessors_grants_have_ended_a_learning_master_hands_out_everything() {
    let mut c = leaf(None);
    get(&mut c, t(1), "z", ask("r", 0.0, None));
    let grant = UpstreamGrant {
        predecessor_out: Some(100.0),
        predecessor_until: Some(t(6)),
        ..parent_grant(100.0, 100, 8, 60)
    };
    c.upstream_request(t(1)).unwrap();
    c.upstream_response(t(1), &["r".to_string()], &[grant]);
    // Before t=6 the predecessors' 100 may still be out: nothing new.
    let g = get(&mut c, t(5), "a", ask("r", 40.0, None));
    assert_eq!((g.decision, g.lease.capacity), (Decision::Learning, 0.0));
    // After, still learning, but everything is free.
    let g = get(&mut c, t(6), "a", ask("r", 40.0, None));
    assert_eq!((g.decision, g.lease.capacity), (Decision::Learning, 40.0));
}

/// The parent says until when: what it counts as taken by a node lasts as
/// long as the node's latest grant.
#[test]
fn the_word_on_the_predecessors_ends_with_their_latest_grant() {
    let mut c = core_with(0);
    let grant = |c: &mut ServerCore, now, has| {
        c.get_capacity(t(now), &node("n", 30.0, has))
            .unwrap()
            .remove(0)
    };
    let g = grant(&mut c, 1, None);
    assert_eq!(g.predecessor_out, Some(0.0), "a node it does not know");
    let g = grant(&mut c, 2, Some(g.lease.capacity));
    let end = g.lease.expiry;
    // A new master of the node asks without a claim.
    let g = grant(&mut c, 3, None);
    assert_eq!(
        (g.predecessor_out, g.predecessor_until),
        (Some(30.0), Some(end))
    );
}
