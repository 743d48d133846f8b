//! The expiry index keeps one key per requester at or before the time it
//! may be forgotten: a renewal leaves the key where it was, and cleanup
//! re-files it when it comes up (`Resource::expire`), a bounded number
//! per call.

use super::deadlines::KEYS_PER_CALL;
use super::*;

const NOLEARN_5S: &str = "[[resources]]\nidentifier_glob = \"nolearn*\"\ncapacity = 100\n[resources.algorithm]\nkind = \"PROPORTIONAL_SHARE\"\nlease_length = 5\nrefresh_interval = 2\nlearning_mode_duration = 0\n";

#[test]
fn a_renewed_lease_outlives_its_first_key_and_is_forgotten_at_its_end() {
    let mut c = core_with(0);
    // nolearn: leases of 20 s. a's first lease ends at 21, its renewal at 30.
    get(&mut c, t(1), "a", ask("nolearn", 10.0, None));
    c.cleanup(t(1));
    get(&mut c, t(10), "a", ask("nolearn", 10.0, None));
    c.cleanup(t(21));
    assert!(
        c.lease_of("nolearn", &client("a")).is_some(),
        "renewed to 30"
    );
    c.cleanup(t(29));
    assert!(c.lease_of("nolearn", &client("a")).is_some());
    c.cleanup(t(30));
    assert!(c.lease_of("nolearn", &client("a")).is_none());
    assert_eq!(c.counters().expired_leases, 1);
}

#[test]
fn a_lease_a_reload_shortened_stays_counted_until_the_lease_before_it_ends() {
    let mut c = core_with(0);
    // nolearn: leases of 20 s. a holds 60 until 21.
    get(&mut c, t(1), "a", ask("nolearn", 60.0, None));
    c.cleanup(t(1));
    // The reload makes leases 5 s long: renewed at 2, a's lease ends at 7.
    // If that answer is lost, a holds its first lease, 60 until 21.
    c.replace_config(Arc::new(Config::parse(NOLEARN_5S, "short.toml").unwrap()));
    let g = get(&mut c, t(2), "a", ask("nolearn", 60.0, None));
    assert_eq!(g.lease.expiry, t(7));
    c.cleanup(t(8));
    assert!(
        c.lease_of("nolearn", &client("a")).is_some(),
        "kept to 21, not forgotten at 7"
    );
    let b = get(&mut c, t(8), "b", ask("nolearn", 100.0, None));
    assert_eq!(b.lease.capacity, 40.0, "a's 60 stays counted");
    c.cleanup(t(21));
    assert!(c.lease_of("nolearn", &client("a")).is_none());
    let b = get(&mut c, t(21), "b", ask("nolearn", 100.0, None));
    assert_eq!(b.lease.capacity, 100.0);
}

#[test]
fn a_retired_resource_lasts_until_its_last_lease_ends_not_its_earliest_key() {
    let mut c = core_with(0);
    // a's key stays at its first end, 21, while its lease moves to 30.
    get(&mut c, t(1), "a", ask("nolearn", 60.0, None));
    get(&mut c, t(10), "a", ask("nolearn", 60.0, None));
    let only_db = CFG.replace("nolearn*", "other*");
    c.replace_config(Arc::new(Config::parse(&only_db, "test.toml").unwrap()));
    let g = get(&mut c, t(29), "b", ask("nolearn", 480.0, None));
    assert_eq!(
        (g.decision, g.lease.capacity),
        (Decision::Algorithm, 40.0),
        "a's 60 still count"
    );
    let g = get(&mut c, t(30), "b", ask("nolearn", 480.0, None));
    assert_eq!(g.decision, Decision::Unmatched);
}

#[test]
fn a_released_requesters_key_goes_with_it_and_the_slot_is_not_forgotten_early() {
    let mut c = core_with(0);
    // a renews (its key stays at its first end, 21; its lease ends at 30)
    // and is released; b takes the freed slot, its lease ending at 32.
    get(&mut c, t(1), "a", ask("nolearn", 10.0, None));
    get(&mut c, t(10), "a", ask("nolearn", 10.0, None));
    assert_eq!(c.release(&client("a"), &["nolearn".into()]), Ok(1));
    get(&mut c, t(12), "b", ask("nolearn", 10.0, None));
    c.cleanup(t(21));
    c.cleanup(t(31));
    assert!(c.lease_of("nolearn", &client("b")).is_some());
    assert_eq!(c.lease_count(), 1);
    c.cleanup(t(32));
    assert!(c.lease_of("nolearn", &client("b")).is_none());
    assert_eq!(c.counters().expired_leases, 1);
}

/// One expiry handles at most `KEYS_PER_CALL` keys of a resource; a
/// cleanup step comes back to it, up to eight times, until none is due, so
/// a mass expiry is worked through in bounded steps of one pass, none
/// forgotten early.
#[test]
fn a_mass_expiry_is_forgotten_in_bounded_steps_of_one_pass() {
    let mut c = core_with(0);
    let n = 8 * KEYS_PER_CALL + 88;
    for i in 0..n {
        get(&mut c, t(1), &format!("c{i}"), ask("nolearn", 1.0, None));
    }
    c.cleanup(t(20));
    assert_eq!(c.lease_count(), n, "none ends before 21");
    assert_eq!(
        c.with_shard(0, |n, s| s.cleanup_step(n, t(21), 0)),
        Some(0),
        "the same resource next"
    );
    assert_eq!(c.counters().expired_leases, 8 * KEYS_PER_CALL as u64);
    assert_eq!(c.with_shard(0, |n, s| s.cleanup_step(n, t(21), 0)), None);
    assert_eq!(c.counters().expired_leases, n as u64);
    assert_eq!(c.lease_count(), 0);
}

#[test]
fn a_client_lease_cut_short_by_the_parents_next_lease_stays_counted_until_its_first_end() {
    use super::intermediate::{leaf_granted, parent_grant};
    let ids = vec!["r".to_string()];
    // The parent's lease ends at 30: a's lease is cut to it.
    let mut c = leaf_granted(50.0, parent_grant(100.0, 30, 8, 0));
    let first = get(&mut c, t(2), "a", ask("r", 50.0, None));
    assert_eq!((first.lease.capacity, first.lease.expiry), (50.0, t(30)));
    // The next answer from the parent, measured from a request that took
    // longer, ends sooner: at 27. a's renewal is cut to it; if that answer
    // is lost, a holds its first lease, 50 until 30.
    c.upstream_request(t(9)).unwrap();
    c.upstream_response(t(9), &ids, &[parent_grant(100.0, 27, 8, 0)]);
    let second = get(&mut c, t(10), "a", ask("r", 50.0, Some(50.0)));
    assert_eq!(second.lease.expiry, t(27));
    c.upstream_request(t(17)).unwrap();
    c.upstream_response(t(17), &ids, &[parent_grant(100.0, 60, 8, 0)]);
    c.cleanup(t(28));
    let b = get(&mut c, t(28), "b", ask("r", 100.0, None));
    assert_eq!(b.lease.capacity, 50.0, "a's 50 stays counted until 30");
    c.cleanup(t(30));
    let b = get(&mut c, t(30), "b", ask("r", 100.0, None));
    assert_eq!(b.lease.capacity, 100.0);
}

/// A downstream server renewed with a shorter lease may still have
/// sub-leases out of its longer earlier grant: it is forgotten only after
/// that grant's end.
#[test]
fn a_downstream_server_outlives_a_shorter_renewal_until_its_longer_grant_ends() {
    let mut c = core_with(0);
    let node = Who::Server(Arc::from("region-1"));
    let g = c.get_capacity(t(1), &region(60.0, None)).unwrap().remove(0);
    assert_eq!(g.lease.expiry, t(21));
    c.replace_config(Arc::new(Config::parse(NOLEARN_5S, "short.toml").unwrap()));
    let g = c
        .get_capacity(t(2), &region(60.0, Some(60.0)))
        .unwrap()
        .remove(0);
    assert_eq!(g.lease.expiry, t(7));
    c.cleanup(t(8));
    assert!(c.lease_of("nolearn", &node).is_some(), "kept to 21");
    c.cleanup(t(21));
    assert!(c.lease_of("nolearn", &node).is_none());
}
