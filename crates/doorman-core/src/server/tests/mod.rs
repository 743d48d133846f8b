//! Core unit tests: explicit times, no sleeping.

mod absent;
mod expiry;
mod horizon;
mod lowered;
mod outstanding;
mod pending;
mod predecessor;
mod push;
mod shadow;
mod shards;
mod sweep;
mod waiting;

use super::*;
use crate::server::Sharded;
use doorman_lease::{Amount, Demand, Span, Time};

const CFG: &str = r#"
[[resources]]
identifier_glob = "fair"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 10
learning_mode_duration = 30

[[resources]]
identifier_glob = "nolearn*"
capacity = 100
safe_capacity = 3
[resources.algorithm]
kind = "PROPORTIONAL_SHARE"
lease_length = 20
refresh_interval = 8
learning_mode_duration = 0
parameters = { decay_factor = "0.5" }

[[resources]]
identifier_glob = "db/*"
capacity = 10
[resources.algorithm]
kind = "STATIC"
lease_length = 20
refresh_interval = 5
learning_mode_duration = 0
"#;

fn t(s: i64) -> Time {
    Time::from_secs(1_000_000 + s)
}

fn core_with(min_interval: i64) -> ServerCore {
    let cfg = Arc::new(Config::parse(CFG, "test.toml").unwrap());
    let mut c = ServerCore::new(
        CoreOptions {
            role: Role::Root,
            server_id: "me:1".into(),
            min_request_interval: Span::secs(min_interval),
            shadow_all: false,
        },
        cfg,
    );
    c.become_master(t(0));
    c
}

fn client(id: &str) -> Who {
    Who::Client(Arc::from(id))
}

/// A claim of `has`, refreshed every 4 s, ending at `expiry`
/// (`Time::MAX`: too late to shorten a new master's hold).
fn claim(has: f64, expiry: Time) -> Claim {
    Claim {
        has: Amount::new("h", has).unwrap(),
        refresh: 4,
        expiry,
        remaining: None,
    }
}

fn ask(resource: &str, wants: f64, has: Option<f64>) -> ResourceAsk {
    ResourceAsk {
        resource_id: resource.into(),
        demands: vec![Demand::client(0, Amount::new("w", wants).unwrap())],
        claim: has.map(|h| claim(h, Time::MAX)),
        outstanding: None,
    }
}

/// The grants a client's one-resource request gets (none if left out).
fn answers(c: &mut ServerCore, now: Time, who: &str, a: ResourceAsk) -> Vec<Grant> {
    let req = CapacityRequest {
        who: client(who),
        resources: vec![a],
    };
    c.get_capacity(now, &req).unwrap()
}

fn get(c: &mut ServerCore, now: Time, who: &str, a: ResourceAsk) -> Grant {
    answers(c, now, who, a).remove(0)
}

#[test]
fn learning_mode_echoes_claims_then_runs_the_algorithm() {
    let mut c = core_with(0);
    let g = get(&mut c, t(1), "a", ask("fair", 80.0, Some(70.0)));
    assert_eq!((g.lease.capacity, g.decision), (70.0, Decision::Learning));
    let g = get(&mut c, t(2), "b", ask("fair", 80.0, None));
    assert_eq!(g.lease.capacity, 0.0, "a newcomer gets 0 while learning");
    // Learning lasts 30 s from becoming master (t=0); leases are not cleaned meanwhile.
    let g = get(&mut c, t(29), "b", ask("fair", 80.0, None));
    assert_eq!(g.decision, Decision::Learning);
    // After it ends the algorithm runs: b's fair share is 50 but only 30 is free.
    let g = get(&mut c, t(30), "b", ask("fair", 80.0, None));
    assert_eq!((g.lease.capacity, g.decision), (30.0, Decision::Algorithm));
    let g = get(&mut c, t(31), "a", ask("fair", 80.0, Some(70.0)));
    assert_eq!(g.lease.capacity, 50.0);
    // a's 70 counts until it shows it got the 50 (lowered.rs).
    let g = get(&mut c, t(32), "b", ask("fair", 80.0, Some(30.0)));
    assert_eq!(g.lease.capacity, 30.0);
    get(&mut c, t(33), "a", ask("fair", 80.0, Some(50.0)));
    let g = get(&mut c, t(34), "b", ask("fair", 80.0, Some(30.0)));
    assert_eq!(g.lease.capacity, 50.0);
}

#[test]
fn learning_grant_never_exceeds_capacity() {
    let mut c = core_with(0);
    let g = get(&mut c, t(1), "a", ask("fair", 80.0, Some(1e9)));
    assert_eq!(g.lease.capacity, 100.0);
}

#[test]
fn learning_honours_claims_within_capacity_first_come() {
    // After a restart a liar claims 450 of a resource of capacity 100.
    let mut c = core_with(0);
    let g = get(&mut c, t(1), "liar", ask("fair", 10.0, Some(450.0)));
    assert_eq!((g.lease.capacity, g.decision), (100.0, Decision::Learning));
    let g = get(&mut c, t(2), "honest", ask("fair", 80.0, Some(40.0)));
    assert_eq!(g.lease.capacity, 0.0, "nothing is left to honour");
    assert_eq!(
        c.status(t(2), 0).resources[0].has,
        100.0,
        "Σ has ≤ capacity"
    );
    // Outside learning mode a claim never raises a grant: the liar gets its
    // fair share of what is free once the algorithm runs.
    let g = get(&mut c, t(31), "liar", ask("fair", 10.0, Some(450.0)));
    assert_eq!((g.lease.capacity, g.decision), (10.0, Decision::Algorithm));
}

#[test]
fn a_new_master_starts_learning_again_with_empty_state() {
    let mut c = core_with(0);
    get(&mut c, t(40), "a", ask("fair", 80.0, None));
    assert_eq!(c.lease_count(), 1);
    c.step_down(Some("other:2".into()));
    assert_eq!(c.lease_count(), 0);
    let req = CapacityRequest {
        who: client("a"),
        resources: vec![ask("fair", 1.0, None)],
    };
    assert_eq!(
        c.get_capacity(t(41), &req),
        Err(Refusal::NotMaster(NotMaster {
            master_address: Some("other:2".into())
        }))
    );
    assert_eq!(c.master_address().as_deref(), Some("other:2"));
    c.become_master(t(100));
    assert_eq!(c.master_address().as_deref(), Some("me:1"));
    let g = get(&mut c, t(101), "a", ask("fair", 80.0, Some(42.0)));
    assert_eq!((g.lease.capacity, g.decision), (42.0, Decision::Learning));
}

#[test]
fn lease_terms_and_safe_capacity() {
    let mut c = core_with(0);
    let g = get(&mut c, t(5), "a", ask("nolearn-1", 30.0, None));
    assert_eq!(g.lease.capacity, 30.0);
    assert_eq!(g.lease.expiry, t(25));
    assert_eq!(g.lease.refresh_interval, 8);
    assert_eq!(g.safe_capacity, 3.0, "configured safe capacity");
    let g = get(&mut c, t(31), "a", ask("fair", 30.0, None));
    assert_eq!(g.safe_capacity, 100.0, "dynamic: capacity / Σ subclients");
    get(&mut c, t(31), "b", ask("fair", 30.0, None));
    let g = get(&mut c, t(32), "c", ask("fair", 30.0, None));
    assert!((g.safe_capacity - 100.0 / 3.0).abs() < 1e-9);
}

#[test]
fn repeat_requests_inside_the_interval_get_the_same_lease() {
    let mut c = core_with(5);
    let g1 = get(&mut c, t(1), "a", ask("nolearn", 30.0, None));
    let same = get(&mut c, t(2), "a", ask("nolearn", 30.0, None));
    assert_eq!((same.decision, same.lease), (Decision::Repeat, g1.lease));
    let g2 = get(&mut c, t(3), "a", ask("nolearn", 90.0, None));
    assert_eq!(g2.decision, Decision::Repeat);
    assert_eq!(
        (g2.lease.capacity, g2.lease.expiry),
        (30.0, g1.lease.expiry)
    );
    assert!(g1.lease.refresh_interval > 5);
    assert_eq!(
        g2.lease.refresh_interval, 5,
        "its demand moved: back when the 5 s interval ends, not at its refresh"
    );
    // Wants were not recorded either.
    assert_eq!(c.status(t(3), 10).resources[0].wants, 30.0);
    let g3 = get(&mut c, t(6), "a", ask("nolearn", 90.0, None));
    assert_eq!(
        (g3.decision, g3.lease.capacity),
        (Decision::Algorithm, 90.0)
    );
}

#[test]
fn expired_leases_are_forgotten_and_capacity_reused() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("nolearn", 100.0, None));
    assert_eq!(
        get(&mut c, t(2), "b", ask("nolearn", 100.0, None))
            .lease
            .capacity,
        0.0
    );
    // a's lease (20 s) expires at t=21; b then gets everything.
    assert_eq!(
        get(&mut c, t(20), "b", ask("nolearn", 100.0, None))
            .lease
            .capacity,
        0.0
    );
    assert_eq!(
        get(&mut c, t(21), "b", ask("nolearn", 100.0, None))
            .lease
            .capacity,
        100.0
    );
    assert_eq!(c.counters().expired_leases, 1);
    assert!(c.lease_of("nolearn", &client("a")).is_none());
}

#[test]
fn cleanup_drops_empty_resources_but_not_learning_ones() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("fair", 10.0, None));
    get(&mut c, t(1), "a", ask("nolearn", 10.0, None));
    assert_eq!(c.resource_count(), 2);
    c.cleanup(t(25));
    assert_eq!(
        c.resource_count(),
        1,
        "nolearn expired at 21; fair is learning until 30"
    );
    c.cleanup(t(29));
    assert_eq!(c.resource_count(), 1);
    // The learning-mode lease (60 s from t=1) still holds after learning ends.
    c.cleanup(t(60));
    assert_eq!(c.lease_count(), 1);
    c.cleanup(t(61));
    assert_eq!(c.resource_count(), 0);
    assert_eq!(c.lease_count(), 0);
}

#[test]
fn release_forgets_the_lease() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("nolearn", 100.0, None));
    assert_eq!(
        c.release(&client("a"), &["nolearn".into(), "unknown".into()]),
        Ok(1)
    );
    assert_eq!(
        get(&mut c, t(2), "b", ask("nolearn", 100.0, None))
            .lease
            .capacity,
        100.0
    );
    assert_eq!(c.release(&client("zzz"), &["nolearn".into()]), Ok(0));
}

#[test]
fn unmatched_resources_get_what_they_want_for_60s() {
    let cfg = Arc::new(
        Config::parse(
            "[[resources]]\nidentifier_glob = \"x\"\ncapacity = 1\n[resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 5\nrefresh_interval = 1\n",
            "t",
        )
        .unwrap(),
    );
    let mut c = ServerCore::new(CoreOptions::default(), cfg);
    c.become_master(t(0));
    let g = get(&mut c, t(1), "a", ask("nothing/matches", 1234.5, None));
    assert_eq!(g.decision, Decision::Unmatched);
    assert_eq!(g.lease.capacity, 1234.5);
    assert_eq!(g.lease.expiry, t(61));
    assert_eq!(c.counters().unmatched_requests, 1);
    assert_eq!(
        c.resource_count(),
        0,
        "no state is kept for unmatched resources"
    );
}

#[test]
fn templates_exact_first_then_globs_in_order() {
    let mut c = core_with(0);
    let g = get(&mut c, t(1), "a", ask("db/x", 50.0, None));
    assert_eq!(g.lease.capacity, 10.0, "STATIC cap from db/*");
    let s = c.status(t(1), 10);
    assert_eq!(s.resources[0].template, "db/*");
}

#[test]
fn config_replacement_keeps_leases_and_rebinds() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("nolearn", 60.0, None));
    get(&mut c, t(1), "a", ask("fair", 60.0, Some(60.0)));
    let new = CFG.replace(
        "capacity = 100\nsafe_capacity = 3",
        "capacity = 40\nsafe_capacity = 3",
    );
    c.replace_config(Arc::new(Config::parse(&new, "new.toml").unwrap()));
    // The lease survived; the new capacity applies at the next decision.
    assert_eq!(c.lease_of("nolearn", &client("a")).unwrap().capacity, 60.0);
    assert_eq!(
        get(&mut c, t(2), "a", ask("nolearn", 60.0, None))
            .lease
            .capacity,
        40.0
    );
    // Learning end time kept: still learning at t=29.
    assert_eq!(
        get(&mut c, t(29), "a", ask("fair", 60.0, Some(60.0))).decision,
        Decision::Learning
    );
}

#[test]
fn a_removed_template_keeps_its_leases_counted_until_they_expire() {
    let mut c = core_with(0);
    // nolearn: capacity 100, leases of 20 s; a holds 60 until t21.
    let g = get(&mut c, t(1), "a", ask("nolearn", 60.0, None));
    assert_eq!((g.lease.capacity, g.lease.expiry), (60.0, t(21)));
    let only_db = "[[resources]]\nidentifier_glob = \"db/*\"\ncapacity = 10\n[resources.algorithm]\nkind = \"STATIC\"\nlease_length = 20\nrefresh_interval = 5\n";
    c.replace_config(Arc::new(Config::parse(only_db, "db.toml").unwrap()));
    // b asks for 480: a's 60 still count, and nothing outlives them.
    let g = get(&mut c, t(2), "b", ask("nolearn", 480.0, None));
    assert_eq!((g.lease.capacity, g.lease.expiry), (40.0, t(21)));
    let total = c.status(t(2), 0).resources[0].has;
    assert!(total <= 100.0, "Σ has {total}");
    // Once a's lease has run out, the resource is unmatched: no limit.
    let g = get(&mut c, t(21), "b", ask("nolearn", 480.0, None));
    assert_eq!((g.lease.capacity, g.decision), (480.0, Decision::Unmatched));
    // A retired resource whose leases have all run out is unmatched at
    // once (and gone at the next cleanup).
    let g = get(&mut c, t(22), "a", ask("db/x", 5.0, None));
    assert_eq!(g.lease.expiry, t(42));
    let no_db = CFG.replace("db/*", "other/*");
    c.replace_config(Arc::new(Config::parse(&no_db, "test.toml").unwrap()));
    let g = get(&mut c, t(30), "b", ask("db/x", 50.0, None));
    assert_eq!(
        (g.decision, g.lease.expiry),
        (Decision::Algorithm, t(42)),
        "a's lease still counts"
    );
    let g = get(&mut c, t(43), "b", ask("db/x", 50.0, None));
    assert_eq!(g.decision, Decision::Unmatched);
}

#[test]
fn downstream_servers_are_weighted_by_their_bands() {
    let mut c = core_with(0);
    // Like our intermediates: they report `outstanding` and claim the
    // lease they hold.
    let server = |id: &str, bands: &[(i64, i64, f64)], has: Option<f64>| CapacityRequest {
        who: Who::Server(Arc::from(id)),
        resources: vec![ResourceAsk {
            resource_id: "nolearn".into(),
            demands: bands
                .iter()
                .map(|b| Demand::new(b.0, b.1, b.2).unwrap())
                .collect(),
            claim: has.map(|h| claim(h, Time::MAX)),
            outstanding: Some(Amount::new("o", 1.0).unwrap()),
        }],
    };
    let (mut h1, mut h3) = (None, None);
    let (mut g1, mut g3) = (None, None);
    for now in [1, 2, 3, 4] {
        let a = c.get_capacity(t(now), &server("leaf1", &[(0, 1, 100.0)], h1));
        let b = c.get_capacity(t(now), &server("leaf2", &[(0, 3, 300.0)], h3));
        let (a, b) = (a.unwrap().remove(0), b.unwrap().remove(0));
        (h1, h3) = (Some(a.lease.capacity), Some(b.lease.capacity));
        (g1, g3) = (Some(a), Some(b));
    }
    let (g1, g3) = (g1.unwrap(), g3.unwrap());
    assert_eq!((g1.lease.capacity, g3.lease.capacity), (25.0, 75.0));
    assert_eq!(
        g1.algorithm.kind,
        doorman_algorithms::Kind::ProportionalShare
    );
    // A client and a server with the same id are different requesters.
    get(&mut c, t(5), "leaf1", ask("nolearn", 1.0, None));
    assert_eq!(c.lease_count(), 3);
}

/// GetServerCapacity from the node "region-1" (5 clients) for "nolearn".
fn region(wants: f64, has: Option<f64>) -> CapacityRequest {
    CapacityRequest {
        who: Who::Server(Arc::from("region-1")),
        resources: vec![ResourceAsk {
            demands: vec![Demand::new(0, 5, wants).unwrap()],
            ..ask("nolearn", wants, has)
        }],
    }
}

#[test]
fn a_new_master_of_a_downstream_node_inherits_its_predecessors_lease() {
    let mut c = core_with(0);
    let g = c.get_capacity(t(1), &region(60.0, None)).unwrap().remove(0);
    assert_eq!(g.lease.capacity, 60.0);
    let g = c
        .get_capacity(t(5), &region(60.0, Some(60.0)))
        .unwrap()
        .remove(0);
    assert_eq!(g.lease.capacity, 60.0);
    get(&mut c, t(6), "other", ask("nolearn", 100.0, None));
    // The node's master fails over: the new one has heard from few
    // requesters yet and claims no lease.
    let g = c.get_capacity(t(7), &region(10.0, None)).unwrap().remove(0);
    assert_eq!(
        g.lease.capacity, 60.0,
        "the predecessor's 60 are still sub-leased below"
    );
    let totals = c.status(t(7), 0).resources[0].has;
    assert_eq!(totals, 100.0, "Σ has unchanged: 60 + 40");
    // Its answer was lost; it asks again, still without a claim.
    let g = c.get_capacity(t(7), &region(10.0, None)).unwrap().remove(0);
    assert_eq!(g.lease.capacity, 60.0, "still inherited");
    // Once it claims its lease, the algorithm applies as usual.
    let g = c
        .get_capacity(t(8), &region(10.0, Some(60.0)))
        .unwrap()
        .remove(0);
    assert_eq!(g.lease.capacity, 10.0);
    // An expired lease is forgotten, so nothing is inherited.
    let g = c.get_capacity(t(40), &region(5.0, None)).unwrap().remove(0);
    assert_eq!(g.lease.capacity, 5.0);
}

#[test]
fn an_inherited_lease_lives_only_until_the_lease_it_came_from_expires() {
    let mut c = core_with(0);
    // nolearn: leases of 20 s. The node claims its lease at t5 (until t25).
    c.get_capacity(t(1), &region(60.0, None)).unwrap();
    let g = c
        .get_capacity(t(5), &region(60.0, Some(60.0)))
        .unwrap()
        .remove(0);
    assert_eq!((g.lease.capacity, g.lease.expiry), (60.0, t(25)));
    get(&mut c, t(6), "other", ask("nolearn", 100.0, None));
    // It never claims again: it inherits its 60 while that lease runs, even
    // though each inherited grant is a new lease that ends later.
    for s in [7, 15, 24] {
        let g = c.get_capacity(t(s), &region(10.0, None)).unwrap().remove(0);
        assert_eq!(g.lease.capacity, 60.0, "inherited at t{s}");
    }
    // Past t25 the inheritance is over: the algorithm decides (wants 10).
    let g = c
        .get_capacity(t(26), &region(10.0, None))
        .unwrap()
        .remove(0);
    assert_eq!(g.lease.capacity, 10.0);
    let g = c
        .get_capacity(t(40), &region(10.0, None))
        .unwrap()
        .remove(0);
    assert_eq!(g.lease.capacity, 10.0, "and it does not come back");
}

#[test]
fn an_inherited_lease_never_exceeds_what_the_others_leave_free() {
    let mut c = core_with(0);
    c.get_capacity(t(1), &region(60.0, None)).unwrap();
    c.get_capacity(t(2), &region(60.0, Some(60.0))).unwrap();
    get(&mut c, t(3), "other", ask("nolearn", 40.0, None));
    // The capacity shrinks from 100 to 70 while 60 + 40 are out.
    let smaller = CFG.replacen(
        "capacity = 100\nsafe_capacity = 3",
        "capacity = 70\nsafe_capacity = 3",
        1,
    );
    assert_ne!(smaller, CFG);
    c.replace_config(Arc::new(Config::parse(&smaller, "test.toml").unwrap()));
    let g = c.get_capacity(t(4), &region(10.0, None)).unwrap().remove(0);
    assert_eq!(g.lease.capacity, 30.0, "70 − the other's 40, not 60");
    assert!(c.status(t(4), 0).resources[0].has <= 70.0);
}

#[test]
fn status_snapshot_lists_resources_and_leases() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("nolearn", 10.0, None));
    get(&mut c, t(1), "b", ask("nolearn", 20.0, None));
    let s = c.status(t(2), 1);
    assert!(s.is_master);
    assert_eq!(s.leases, 2);
    let r = &s.resources[0];
    assert_eq!((r.requesters, r.has, r.wants), (2, 30.0, 30.0));
    assert_eq!(r.leases.len(), 1);
    assert!(r.leases_truncated);
    assert_eq!(r.leases[0].expires_in, 19.0);
}

mod intermediate {
    use super::*;
    use crate::limits::{MAX_AMOUNT, MAX_BANDS};
    use crate::server::UpstreamGrant;

    pub(super) fn leaf(local: Option<&str>) -> ServerCore {
        let cfg = match local {
            Some(text) => Arc::new(Config::parse(text, "local.toml").unwrap()),
            None => Arc::new(Config::empty()),
        };
        let mut c = ServerCore::new(
            CoreOptions {
                role: Role::Intermediate,
                server_id: "leaf:1".into(),
                min_request_interval: Span::ZERO,
                shadow_all: false,
            },
            cfg,
        );
        c.become_master(t(0));
        c
    }

    /// A leaf whose client "a" asked for `wants` of "r" at 1 s, and whose
    /// parent answered its first request with `grant`.
    pub(super) fn leaf_granted(wants: f64, grant: UpstreamGrant) -> ServerCore {
        let mut c = leaf(None);
        get(&mut c, t(1), "a", ask("r", wants, None));
        c.upstream_request(t(1)).unwrap();
        c.upstream_response(t(1), &["r".to_string()], &[grant]);
        c
    }

    pub(super) fn parent_grant(
        cap: f64,
        expiry: i64,
        refresh: i64,
        learning: i64,
    ) -> UpstreamGrant {
        UpstreamGrant {
            resource_id: "r".into(),
            lease: doorman_lease::Lease {
                capacity: cap,
                expiry: t(expiry),
                refresh_interval: refresh,
            },
            algorithm: Some(crate::config::AlgorithmConfig {
                kind: doorman_algorithms::Kind::FairShare,
                lease_length: 60,
                refresh_interval: 16,
                learning_mode_duration: learning,
                decay_factor: 0.5,
                parameters: vec![],
            }),
            safe_capacity: Some(4.0),
            next_refresh_interval: None,
            predecessor_out: None,
            predecessor_until: None,
            shadow: false,
        }
    }

    fn band_ask(prio: i64, wants: f64) -> ResourceAsk {
        ResourceAsk {
            resource_id: "r".into(),
            demands: vec![Demand::client(prio, Amount::new("w", wants).unwrap())],
            claim: None,
            outstanding: None,
        }
    }

    #[test]
    fn a_new_resource_is_pending_and_asked_for_at_once() {
        let mut c = leaf(None);
        assert_eq!(
            answers(&mut c, t(1), "a", ask("r", 30.0, Some(12.0))),
            vec![],
            "a claim no local template bounds is left unanswered while pending"
        );
        let g = get(&mut c, t(1), "b", ask("r", 30.0, None));
        assert_eq!((g.lease.capacity, g.decision), (0.0, Decision::Learning));
        assert!(
            !g.algorithm_known,
            "no placeholder algorithm is sent downstream"
        );
        assert_eq!(
            g.lease.expiry,
            t(1),
            "without a lease from the parent, leases of 0 end at once"
        );
        assert!(c.take_upstream_wake());
        assert!(!c.take_upstream_wake());
        // The claim comes from a lease refreshed every 4 s: wait until all
        // requesters can have re-reported (3 × 4 s + 1 s after becoming master).
        assert!(c.upstream_request(t(1)).is_none());
        let asks = c.upstream_request(t(13)).unwrap();
        assert_eq!(asks.len(), 1);
        assert_eq!(asks[0].bands, vec![(0, 2, 60.0)]);
        assert_eq!((asks[0].has, asks[0].outstanding), (None, 0.0));
        assert!(
            c.upstream_request(t(1)).is_none(),
            "not again within a second"
        );
    }

    #[test]
    fn aggregates_are_always_acceptable_to_the_parent() {
        let mut c = leaf(None);
        // 1 002 distinct priorities, each wanting the maximum.
        for p in 0..1002 {
            let req = CapacityRequest {
                who: client(&format!("c{p}")),
                resources: vec![band_ask(p, 1e15)],
            };
            c.get_capacity(t(1), &req).unwrap();
        }
        let asks = c.upstream_request(t(1)).unwrap();
        let bands = &asks[0].bands;
        assert_eq!(bands.len(), MAX_BANDS);
        assert_eq!(bands[0].0, 1001, "highest first");
        assert_eq!(
            bands.last().unwrap(),
            &(2, 3, 1e15),
            "the three lowest merged, wants clamped"
        );
        assert!(bands.iter().all(|b| b.2 <= MAX_AMOUNT));
    }

    #[test]
    fn a_resource_that_regains_a_requester_wakes_the_upstream_task() {
        let mut c = leaf(None);
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        assert!(c.take_upstream_wake());
        assert_eq!(c.release(&client("a"), &["r".into()]), Ok(1));
        assert!(
            c.next_upstream_wakeup().is_none(),
            "nothing to renew without requesters"
        );
        // The resource is kept (learning mode); a new requester must wake the task.
        get(&mut c, t(30), "b", ask("r", 30.0, None));
        assert!(c.take_upstream_wake());
        assert!(c.upstream_request(t(30)).is_some());
    }

    #[test]
    fn a_new_master_told_of_old_leases_waits_for_its_requesters_before_asking() {
        let mut c = leaf(None);
        // Became master at t=0; a client claims a lease it refreshes every 4 s.
        answers(&mut c, t(1), "a", ask("r", 30.0, Some(20.0)));
        assert!(c.take_upstream_wake());
        assert!(
            c.upstream_request(t(1)).is_none(),
            "held: others have not re-reported yet"
        );
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(13)),
            "3 × 4 s refresh + 1 s after becoming master"
        );
        answers(&mut c, t(3), "b", ask("r", 50.0, Some(40.0)));
        let asks = c.upstream_request(t(13)).unwrap();
        assert_eq!(
            asks[0].bands,
            vec![(0, 2, 80.0)],
            "the whole inherited demand"
        );
        // A fresh start (no claims) asks at once.
        let mut fresh = leaf(None);
        get(&mut fresh, t(1), "a", ask("r", 30.0, None));
        assert!(fresh.upstream_request(t(1)).is_some());
    }

    #[test]
    fn a_new_master_asks_in_time_to_renew_a_claimed_lease_about_to_end() {
        let mut c = leaf(None);
        let ids = vec!["r".to_string()];
        // Became master at t=0; a claims a lease it refreshes every 4 s,
        // ending at t=9: the hold (until t=13) would let it run out.
        let claim = |has: f64, ends: i64| ResourceAsk {
            claim: Some(super::claim(has, t(ends))),
            ..ask("r", 30.0, None)
        };
        answers(&mut c, t(1), "a", claim(20.0, 30));
        assert_eq!(c.next_upstream_wakeup(), Some(t(13)));
        c.take_upstream_wake();
        answers(&mut c, t(2), "b", claim(10.0, 9));
        assert!(c.take_upstream_wake(), "the hold moved forward");
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(4)),
            "a refresh interval and a second before b's lease ends"
        );
        assert!(c.upstream_request(t(3)).is_none());
        assert!(c.upstream_request(t(4)).is_some());
        c.upstream_response(t(4), &ids, &[parent_grant(50.0, 100, 8, 30)]);
        // b's next refresh, before its lease ends, renews its claim.
        let g = get(&mut c, t(6), "b", claim(10.0, 9));
        assert_eq!(g.lease.capacity, 10.0);
        assert!(g.lease.expiry > t(9), "renewed: {:?}", g.lease.expiry);
    }

    #[test]
    fn an_intermediate_cut_off_from_its_parent_is_not_ready() {
        let mut c = leaf(None);
        assert_eq!(c.readiness(t(1)), Ok(()), "no resource in use yet");
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        assert_eq!(
            c.readiness(t(2)),
            Ok(()),
            "learning: waiting for the parent is normal"
        );
        // Learning (60 s while the algorithm is unknown) is over and the
        // parent never answered.
        let why = c.readiness(t(61)).unwrap_err();
        assert_eq!(why, NotReady::CutOff(1));
        assert!(
            why.to_string()
                .contains("no valid lease from the parent for 1 resource"),
            "{why}"
        );
        c.upstream_response(t(62), &["r".to_string()], &[parent_grant(10.0, 120, 8, 0)]);
        assert_eq!(c.readiness(t(63)), Ok(()));
        assert!(c.readiness(t(121)).is_err(), "the lease ran out");
    }

    #[test]
    fn while_learning_a_new_master_asks_for_at_least_the_lease_it_holds() {
        let mut c = leaf(None);
        let ids = vec!["r".to_string()];
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        c.upstream_request(t(1)).unwrap();
        // The parent (inheriting the predecessor's lease) grants 90.
        c.upstream_response(t(1), &ids, &[parent_grant(90.0, 100, 8, 30)]);
        let req = CapacityRequest {
            who: client("b"),
            resources: vec![band_ask(7, 5.0)],
        };
        c.get_capacity(t(2), &req).unwrap();
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(9)),
            "35 known of 90 held is no reason to ask early while learning"
        );
        let asks = c.upstream_request(t(9)).unwrap();
        assert_eq!(
            asks[0].bands,
            vec![(7, 1, 60.0), (0, 1, 30.0)],
            "the 55 not yet re-reported go to the highest band"
        );
        c.upstream_response(t(9), &ids, &[parent_grant(90.0, 100, 8, 30)]);
        // Learning ends at 30 s: the true demand again.
        let asks = c.upstream_request(t(31)).unwrap();
        assert_eq!(asks[0].bands, vec![(7, 1, 5.0), (0, 1, 30.0)]);
    }

    #[test]
    fn a_demand_move_of_more_than_ten_percent_asks_the_parent_early() {
        let mut c = leaf(None);
        let ids = vec!["r".to_string()];
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        c.take_upstream_wake();
        c.upstream_request(t(1)).unwrap();
        c.upstream_response(t(1), &ids, &[parent_grant(30.0, 60, 16, 0)]);
        // Its pending lease of 0 ended at once (it is asked for again as
        // a new requester): it takes a lease from the parent's now.
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        c.take_upstream_wake();
        assert_eq!(c.next_upstream_wakeup(), Some(t(17)));
        // +3 % and not beyond the lease: wait for the refresh.
        get(&mut c, t(2), "a", ask("r", 31.0, None));
        assert!(!c.take_upstream_wake());
        assert_eq!(c.next_upstream_wakeup(), Some(t(17)));
        // A second requester: 45 wanted, 30 held, +50 % since reported.
        get(&mut c, t(3), "b", ask("r", 14.0, None));
        assert!(c.take_upstream_wake());
        assert_eq!(c.next_upstream_wakeup(), Some(t(3)));
        let asks = c.upstream_request(t(3)).unwrap();
        assert_eq!(asks[0].bands, vec![(0, 2, 45.0)]);
        c.upstream_response(t(3), &ids, &[parent_grant(45.0, 60, 16, 0)]);
        // Demand falls well below the lease held: hand it back early.
        get(&mut c, t(4), "b", ask("r", 1.0, None));
        assert!(c.take_upstream_wake());
        assert_eq!(c.next_upstream_wakeup(), Some(t(4)));
    }

    #[test]
    fn upstream_retries_come_within_the_parents_refresh_interval() {
        let mut c = leaf(None);
        let ids = vec!["r".to_string()];
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        c.upstream_request(t(1)).unwrap();
        c.upstream_failure(t(1), &ids, Span::secs(30));
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(3)),
            "no lease: 2 s at most"
        );
        c.upstream_request(t(3)).unwrap();
        c.upstream_failure(t(3), &ids, Span::from_millis(500));
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(3) + Span::from_millis(500))
        );
        c.upstream_request(t(31)).unwrap();
        c.upstream_response(t(31), &ids, &[parent_grant(50.0, 90, 8, 0)]);
        c.upstream_request(t(39)).unwrap();
        c.upstream_failure(t(39), &ids, Span::secs(30));
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(47)),
            "capped at the 8 s refresh interval"
        );
    }

    #[test]
    fn bands_are_aggregated_per_priority() {
        let mut c = leaf(None);
        for (who, prio, w) in [("a", 5, 10.0), ("b", 5, 20.0), ("c", 0, 7.0)] {
            let req = CapacityRequest {
                who: client(who),
                resources: vec![band_ask(prio, w)],
            };
            c.get_capacity(t(1), &req).unwrap();
        }
        let asks = c.upstream_request(t(1)).unwrap();
        assert_eq!(asks[0].bands, vec![(5, 2, 30.0), (0, 1, 7.0)]);
    }

    #[test]
    fn the_parents_grant_is_shared_and_leases_nest_inside_it() {
        let mut c = leaf(None);
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        let ids = vec!["r".to_string()];
        c.upstream_request(t(1)).unwrap();
        c.upstream_response(t(1), &ids, &[parent_grant(50.0, 21, 8, 0)]);
        assert_eq!(
            c.next_upstream_wakeup(),
            Some(t(9)),
            "refresh at the upstream lease's interval"
        );
        let g = get(&mut c, t(2), "a", ask("r", 30.0, None));
        assert_eq!((g.lease.capacity, g.decision), (30.0, Decision::Algorithm));
        assert_eq!(g.lease.expiry, t(21), "never outlives the upstream lease");
        assert_eq!(
            g.lease.refresh_interval, 4,
            "upstream refresh 8 × decay 0.5"
        );
        assert_eq!(
            g.safe_capacity, 4.0,
            "the parent's per-client safe capacity"
        );
        assert!(g.algorithm_known);
        let g = get(&mut c, t(2), "b", ask("r", 100.0, None));
        assert_eq!(
            g.lease.capacity, 20.0,
            "50 granted by the parent, 30 held by a"
        );
        // The upstream lease runs out: capacity 0, leases expire at once.
        let g = get(&mut c, t(21), "b", ask("r", 100.0, None));
        assert_eq!(g.lease.capacity, 0.0);
        assert_eq!(g.lease.expiry, t(21));
    }

    #[test]
    fn learning_follows_the_parents_duration_and_never_restarts() {
        let mut c = leaf(None);
        answers(&mut c, t(1), "a", ask("r", 30.0, Some(20.0)));
        let ids = vec!["r".to_string()];
        c.upstream_request(t(13)).unwrap();
        c.upstream_response(t(13), &ids, &[parent_grant(50.0, 30, 8, 20)]);
        let g = get(&mut c, t(15), "b", ask("r", 30.0, None));
        assert_eq!(g.decision, Decision::Learning, "20 s from becoming master");
        let g = get(&mut c, t(20), "b", ask("r", 30.0, None));
        assert_eq!(g.decision, Decision::Algorithm);
        c.upstream_request(t(21)).unwrap();
        c.upstream_response(t(21), &ids, &[parent_grant(50.0, 40, 8, 60)]);
        let g = get(&mut c, t(22), "b", ask("r", 30.0, None));
        assert_eq!(
            g.decision,
            Decision::Algorithm,
            "a longer duration later does not restart learning"
        );
    }

    #[test]
    fn a_local_template_only_narrows() {
        let local = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 35\nsafe_capacity = 1\n[resources.algorithm]\nkind = \"NO_ALGORITHM\"\nlease_length = 10\nrefresh_interval = 2\nlearning_mode_duration = 0\n";
        let mut c = leaf(Some(local));
        get(&mut c, t(1), "a", ask("r", 100.0, None));
        let ids = vec!["r".to_string()];
        c.upstream_request(t(1)).unwrap();
        c.upstream_response(t(1), &ids, &[parent_grant(50.0, 61, 8, 0)]);
        let g = get(&mut c, t(2), "a", ask("r", 100.0, None));
        assert_eq!(
            g.lease.capacity, 35.0,
            "min(parent 50, local 35); kind stays FAIR_SHARE"
        );
        assert_eq!(g.lease.expiry, t(12), "local lease_length 10 < parent's 60");
        assert_eq!(g.lease.refresh_interval, 1, "min(8, local 2) × 0.5");
        assert_eq!(g.safe_capacity, 1.0);
        assert_eq!(g.algorithm.kind, doorman_algorithms::Kind::FairShare);
    }

    #[test]
    fn failures_retry_later_and_standbys_do_not_ask() {
        let mut c = leaf(None);
        get(&mut c, t(1), "a", ask("r", 30.0, None));
        let ids = vec!["r".to_string()];
        c.upstream_request(t(1)).unwrap();
        c.upstream_failure(t(1), &ids, Span::secs(2));
        assert_eq!(c.next_upstream_wakeup(), Some(t(3)));
        assert!(c.upstream_request(t(2)).is_none());
        assert!(c.upstream_request(t(3)).is_some());
        c.step_down(None);
        assert!(c.upstream_request(t(10)).is_none());
        assert!(c.next_upstream_wakeup().is_none());
    }
}

#[test]
fn a_downstream_server_weighs_at_most_its_templates_client_bound() {
    let text = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\nmax_clients_per_server = 10\n\
                [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 5\n\
                learning_mode_duration = 0\n";
    let cfg = Arc::new(Config::parse(text, "t.toml").unwrap());
    let mut c = ServerCore::new(CoreOptions::default(), cfg);
    c.become_master(t(0));
    let server = |id: &str, clients: i64, wants: f64| CapacityRequest {
        who: Who::Server(Arc::from(id)),
        resources: vec![ResourceAsk {
            resource_id: "r".into(),
            demands: vec![Demand::new(0, clients, wants).unwrap()],
            claim: None,
            outstanding: None,
        }],
    };
    let grant = |c: &mut ServerCore, now, req: CapacityRequest| {
        c.get_capacity(now, &req).unwrap()[0].lease.capacity
    };
    // Two real nodes of 5 clients, and a liar claiming a billion clients:
    // it weighs 10 (the bound), so the water level is 100 / 20 = 5.
    // A first round registers everyone (the first comer holds it all).
    for id in ["real-1", "real-2"] {
        grant(&mut c, t(1), server(id, 5, 100.0));
    }
    grant(&mut c, t(1), server("liar", 1_000_000_000, 1e9));
    assert_eq!(grant(&mut c, t(2), server("real-1", 5, 100.0)), 25.0);
    assert_eq!(grant(&mut c, t(2), server("real-2", 5, 100.0)), 25.0);
    assert_eq!(
        grant(&mut c, t(2), server("liar", 1_000_000_000, 1e9)),
        50.0
    );
    let status = c.status(t(2), 10);
    let liar = status.resources[0]
        .leases
        .iter()
        .find(|l| l.id == "liar")
        .unwrap();
    assert_eq!(liar.subclients, 10.0);
    // The default bound when the template says nothing.
    let dflt = Config::parse(CFG, "t.toml").unwrap();
    assert_eq!(
        dflt.templates()[0].max_clients_per_server,
        crate::limits::DEFAULT_MAX_CLIENTS_PER_SERVER
    );
}

#[test]
fn several_bands_share_the_client_bound_highest_first() {
    let bands = [
        Demand::new(2, 8, 10.0).unwrap(),
        Demand::new(1, 8, 10.0).unwrap(),
        Demand::new(0, 8, 10.0).unwrap(),
    ];
    let b = super::open_share::bound_subclients(&bands, 10);
    let n: Vec<u32> = b.iter().map(|d| d.subclients()).collect();
    assert_eq!(n, [8, 2, 1], "each band keeps at least one");
    assert!(matches!(
        super::open_share::bound_subclients(&bands, 24),
        std::borrow::Cow::Borrowed(_)
    ));
}

#[test]
fn a_root_without_config_refuses_until_one_arrives_and_says_why() {
    let mut c = ServerCore::new(CoreOptions::default(), Arc::new(Config::empty()));
    c.become_master(t(0));
    c.wait_for_config("waiting for etcd key /doorman/config");
    let req = CapacityRequest {
        who: client("a"),
        resources: vec![ask("fair", 1.0, None)],
    };
    let why = "waiting for etcd key /doorman/config".to_string();
    assert_eq!(
        c.get_capacity(t(1), &req),
        Err(Refusal::NoConfig(why.clone()))
    );
    assert_eq!(
        c.release(&client("a"), &["fair".into()]),
        Err(Refusal::NoConfig(why))
    );
    assert_eq!(
        c.readiness(t(1)).map_err(|e| e.to_string()),
        Err("no config yet: waiting for etcd key /doorman/config".to_string())
    );
    c.replace_config(Arc::new(Config::parse(CFG, "test.toml").unwrap()));
    assert_eq!(c.readiness(t(2)), Ok(()));
    assert_eq!(c.get_capacity(t(2), &req).unwrap()[0].resource_id, "fair");
    // A standby is ready when it knows the master.
    c.step_down(None);
    assert_eq!(c.readiness(t(3)), Err(NotReady::MasterUnknown));
    c.set_master_address(Some("other:1".into()));
    assert_eq!(c.readiness(t(3)), Ok(()));
}

/// An intermediate whose config cannot be read yet refuses rather than
/// serve without its access rules; the config's arrival lets it serve.
#[test]
fn an_intermediate_waiting_for_its_config_refuses_until_it_arrives() {
    let mut c = intermediate::leaf(None);
    c.wait_for_config("waiting for the config file local.toml");
    let req = CapacityRequest {
        who: client("a"),
        resources: vec![ask("fair", 1.0, None)],
    };
    let why = Refusal::NoConfig("waiting for the config file local.toml".into());
    assert_eq!(c.get_capacity(t(1), &req), Err(why));
    let why = c.readiness(t(1)).unwrap_err();
    assert!(matches!(why, NotReady::NoConfig(_)), "{why}");
    assert!(why.to_string().starts_with("no config yet"));
    c.replace_config(Arc::new(Config::parse(CFG, "local.toml").unwrap()));
    assert!(c.get_capacity(t(2), &req).is_ok());
}

/// On an open server (no access rules) anyone may call GetServerCapacity
/// and claim any client count: one claiming 2^31 clients next to one real
/// client takes at most `open_server_share` (0.9 by default) of the
/// resource, where `max_clients_per_server` alone left the client
/// 1/100 001 of it. With rules naming who may serve, client counts are
/// trusted up to `max_clients_per_server`.
#[test]
fn an_unvouched_downstream_server_takes_at_most_its_open_share() {
    let tmpl = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\n\
                [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 5\n\
                learning_mode_duration = 0\n";
    let rules = "[[access]]\nidentities = [\"*\"]\nactions = [\"acquire\", \"serve\"]\n";
    let round = |text: &str| {
        let cfg = Arc::new(Config::parse(text, "t.toml").unwrap());
        let mut c = ServerCore::new(CoreOptions::default(), cfg);
        c.become_master(t(0));
        let liar = CapacityRequest {
            who: Who::Server(Arc::from("liar")),
            resources: vec![ResourceAsk {
                resource_id: "r".into(),
                demands: vec![Demand::new(0, 1 << 31, 1e9).unwrap()],
                claim: None,
                outstanding: None,
            }],
        };
        get(&mut c, t(1), "real", ask("r", 100.0, None));
        c.get_capacity(t(1), &liar).unwrap();
        get(&mut c, t(2), "real", ask("r", 100.0, None));
        let took = c.get_capacity(t(2), &liar).unwrap()[0].lease.capacity;
        let real = get(&mut c, t(3), "real", ask("r", 100.0, None))
            .lease
            .capacity;
        (real, took)
    };
    let (real, took) = round(tmpl);
    assert!(
        (real - 10.0).abs() < 1e-9 && took <= 90.0 + 1e-9,
        "open: {real}, {took}"
    );
    let (real, _) = round(&format!("{tmpl}{rules}"));
    assert!(real < 0.01, "vouched for by a rule: trusted, {real}");
    // 1 trusts client counts as the original Doorman does.
    let (real, _) = round(&tmpl.replace(
        "capacity = 100\n",
        "capacity = 100\nopen_server_share = 1\n",
    ));
    assert!(real < 0.01, "{real}");
    for bad in ["0", "1.5", "-1"] {
        let text = tmpl.replace(
            "capacity = 100\n",
            &format!("capacity = 100\nopen_server_share = {bad}\n"),
        );
        let e = Config::parse(&text, "t.toml").unwrap_err().to_string();
        assert!(
            e.contains("open_server_share: must be above 0 and at most 1"),
            "{e}"
        );
    }
}

/// Fake downstream servers that collude (several ids, each claiming 2^31
/// clients) used to raise each other's bound round by round, up to
/// `max_clients_per_server`: with two a real client kept 0.0005 of 100,
/// with ten 0.0001. Bounded together they take at most
/// `open_server_share` from the end clients, however many they are.
#[test]
fn colluding_unvouched_servers_take_at_most_the_open_share_together() {
    let tmpl = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\n\
                [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 5\n\
                learning_mode_duration = 0\n";
    for fakes in [1, 2, 10] {
        let cfg = Arc::new(Config::parse(tmpl, "t.toml").unwrap());
        let mut c = ServerCore::new(CoreOptions::default(), cfg);
        c.become_master(t(0));
        let liar = |i: usize| CapacityRequest {
            who: Who::Server(Arc::from(format!("liar{i}"))),
            resources: vec![ResourceAsk {
                resource_id: "r".into(),
                demands: vec![Demand::new(0, 1 << 31, 1e9).unwrap()],
                claim: None,
                outstanding: Some(Amount::ZERO),
            }],
        };
        let mut real = 0.0;
        // Rounds 2 s apart (past the minimum interval); each asks in turn.
        for round in 0..20 {
            let at = t(2 * round + 1);
            real = get(&mut c, at, "real", ask("r", 100.0, Some(real)))
                .lease
                .capacity;
            for i in 0..fakes {
                c.get_capacity(at, &liar(i)).unwrap();
            }
        }
        let st = c.status(t(50), 100);
        let counted: f64 = st.resources[0]
            .leases
            .iter()
            .filter(|l| l.kind == "server")
            .map(|l| l.subclients)
            .sum();
        assert!(
            counted <= 9.0f64.max(fakes as f64),
            "{fakes} fakes count for {counted} clients"
        );
        assert!(
            real >= 100.0 / (1.0 + 9.0f64.max(fakes as f64)) - 1e-9,
            "{fakes} fakes: the real client keeps {real}"
        );
    }
}
