//! Claims on an intermediate server before its parent's first answer
//! (after a restart or failover): a claimed `has` is honoured only within
//! a capacity the server knows, so a liar cannot take more than the
//! resource could ever grant, and Σ of honoured claims stays within it.

use super::intermediate::{leaf, parent_grant};
use super::*;

fn claims(c: &mut ServerCore, now: Time, who: &str, has: f64) -> Option<Grant> {
    answers(c, now, who, ask("r", 500.0, Some(has))).pop()
}

#[test]
fn without_a_local_template_claims_wait_for_the_parent() {
    let mut c = leaf(None);
    assert_eq!(claims(&mut c, t(1), "liar", 450.0), None, "left unanswered");
    assert_eq!(claims(&mut c, t(1), "honest", 40.0), None);
    let ids = vec!["r".to_string()];
    c.upstream_request(t(13)).unwrap();
    c.upstream_response(t(13), &ids, &[parent_grant(100.0, 70, 8, 30)]);
    // Learning within the parent's grant: first come, first served.
    let honest = claims(&mut c, t(14), "honest", 40.0).unwrap();
    let liar = claims(&mut c, t(14), "liar", 450.0).unwrap();
    assert_eq!(honest.lease.capacity, 40.0);
    assert_eq!(liar.lease.capacity, 60.0, "only what the honest leave free");
    assert_eq!(honest.decision, Decision::Learning);
}

#[test]
fn a_local_template_bounds_claims_and_their_sum() {
    let local = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\n[resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 8\nlearning_mode_duration = 60\n";
    let mut c = leaf(Some(local));
    let liar = claims(&mut c, t(1), "liar", 450.0).unwrap();
    assert_eq!(
        (liar.lease.capacity, liar.decision),
        (100.0, Decision::Learning),
        "no claim above the local capacity"
    );
    let honest = claims(&mut c, t(1), "honest", 40.0).unwrap();
    assert_eq!(honest.lease.capacity, 0.0, "Σ of honoured claims ≤ 100");
    // A liar that lowers its claim frees the difference.
    assert_eq!(
        claims(&mut c, t(2), "liar", 30.0).unwrap().lease.capacity,
        30.0
    );
    let honest = claims(&mut c, t(2), "honest", 40.0).unwrap();
    assert_eq!(honest.lease.capacity, 40.0);
}

/// Without a valid lease from the parent a leaf's capacity is 0 and what
/// it hands out ends at once (it lasted until the end of learning mode,
/// 26–31 s on real processes); an echoed claim lasts no longer than the
/// lease claimed (the predecessor's, which its parent counts only that
/// long) nor than learning mode.
#[test]
fn without_a_lease_from_the_parent_leases_end_at_once_and_echoes_with_their_claim() {
    let mut c = leaf(None);
    let g = get(&mut c, t(1), "newcomer", ask("r", 10.0, None));
    assert_eq!((g.lease.capacity, g.lease.expiry), (0.0, t(1)));
    let local = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\n[resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 8\nlearning_mode_duration = 60\n";
    let mut c = leaf(Some(local));
    let mut a = ask("r", 50.0, None);
    a.claim = Some(claim(40.0, t(9)));
    let g = get(&mut c, t(1), "holder", a);
    assert_eq!((g.lease.capacity, g.lease.expiry), (40.0, t(9)));
    let g = get(&mut c, t(1), "newcomer", ask("r", 10.0, None));
    assert_eq!((g.lease.capacity, g.lease.expiry), (0.0, t(1)));
}

/// A requester whose lease of 0 ended at once is forgotten by the next
/// cleanup, but the resource keeps the parent's lease it got meanwhile:
/// the requester's next request is decided from it (cleanup dropped the
/// resource with its parent's lease, and each request began waiting for
/// the parent again, for ever under a one-second refresh).
#[test]
fn a_resource_keeps_its_parents_lease_when_its_requesters_are_gone() {
    let mut c = leaf(None);
    let g = get(&mut c, t(1), "a", ask("r", 10.0, None));
    assert_eq!((g.lease.capacity, g.lease.expiry), (0.0, t(1)));
    c.upstream_request(t(1)).unwrap();
    c.upstream_response(t(1), &["r".to_string()], &[parent_grant(100.0, 21, 2, 0)]);
    c.cleanup(t(2));
    assert_eq!(c.lease_count(), 0, "the requester is forgotten");
    assert_eq!(c.resource_count(), 1, "the resource and its lease stay");
    let g = get(&mut c, t(2), "a", ask("r", 10.0, None));
    assert_eq!((g.lease.capacity, g.decision), (10.0, Decision::Algorithm));
    c.cleanup(t(22));
    assert_eq!(
        c.resource_count(),
        0,
        "dropped once the parent's lease ended"
    );
}
