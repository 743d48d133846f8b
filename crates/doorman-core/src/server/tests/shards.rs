//! The core in shards decides exactly as one core does (same grants in
//! the same order, same counters and status), files each resource in one
//! shard, and keeps an intermediate's upstream protocol whole. That the
//! server's locks neither deadlock nor over-grant under concurrent
//! requests is tested in `doorman-server` (tests/shards.rs).

use super::intermediate::parent_grant;
use super::*;

fn cfg() -> Arc<Config> {
    Arc::new(Config::parse(CFG, "test.toml").unwrap())
}

fn options(role: Role) -> CoreOptions {
    CoreOptions {
        role,
        server_id: "me:1".into(),
        min_request_interval: Span::secs(1),
        shadow_all: false,
    }
}

/// A small deterministic generator (xorshift), so the test needs no seed
/// plumbing and fails the same way every time.
struct Gen(u64);

impl Gen {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const IDS: &[&str] = &[
    "fair", "nolearn1", "nolearn2", "nolearn3", "db/a", "db/b", "db/c", "db/d", "other",
];

fn random_request(g: &mut Gen) -> CapacityRequest {
    let n = 1 + g.next(5) as usize;
    let resources = (0..n)
        .map(|_| {
            let id = IDS[g.next(IDS.len() as u64) as usize];
            let has = (g.next(3) == 0).then(|| g.next(60) as f64);
            ask(id, g.next(80) as f64, has)
        })
        .collect();
    CapacityRequest {
        who: client(&format!("c{}", g.next(12))),
        resources,
    }
}

#[test]
fn shards_decide_exactly_as_one_core() {
    let mut one = ServerCore::new(options(Role::Root), cfg());
    let mut sharded = ServerCore::with_shards(options(Role::Root), cfg(), 8);
    one.become_master(t(0));
    sharded.become_master(t(0));
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    for step in 0..3000 {
        let now = t(step / 10);
        let req = random_request(&mut g);
        if g.next(20) == 0 {
            let ids: Vec<String> = req
                .resources
                .iter()
                .map(|a| a.resource_id.clone())
                .collect();
            assert_eq!(one.release(&req.who, &ids), sharded.release(&req.who, &ids));
            continue;
        }
        let want = one.get_capacity(now, &req);
        assert_eq!(sharded.decide(now, &req).grants, want, "step {step}");
        if step % 250 == 0 {
            one.cleanup(now);
            sharded.cleanup(now);
        }
    }
    let now = t(300);
    assert_eq!(sharded.counters(), one.counters());
    assert_eq!(sharded.lease_count(), one.lease_count());
    assert_eq!(sharded.resource_count(), one.resource_count());
    assert_eq!(
        format!("{:?}", sharded.status(now, 100)),
        format!("{:?}", one.status(now, 100))
    );
}

#[test]
fn each_resource_lives_in_one_shard_and_requests_span_them() {
    let mut s = ServerCore::with_shards(options(Role::Root), cfg(), 4);
    s.become_master(t(0));
    let ids: Vec<String> = (0..64).map(|i| format!("db/{i}")).collect();
    let req = CapacityRequest {
        who: client("a"),
        resources: ids.iter().map(|id| ask(id, 1.0, None)).collect(),
    };
    let grants = s.decide(t(1), &req).grants.unwrap();
    let answered: Vec<&str> = grants.iter().map(|g| g.resource_id.as_str()).collect();
    assert_eq!(answered, ids.iter().map(String::as_str).collect::<Vec<_>>());
    let per_shard: Vec<usize> = (0..4)
        .map(|i| s.with_shard(i, |_, sh| sh.resource_count()))
        .collect();
    assert_eq!(per_shard.iter().sum::<usize>(), 64);
    assert!(per_shard.iter().all(|n| *n > 0), "{per_shard:?}");
    for id in &ids {
        let home = s.shard_index(id);
        let mut there = Vec::new();
        whole_pass(|from| s.with_shard(home, |n, sh| sh.status_step(n, t(1), 0, from, &mut there)));
        assert!(
            there.iter().any(|r| &r.id == id),
            "{id} not in shard {home}"
        );
    }
}

#[test]
fn a_standby_redirects_whatever_the_request_names() {
    let mut s = ServerCore::with_shards(options(Role::Root), cfg(), 4);
    s.step_down(Some("master:1".into()));
    for resources in [
        vec![],
        vec![ask("db/a", 1.0, None)],
        vec![ask("db/a", 1.0, None), ask("db/q", 1.0, None)],
    ] {
        let req = CapacityRequest {
            who: client("a"),
            resources,
        };
        let Err(Refusal::NotMaster(m)) = s.decide(t(1), &req).grants else {
            panic!("a standby must refuse");
        };
        assert_eq!(m.master_address.as_deref(), Some("master:1"));
    }
    assert!(s.release(&client("a"), &[]).is_err(), "release too");
}

#[test]
fn an_intermediate_asks_for_all_shards_at_once_and_files_the_answer_back() {
    let mut leaf =
        ServerCore::with_shards(options(Role::Intermediate), Arc::new(Config::empty()), 4);
    leaf.become_master(t(0));
    let ids: Vec<String> = ["r", "s", "u", "v", "w"].map(String::from).to_vec();
    for id in &ids {
        let req = CapacityRequest {
            who: client("a"),
            resources: vec![ask(id, 10.0, None)],
        };
        assert!(
            leaf.decide(t(1), &req).wake_upstream,
            "a new resource wakes"
        );
    }
    let asks = leaf.upstream_request(t(1)).expect("due at once");
    let asked: Vec<&str> = asks.iter().map(|a| a.resource_id.as_str()).collect();
    assert_eq!(
        asked,
        ["r", "s", "u", "v", "w"],
        "one request, sorted by id"
    );
    let grants: Vec<UpstreamGrant> = ids
        .iter()
        .map(|id| UpstreamGrant {
            resource_id: id.clone(),
            ..parent_grant(40.0, 61, 8, 0)
        })
        .collect();
    leaf.upstream_response(t(1), &ids, &grants);
    leaf.readiness(t(2)).unwrap();
    let status = leaf.status(t(2), 10);
    assert!(status
        .resources
        .iter()
        .all(|r| r.upstream.as_ref().is_some_and(|u| u.capacity == 40.0)));
    assert!(leaf.next_upstream_wakeup().is_some());
    // Past the parent's lease every shard's resources are cut off.
    let why = leaf.readiness(t(70)).unwrap_err();
    assert_eq!(why, NotReady::CutOff(5));
}
