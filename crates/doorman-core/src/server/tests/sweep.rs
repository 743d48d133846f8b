//! Whole-server work in steps (`sweep.rs`) and lazy re-binding after a
//! reload (`reload.rs`), over more resources than one step visits.

use super::*;

/// `n` resources `db/0` … `db/n-1` (STATIC, capacity 10, lease 20 s), each
/// leased to client `who` at `now` (4 each).
fn leased(c: &mut ServerCore, n: usize, who: &str, now: Time) {
    leased_as(c, "db/", n, who, now);
}

fn leased_as(c: &mut ServerCore, prefix: &str, n: usize, who: &str, now: Time) {
    let req = CapacityRequest {
        who: client(who),
        resources: (0..n)
            .map(|i| ask(&format!("{prefix}{i}"), 4.0, None))
            .collect(),
    };
    c.get_capacity(now, &req).unwrap();
}

fn ids(status: &Status) -> Vec<String> {
    status.resources.iter().map(|r| r.id.clone()).collect()
}

#[test]
fn status_and_gauges_in_steps_list_every_resource_once() {
    let mut c = core_with(0);
    let n = 3 * SWEEP_STEP + 7;
    leased(&mut c, n, "a", t(1));
    let status = c.status(t(2), 0);
    let mut seen = ids(&status);
    seen.dedup();
    assert_eq!(seen.len(), n);
    assert_eq!(status.leases, n);

    let (mut gauges, mut at) = (Vec::new(), Some(0));
    while let Some(from) = at {
        let before = gauges.len();
        at = c.with_shard(0, |n, s| s.gauges_step(n, t(2), from, &mut gauges));
        assert!(gauges.len() - before <= SWEEP_STEP, "a step is bounded");
    }
    let mut gauge_ids: Vec<_> = gauges.iter().map(|g| g.id.clone()).collect();
    gauge_ids.sort();
    gauge_ids.dedup();
    assert_eq!(gauge_ids.len(), n);
    assert!(gauges.iter().all(|g| g.has == 4.0 && g.requesters == 1));
}

#[test]
fn cleanup_in_steps_drops_the_expired_and_keeps_the_rest_despite_changes_between_steps() {
    let mut c = core_with(0);
    let n = 4 * SWEEP_STEP;
    leased(&mut c, n, "old", t(1)); // expire at t(21)
    let late = CapacityRequest {
        who: client("late"),
        resources: (0..n)
            .step_by(2)
            .map(|i| ask(&format!("db/{i}"), 4.0, None))
            .collect(),
    };
    c.get_capacity(t(15), &late).unwrap(); // even ids live on until t(35)

    let mut at = c.with_shard(0, |n, s| s.cleanup_step(n, t(25), 0));
    assert!(at.is_some(), "one step does not finish {n} resources");
    // Between steps: new resources appear.
    leased(&mut c, 10, "new", t(25)); // db/0..9 exist already: only leases added
    get(&mut c, t(25), "new", ask("db/fresh", 1.0, None));
    while let Some(from) = at {
        at = c.with_shard(0, |n, s| s.cleanup_step(n, t(25), from));
    }
    // Odd ids had only "old"'s lease, now expired; one pass may miss a
    // resource moved by a removal between steps, so run a second pass.
    c.cleanup(t(25));
    assert_eq!(
        c.resource_count(),
        n / 2 + 5 + 1,
        "even ids, odd 1..9, db/fresh"
    );
    assert_eq!(c.lease_count(), n / 2 + 10 + 1);
    assert_eq!(c.counters().expired_leases, n as u64);
}

#[test]
fn a_reload_rebinds_each_resource_when_it_is_next_touched() {
    let mut c = core_with(0);
    let n = 2 * SWEEP_STEP;
    leased_as(&mut c, "nolearn/", n, "a", t(1));
    let bigger = CFG.replace("capacity = 100\nsafe", "capacity = 250\nsafe");
    let old = c.replace_config(Arc::new(Config::parse(&bigger, "new.toml").unwrap()));
    assert_eq!(old.source(), "test.toml");

    // A request sees the new template at once ...
    let g = get(&mut c, t(2), "b", ask("nolearn/7", 300.0, None));
    assert_eq!(g.lease.capacity, 246.0, "250 minus the 4 client a holds");
    // ... and a status pass re-binds every resource it visits.
    let status = c.status(t(2), 0);
    assert!(status.resources.iter().all(|r| r.capacity == 250.0));
}

#[test]
fn a_reload_that_removes_a_template_retires_resources_lazily_and_keeps_leases_counted() {
    let mut c = core_with(0);
    let n = 2 * SWEEP_STEP;
    leased_as(&mut c, "nolearn/", n, "a", t(1)); // 4 each, until t(21)
    let without = CFG.replace(
        "identifier_glob = \"nolearn*\"",
        "identifier_glob = \"other\"",
    );
    c.replace_config(Arc::new(Config::parse(&without, "new.toml").unwrap()));

    // Untouched resources still hold their leases, counted against the old
    // capacity: a newcomer gets what is left of 100, not the unmatched grant.
    let g = get(&mut c, t(5), "b", ask("nolearn/3", 100.0, None));
    assert_eq!(g.lease.capacity, 96.0);
    assert!(
        g.lease.expiry <= t(21),
        "no lease outlives the retired template"
    );
    c.cleanup(t(10));
    assert_eq!(c.resource_count(), n, "retired, leases live");
    c.cleanup(t(21));
    assert_eq!(c.resource_count(), 0, "retired and expired: gone");
    let g = get(&mut c, t(22), "b", ask("nolearn/3", 100.0, None));
    assert_eq!(g.decision, Decision::Unmatched);
}
