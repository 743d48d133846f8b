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
fn a_lease_a_reload_shortened_is_forgotten_at_its_new_end() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("nolearn", 10.0, None));
    c.cleanup(t(1));
    // Filed at 21; the reload makes leases 5 s long: renewed at 2, it ends
    // at 7, before its key.
    c.replace_config(Arc::new(Config::parse(NOLEARN_5S, "short.toml").unwrap()));
    let g = get(&mut c, t(2), "a", ask("nolearn", 10.0, None));
    assert_eq!(g.lease.expiry, t(7));
    c.cleanup(t(6));
    assert!(c.lease_of("nolearn", &client("a")).is_some());
    c.cleanup(t(7));
    assert!(
        c.lease_of("nolearn", &client("a")).is_none(),
        "not kept to 21"
    );
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
