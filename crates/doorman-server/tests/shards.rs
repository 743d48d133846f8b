//! The server's locks on the core (`core_locks.rs`): the same decisions
//! as the core held plainly, and no deadlock or over-grant under
//! concurrent requests, in opposite orders, across shards and through
//! changes of mastership.

use std::sync::Arc;

use doorman_core::config::Config;
use doorman_core::server::{
    CapacityRequest, CoreOptions, ResourceAsk, Role, ServerCore, Sharded, Who,
};
use doorman_lease::{Amount, Demand, Span, Time};
use doorman_state::core_locks::LockedCore;
use doorman_testkit::config::{Resource, TestConfig};

fn cfg() -> Arc<Config> {
    TestConfig::new()
        .resource(Resource::fair("fair", 100.0).lease(60).refresh(10))
        .resource(
            Resource::new("nolearn*", 100.0, "PROPORTIONAL_SHARE")
                .lease(20)
                .refresh(8),
        )
        .parse()
}

fn options() -> CoreOptions {
    CoreOptions {
        role: Role::Root,
        server_id: "me:1".into(),
        min_request_interval: Span::secs(1),
        shadow_all: false,
    }
}

fn t(s: i64) -> Time {
    Time::from_secs(1_000_000 + s)
}

fn request(who: &str, ids: &[&str], wants: f64) -> CapacityRequest {
    CapacityRequest {
        who: Who::Client(Arc::from(who)),
        resources: ids
            .iter()
            .map(|id| ResourceAsk {
                resource_id: id.to_string(),
                demands: vec![Demand::client(0, Amount::new("w", wants).unwrap())],
                claim: None,
                outstanding: None,
            })
            .collect(),
    }
}

const IDS: [&str; 4] = ["fair", "nolearn1", "nolearn2", "nolearn3"];

/// Σ granted per resource never above its capacity (100).
fn assert_within_capacity(core: &LockedCore, now: Time) {
    let status = (&*core).status(now, 0);
    assert_eq!(status.resources.len(), IDS.len());
    for r in &status.resources {
        assert!(
            r.has <= r.capacity + 1e-9,
            "{}: {} > {}",
            r.id,
            r.has,
            r.capacity
        );
    }
}

#[test]
fn the_locked_core_decides_as_the_plain_one() {
    let locked = LockedCore::new(options(), cfg(), 8);
    let mut plain = ServerCore::with_shards(options(), cfg(), 8);
    (&locked).become_master(t(0));
    plain.become_master(t(0));
    for i in 0..400 {
        let ids = &IDS[i % 3..];
        let req = request(&format!("c{}", i % 17), ids, (i % 70) as f64);
        let now = t(1 + i as i64 / 20);
        assert_eq!(
            (&locked).decide(now, &req).grants,
            plain.decide(now, &req).grants,
            "request {i}"
        );
    }
    let now = t(30);
    assert_eq!(
        format!("{:?}", (&locked).status(now, 100)),
        format!("{:?}", plain.status(now, 100))
    );
}

#[test]
fn concurrent_requests_across_shards_neither_deadlock_nor_overgrant() {
    let core = Arc::new(LockedCore::new(options(), cfg(), 4));
    (&*core).become_master(t(0));
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let core = core.clone();
            std::thread::spawn(move || {
                for i in 0..2000 {
                    // Opposite orders on alternate threads.
                    let mut ids = IDS;
                    if n % 2 == 1 {
                        ids.reverse();
                    }
                    let req = request(&format!("c{n}-{}", i % 50), &ids, 7.0);
                    (&*core).decide(t(31 + i / 100), &req).grants.unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert_within_capacity(&core, t(51));
}

/// Mastership changes (the node's lock, exclusive) while requests and
/// sweeps hold shards: every request is answered or refused, never
/// stuck, and what a master hands out stays within capacity.
#[test]
fn mastership_changes_under_load_neither_deadlock_nor_overgrant() {
    let core = Arc::new(LockedCore::new(options(), cfg(), 4));
    (&*core).become_master(t(0));
    let workers: Vec<_> = (0..3)
        .map(|n| {
            let core = core.clone();
            std::thread::spawn(move || {
                for i in 0..1500 {
                    let req = request(&format!("c{n}-{}", i % 40), &IDS, 9.0);
                    let _ = (&*core).decide(t(1 + i / 100), &req).grants;
                    if i % 100 == 0 {
                        (&*core).cleanup(t(1 + i / 100));
                    }
                }
            })
        })
        .collect();
    for k in 0..200 {
        match k % 2 {
            0 => (&*core).step_down(Some("other:1".into())),
            _ => (&*core).become_master(t(k)),
        }
    }
    for w in workers {
        w.join().unwrap();
    }
    (&*core).become_master(t(20));
    let req = request("last", &IDS, 30.0);
    let grants = (&*core).decide(t(20), &req).grants.unwrap();
    assert_eq!(grants.len(), IDS.len(), "a fresh master starts empty");
    assert_within_capacity(&core, t(20));
}
