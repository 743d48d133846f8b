//! The lease horizon (`horizon.rs`): a new master learns only as long as
//! its predecessors' leases can last, and no lease outlives the bound a
//! master has recorded.

use super::intermediate::{leaf, parent_grant};
use super::*;

fn master_after(predecessors: Predecessors, bound: Option<Time>) -> ServerCore {
    let mut c = core_with(0);
    c.become_master_after(t(0), predecessors, bound);
    c
}

#[test]
fn learning_ends_when_the_predecessors_leases_have_ended() {
    // "fair" learns 30 s; the predecessors' leases all end at t=12, and
    // learning 1 s later (the margin).
    let mut c = master_after(Predecessors::LeasesEndBy(t(12)), None);
    let g = get(&mut c, t(1), "a", ask("fair", 80.0, Some(20.0)));
    assert_eq!((g.lease.capacity, g.decision), (20.0, Decision::Learning));
    let g = get(&mut c, t(12), "b", ask("fair", 80.0, None));
    assert_eq!((g.lease.capacity, g.decision), (0.0, Decision::Learning));
    let g = get(&mut c, t(13), "b", ask("fair", 80.0, None));
    assert_eq!((g.lease.capacity, g.decision), (50.0, Decision::Algorithm));
}

#[test]
fn no_record_of_any_lease_means_no_learning_and_unknown_means_all_of_it() {
    let mut c = master_after(Predecessors::LeasesEndBy(Time::ZERO), None);
    let g = get(&mut c, t(1), "a", ask("fair", 80.0, None));
    assert_eq!((g.lease.capacity, g.decision), (80.0, Decision::Algorithm));
    let mut c = master_after(Predecessors::Unknown, None);
    let g = get(&mut c, t(29), "a", ask("fair", 80.0, None));
    assert_eq!((g.lease.capacity, g.decision), (0.0, Decision::Learning));
    // A record further away than the learning duration does not lengthen it.
    let mut c = master_after(Predecessors::LeasesEndBy(t(500)), None);
    let g = get(&mut c, t(30), "a", ask("fair", 80.0, None));
    assert_eq!(g.decision, Decision::Algorithm);
}

#[test]
fn plain_become_master_forgets_a_previous_record() {
    let mut c = master_after(Predecessors::LeasesEndBy(Time::ZERO), None);
    c.step_down(None);
    c.become_master(t(0));
    let g = get(&mut c, t(1), "a", ask("fair", 80.0, None));
    assert_eq!(g.decision, Decision::Learning);
}

#[test]
fn no_lease_outlives_the_recorded_bound() {
    // "fair" leases last 60 s; the bound is at t=40.
    let mut c = master_after(Predecessors::LeasesEndBy(Time::ZERO), Some(t(40)));
    let g = get(&mut c, t(1), "a", ask("fair", 10.0, None));
    assert_eq!(g.lease.expiry, t(40));
    c.set_lease_bound(Some(t(100)));
    let g = get(&mut c, t(2), "a", ask("fair", 10.0, Some(10.0)));
    assert_eq!(g.lease.expiry, t(62));
}

#[test]
fn a_root_moves_its_record_on_before_its_longest_lease_could_reach_it() {
    // The longest lease in the config is 60 s.
    let mut c = master_after(Predecessors::LeasesEndBy(Time::ZERO), Some(t(100)));
    assert_eq!(c.fresh_horizon(t(0)), t(60) + HORIZON_AHEAD);
    let renew = Span::secs(100 - 60) - HORIZON_RENEW_BEFORE;
    assert_eq!(c.horizon_due(t(0) + renew - Span::from_millis(1)), None);
    assert_eq!(
        c.horizon_due(t(0) + renew + Span::secs(1)),
        Some(t(0) + renew + Span::secs(61) + HORIZON_AHEAD)
    );
    // Without a bound (no record kept) and when not master: never due.
    assert_eq!(
        master_after(Predecessors::Unknown, None).horizon_due(t(99)),
        None
    );
    let mut c = master_after(Predecessors::Unknown, Some(t(1)));
    c.step_down(None);
    assert_eq!(c.horizon_due(t(99)), None);
}

#[test]
fn an_intermediates_record_follows_its_parents_lease() {
    let mut c = leaf(None);
    c.set_lease_bound(Some(t(10)));
    let ids = vec!["r".to_string()];
    get(&mut c, t(1), "a", ask("r", 10.0, None));
    c.upstream_request(t(1)).unwrap();
    c.upstream_response(t(1), &ids, &[parent_grant(50.0, 31, 8, 0)]);
    // Its leases never outlive the parent's (t=31): the record need not
    // go further than that (and its own lead, a couple of seconds).
    let ahead = INTERMEDIATE_LEAD.ahead;
    assert_eq!(c.horizon_due(t(2)), Some(t(31) + ahead));
    c.set_lease_bound(Some(t(31) + ahead));
    assert_eq!(c.horizon_due(t(3)), None);
    // The parent stops answering: the record stays where it is.
    assert_eq!(c.horizon_due(t(30)), None);
}

#[test]
fn a_master_whose_election_lease_may_have_run_out_grants_nothing_and_claims_nothing() {
    let mut c = master_after(Predecessors::LeasesEndBy(Time::ZERO), None);
    c.set_master_until(Some(t(10)));
    assert_eq!(c.mastership_at(t(9)), (true, Some("me:1".into())));
    get(&mut c, t(9), "a", ask("fair", 10.0, None));
    // Paused past its lease and resumed: the election task has not run
    // yet, but neither Discovery nor a request may take it for master.
    assert_eq!(c.mastership_at(t(10)), (false, None));
    let req = CapacityRequest {
        who: client("a"),
        resources: vec![ask("fair", 10.0, None)],
    };
    assert_eq!(
        c.get_capacity(t(10), &req),
        Err(Refusal::NotMaster(NotMaster {
            master_address: None
        }))
    );
    assert!(c.readiness(t(10)).is_err());
    // Its keep-alive goes through: proven again.
    c.set_master_until(Some(t(20)));
    assert_eq!(
        get(&mut c, t(11), "a", ask("fair", 10.0, None))
            .lease
            .capacity,
        10.0
    );
}

/// An intermediate's leases never outlive its parent's, so what it records
/// on taking office, before any answer from the parent, covers only the
/// next few seconds (it lay 70 s ahead: its longest lease counted the 60 s
/// pending default, so a second failover within 70 s learned in full
/// although every lease below had ended).
#[test]
fn an_intermediate_takes_office_with_a_horizon_of_seconds() {
    let mut c = leaf(None);
    assert!(
        c.fresh_horizon(t(5)) <= t(5) + INTERMEDIATE_LEAD.ahead,
        "{}",
        c.fresh_horizon(t(5))
    );
    // Once the parent answers, the record follows the parent's lease.
    let mut c = leaf(None);
    get(&mut c, t(1), "a", ask("r", 10.0, None));
    let fresh = c.fresh_horizon(t(1));
    c.set_lease_bound(Some(fresh));
    c.upstream_request(t(1)).unwrap();
    c.upstream_response(t(1), &["r".to_string()], &[parent_grant(100.0, 31, 8, 30)]);
    assert_eq!(c.horizon_due(t(2)), Some(t(31) + INTERMEDIATE_LEAD.ahead));
}
