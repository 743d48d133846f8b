//! Master election with a real etcd (started per test on free loopback
//! ports) and an in-memory election.

use doorman_testkit::rpc as common;

use common::assert_redirects;
use doorman_core::server::Sharded;
use doorman_testkit::{eventually, eventually_async};

use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, Mode, RateOptions};
use doorman_election::Election;
use doorman_etcd::EtcdElection;
use doorman_proto::doorman as pb;
use doorman_server::server::{start, ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::EtcdProcess;
use doorman_testkit::InMemoryElection;
use doorman_testkit::IsolatedServer;

/// Leases of 10 s refreshed every second; learning mode of 3 s.
fn config(capacity: f64) -> TestConfig {
    TestConfig::new().resource(
        Resource::fair("*", capacity)
            .lease(10)
            .refresh(1)
            .learning(3),
    )
}

fn etcd() -> EtcdProcess {
    EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"))
}

fn opts(election: Arc<dyn Election>) -> ServerOptions {
    let cfg = config(100.0).parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    o.election = election;
    o
}

fn etcd_election(e: &EtcdProcess, ttl: u64) -> Arc<dyn Election> {
    Arc::new(EtcdElection {
        etcd: e.endpoints().into(),
        key: "/doorman/test".into(),
        ttl: Duration::from_secs(ttl),
    })
}

fn is_master(s: &IsolatedServer) -> bool {
    s.state.core().is_master()
}

/// Asks for "r" once as client "probe" (so the resource exists): what it
/// got, and how long the server still learns.
fn probe(s: &IsolatedServer) -> (f64, f64) {
    use doorman_core::server::{CapacityRequest, ResourceAsk, Who};
    let now = doorman_server::lease_clock();
    let ask = ResourceAsk {
        resource_id: "r".into(),
        demands: vec![doorman_lease::Demand::new(0, 1, 10.0).unwrap()],
        claim: None,
        outstanding: None,
    };
    let req = CapacityRequest {
        who: Who::Client(Arc::from("probe")),
        resources: vec![ask],
    };
    let got = s.state.core().decide(now, &req).grants.expect("answered");
    let left = s.state.core().status(now, 0).resources[0].learning_remaining;
    (got[0].lease.capacity, left)
}

fn learning_left(s: &IsolatedServer) -> f64 {
    probe(s).1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_key_elect_exactly_one_master() {
    let e = etcd();
    let a = IsolatedServer::start(opts(etcd_election(&e, 2))).unwrap();
    let b = IsolatedServer::start(opts(etcd_election(&e, 2))).unwrap();
    eventually("a master", Duration::from_secs(5), || {
        is_master(&a) || is_master(&b)
    })
    .await;
    let (m, s) = if is_master(&a) { (&a, &b) } else { (&b, &a) };
    eventually(
        "the standby knows the master",
        Duration::from_secs(5),
        || s.state.core().master_address().as_deref() == Some(m.addr().as_str()),
    )
    .await;
    for _ in 0..20 {
        assert!(is_master(m) && !is_master(s), "exactly one master");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_redirects(&s.addr(), Some(&m.addr())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_replaced_within_ttl_and_the_new_one_learns() {
    let e = etcd();
    let a = IsolatedServer::start(opts(etcd_election(&e, 2))).unwrap();
    eventually("a is master", Duration::from_secs(5), || is_master(&a)).await;
    let b = IsolatedServer::start(opts(etcd_election(&e, 2))).unwrap();
    let client = Client::builder()
        .servers([a.addr(), b.addr()])
        .fallback(Fallback::Pessimistic)
        .rpc_timeout(Duration::from_millis(500))
        .backoff(Duration::from_millis(50), Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let r = client.rate_resource("r", RateOptions::wants(30.0)).unwrap();
    // a is learning for 3 s (a newcomer gets 0), then grants 30.
    eventually("30 from a", Duration::from_secs(8), || r.capacity() == 30.0).await;
    let b_addr = b.addr();
    a.kill();
    // The lease outlives a's last keep-alive by the 2 s TTL; etcd revokes
    // expired leases in a 500 ms loop, and a loaded 2-core CI machine
    // running other tests adds scheduling delay: 6 s still tells a TTL-bound
    // takeover from one that waits for anything longer (the default TTL is
    // 10 s).
    eventually("b is master", Duration::from_secs(6), || is_master(&b)).await;
    // b is in learning mode: the client's claimed 30 is echoed, not cut to 0.
    eventually("the client reached b", Duration::from_secs(5), || {
        b.state.core().lease_count() == 1
    })
    .await;
    let st = b.state.core().status(doorman_server::lease_clock(), 10);
    assert!(st.resources[0].learning, "the new master is learning");
    assert_eq!(st.resources[0].leases[0].has, 30.0, "claimed has echoed");
    assert_eq!((r.mode(), r.capacity()), (Mode::Lease, 30.0));
    assert_eq!(st.master_address.as_deref(), Some(b_addr.as_str()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// A graceful stop resigns: the standby takes over well before the 10 s
/// TTL would let it (usually within a few hundred milliseconds; the bound
/// leaves room for a loaded 2-core machine and still rules out waiting for
/// the TTL).
async fn graceful_shutdown_hands_over_without_waiting_for_the_ttl() {
    let e = etcd();
    let a = start(opts(etcd_election(&e, 10))).await.unwrap();
    eventually("a is master", Duration::from_secs(5), || {
        a.state.core().is_master()
    })
    .await;
    let b = IsolatedServer::start(opts(etcd_election(&e, 10))).unwrap();
    eventually("b is a standby", Duration::from_secs(5), || {
        b.state.core().master_address().as_deref() == Some(a.grpc_addr.to_string().as_str())
    })
    .await;
    let t = Instant::now();
    a.shutdown().await;
    eventually("b takes over", Duration::from_secs(8), || is_master(&b)).await;
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "handover took {took:?} (TTL is 10 s)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restarting_within_the_ttl_keeps_the_master() {
    let mut e = etcd();
    let a = IsolatedServer::start(opts(etcd_election(&e, 4))).unwrap();
    eventually("a is master", Duration::from_secs(5), || is_master(&a)).await;
    e.stop();
    let restart_at = Instant::now() + Duration::from_millis(700);
    while Instant::now() < restart_at {
        assert!(is_master(&a), "stepped down while etcd was briefly away");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    e.restart().unwrap();
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        assert!(
            is_master(&a),
            "stepped down although the lease survived the etcd restart"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_gone_longer_than_the_ttl_makes_the_master_step_down() {
    let mut e = etcd();
    let a = IsolatedServer::start(opts(etcd_election(&e, 2))).unwrap();
    eventually("a is master", Duration::from_secs(5), || is_master(&a)).await;
    let b = IsolatedServer::start(opts(etcd_election(&e, 2))).unwrap();
    eventually("b knows a is master", Duration::from_secs(5), || {
        b.state.core().master_address().as_deref() == Some(a.addr().as_str())
    })
    .await;
    let gauge = |s: &IsolatedServer, name: &str| common::metric(&s.state.metrics_text(), name);
    assert_eq!(gauge(&a, "doorman_server_election_session_up"), Some(1.0));
    assert_eq!(gauge(&b, "doorman_server_master_known"), Some(1.0));
    let became = "doorman_server_master_transitions_total";
    assert_eq!(gauge(&a, became), Some(1.0));
    e.stop();
    let took = eventually("a steps down", Duration::from_secs(4), || !is_master(&a)).await;
    assert!(
        took <= Duration::from_secs(3),
        "TTL 2 s: stepped down after {took:?}"
    );
    assert_eq!(a.state.core().lease_count(), 0);
    // Neither knows a current master: both say so instead of redirecting
    // to a master that may be gone.
    eventually("b forgets the master", Duration::from_secs(4), || {
        b.state.core().master_address().is_none()
    })
    .await;
    common::assert_unavailable_standby(&a.addr()).await;
    common::assert_unavailable_standby(&b.addr()).await;
    assert_eq!(gauge(&a, "doorman_server_election_session_up"), Some(0.0));
    assert_eq!(gauge(&a, "doorman_server_master_known"), Some(0.0));
    assert_eq!(
        gauge(&a, became),
        Some(2.0),
        "became, then stopped being master"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_election_hands_over_on_abdication() {
    let election = InMemoryElection::new();
    // The first candidate to run wins: let a's election task run before b
    // exists (each server has its own runtime, so b could otherwise be first).
    let a = IsolatedServer::start(opts(Arc::new(election.clone()))).unwrap();
    eventually("a master", Duration::from_secs(2), || is_master(&a)).await;
    let b = IsolatedServer::start(opts(Arc::new(election.clone()))).unwrap();
    eventually("b knows a is master", Duration::from_secs(2), || {
        b.state.core().master_address().as_deref() == Some(a.addr().as_str())
    })
    .await;
    assert!(is_master(&a) && !is_master(&b));
    assert_redirects(&b.addr(), Some(&a.addr())).await;
    election.abdicate();
    eventually("b master", Duration::from_secs(2), || {
        is_master(&b) && !is_master(&a)
    })
    .await;
    assert_eq!(election.master(), Some(b.addr()));
    assert_redirects(&a.addr(), Some(&b.addr())).await;
}

/// Leaving mastership goes: stop granting, publish, release the election.
/// While the leaving master's core is held (so it cannot have stopped
/// granting yet), no successor may win; once released, one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::await_holding_lock)] // on purpose: see `held` below
async fn a_leaving_master_stops_granting_before_a_successor_can_win() {
    let e = etcd();
    let m = start(opts(etcd_election(&e, 6))).await.unwrap();
    let m_state = m.state.clone();
    eventually("m is master", Duration::from_secs(5), || {
        m_state.core().is_master()
    })
    .await;
    let s = IsolatedServer::start(opts(etcd_election(&e, 6))).unwrap();
    eventually("s knows the master", Duration::from_secs(5), || {
        s.state.core().master_address().is_some()
    })
    .await;

    // Held on purpose across the awaits below: the test is that nothing
    // can proceed past "stop granting" while the core's node is held
    // (stepping down changes it, under its lock).
    let held = m_state.core().read_node();
    let stopping = tokio::spawn(m.shutdown());
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !is_master(&s),
            "a successor won while the old master could still grant"
        );
    }
    assert!(held.is_master(), "still held, so still granting");
    drop(held);
    eventually("s takes over", Duration::from_secs(3), || is_master(&s)).await;
    assert!(!m_state.core().is_master());
    stopping.await.unwrap();
}

/// The election's keep-alives (every third of a 1 s TTL here), its
/// sessions and the connections' own HTTP/2 pings never disturb the config
/// watch: in 12 s no watch restart, one config load, and a pushed change
/// still arrives. (etcd, with its default `--grpc-keepalive-min-time` of
/// 5 s, closes a connection that pings more often with GOAWAY
/// `too_many_pings` after about 8 s: pings every 2 s restarted the watch
/// every 8 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_keep_alives_leave_the_config_watch_alone() {
    let e = etcd();
    let cfg_key = "/doorman/config";
    let etcd_opts = e.endpoints().into();
    let put = |capacity: u32| {
        let text = config(f64::from(capacity)).toml();
        let opts = &etcd_opts;
        async move { doorman_etcd::audit::push(opts, cfg_key, &text, "test", "push").await }
    };
    put(100).await.unwrap();
    let mut o = opts(etcd_election(&e, 1));
    o.config = ConfigSource::Etcd {
        etcd: e.endpoints().into(),
        key: cfg_key.into(),
    };
    let s = IsolatedServer::start(o).unwrap();
    eventually("master", Duration::from_secs(5), || is_master(&s)).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(s.state.metrics.config_watch_restarts(), 0);
    let loads = |s: &IsolatedServer| {
        let text = s.state.metrics_text();
        common::metric(&text, "doorman_server_config_reloads_total{result=\"ok\"}")
    };
    assert_eq!(loads(&s), Some(1.0), "the config was read once");
    put(70).await.unwrap();
    eventually("the change arrives", Duration::from_secs(3), || {
        s.state.core().config().templates()[0].capacity == 70.0
    })
    .await;
    assert_eq!(s.state.metrics.config_watch_restarts(), 0);
}

/// The lease horizon record (`/doorman/test.horizon`): the first master
/// finds none and learns for its full learning time; it keeps a record of
/// how long its leases can last; a standby that saw it lead learns only
/// until then when it takes over, and serves at once if the record has
/// passed by then; a server that saw no leader before it won (it may have
/// missed one that kept no record) learns for the full time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_master_learns_only_as_long_as_the_recorded_leases_last() {
    // Leases of 2 s, learning for 60 s (longer than any lease: the record
    // is what ends it).
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(2).refresh(1).learning(60))
        .parse();
    let with_config = |election| {
        let mut o = opts(election);
        o.config = ConfigSource::Inline(cfg.clone());
        o
    };
    let e = etcd();
    let mut etcd_client = etcd_client::Client::connect(e.endpoints(), None)
        .await
        .unwrap();
    // When the record ends, by etcd's word (`lease ID WRITER`: what is
    // left of the etcd lease, whole seconds rounded down), on this clock.
    let record = |c: &mut etcd_client::Client| {
        let mut c = c.clone();
        async move {
            let r = c.get("/doorman/test.horizon", None).await.unwrap();
            let text = r.kvs().first()?.value_str().unwrap().to_string();
            let id = text.split(' ').nth(1).unwrap();
            let id = i64::from_str_radix(id, 16).unwrap();
            let ttl = c.lease_time_to_live(id, None).await.unwrap().ttl();
            let left = doorman_lease::Span::secs(ttl.max(0));
            Some(doorman_server::lease_clock() + left)
        }
    };
    assert_eq!(
        record(&mut etcd_client).await,
        None,
        "a fresh etcd has no record"
    );

    // a: TTL 2 s; b: TTL 25 s, so that after b dies its key (and so
    // b's mastership) lasts longer than its record reaches: b's record is
    // at most 12 s (2 s leases + 10 s) beyond its death, +2 s for clocks;
    // its key lasts at least 25 − 25/3 s.
    let a = IsolatedServer::start(with_config(etcd_election(&e, 2))).unwrap();
    eventually("a is master", Duration::from_secs(5), || is_master(&a)).await;
    assert!(learning_left(&a) > 50.0, "no record: the full 60 s");
    let written = record(&mut etcd_client)
        .await
        .expect("a recorded a horizon");
    let now = doorman_server::lease_clock();
    assert!(
        written > now && written <= now + doorman_lease::Span::secs(2 + 10 + 2),
        "{written:?} vs {now:?}"
    );

    let b = IsolatedServer::start(with_config(etcd_election(&e, 25))).unwrap();
    eventually("b is a standby", Duration::from_secs(5), || {
        b.state.core().master_address().is_some()
    })
    .await;
    a.kill();
    eventually("b is master", Duration::from_secs(6), || is_master(&b)).await;
    let left = learning_left(&b);
    assert!(
        left > 0.0 && left <= 15.0,
        "b learns until a's record (+2 s), not 60 s: {left} s"
    );
    let ends = record(&mut etcd_client).await.unwrap();
    // (Each reading rounds down to whole seconds.)
    assert!(
        ends + doorman_lease::Span::secs(1) >= written,
        "b's record is not before a's"
    );

    // c watches b lead; b dies, and c wins only when b's key expires,
    // after b's record has passed: nothing left to learn.
    // (c's own TTL of 10 s keeps its session, and so its sight of b,
    // through a loaded machine's hiccups.)
    let c = IsolatedServer::start(with_config(etcd_election(&e, 10))).unwrap();
    eventually("c is a standby", Duration::from_secs(5), || {
        c.state.core().master_address() == Some(b.addr())
    })
    .await;
    b.kill();
    eventually("c is master", Duration::from_secs(35), || is_master(&c)).await;
    let left = learning_left(&c);
    let past = record(&mut etcd_client).await.unwrap();
    assert_eq!(
        left,
        0.0,
        "c serves at once (record {past:?}, now {:?})",
        doorman_server::lease_clock()
    );

    // d starts after c's key is gone: it saw no leader before it won, so
    // it cannot rule out a master that kept no record: the full 60 s.
    c.kill();
    let keys = || {
        let mut client = etcd_client.clone();
        async move {
            let prefix = etcd_client::GetOptions::new().with_prefix();
            let r = client.get("/doorman/test/", Some(prefix)).await.unwrap();
            r.kvs().is_empty()
        }
    };
    eventually_async(
        "c's election key expires (TTL 10 s)",
        Duration::from_secs(25),
        keys,
    )
    .await;
    let d = IsolatedServer::start(with_config(etcd_election(&e, 2))).unwrap();
    eventually("d is master", Duration::from_secs(8), || is_master(&d)).await;
    assert!(learning_left(&d) > 50.0, "d learns for the full time");
}

/// A master paused past its election lease (its host stopped, then
/// resumed) answers the requests queued meanwhile before its election
/// task has noticed anything: neither Discovery nor GetCapacity may then
/// take it for the master. The pause is its clock jumping past the lease
/// (a `ManualClock`): the core sees the time pass, the election's own
/// timers, which would step it down, do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_resumed_past_its_lease_claims_nothing() {
    let e = etcd();
    let clock = doorman_testkit::ManualClock::new();
    let mut o = opts(etcd_election(&e, 9));
    o.clock = clock.clock();
    let m = IsolatedServer::start(o).unwrap();
    eventually("master", Duration::from_secs(5), || is_master(&m)).await;
    let mut c = common::client(m.grpc_addr).await;
    let d = c.discovery(pb::DiscoveryRequest {}).await.unwrap();
    assert!(d.get_ref().is_master, "master before the pause");
    clock.advance(10.0);
    let d = c.discovery(pb::DiscoveryRequest {}).await.unwrap();
    assert!(!d.get_ref().is_master, "{:?}", d.get_ref());
    let r = c
        .get_capacity(pb::GetCapacityRequest {
            client_id: "a".into(),
            resource: vec![common::rr("r", 1.0, None)],
        })
        .await
        .expect_err("no grant from a master that cannot prove it is one");
    assert_eq!(r.code(), tonic::Code::Unavailable, "{r:?}");
}

/// The horizon record does not depend on the masters' wall clocks: a
/// master whose clock is 30 s behind records how long its leases last,
/// and a successor with a true clock still learns until they have ended
/// (with a wall-clock record it took them for 18 s past and served at
/// once, while the leases, measured on their holders' own clocks, ran on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_learns_for_a_skewed_masters_leases() {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(10).refresh(1).learning(60))
        .parse();
    let e = etcd();
    let mut oa = opts(etcd_election(&e, 2));
    oa.config = ConfigSource::Inline(cfg.clone());
    oa.clock = Arc::new(|| doorman_server::lease_clock() - doorman_lease::Span::secs(30));
    let a = IsolatedServer::start(oa).unwrap();
    eventually("a is master", Duration::from_secs(5), || is_master(&a)).await;
    let mut ob = opts(etcd_election(&e, 2));
    ob.config = ConfigSource::Inline(cfg);
    let b = IsolatedServer::start(ob).unwrap();
    eventually("b is a standby", Duration::from_secs(5), || {
        b.state.core().master_address().is_some()
    })
    .await;
    a.kill();
    eventually("b is master", Duration::from_secs(8), || is_master(&b)).await;
    let (got, left) = probe(&b);
    assert_eq!(got, 0.0, "a newcomer gets nothing while b learns");
    assert!(left > 3.0, "b learns for a's leases: {left} s");
}
