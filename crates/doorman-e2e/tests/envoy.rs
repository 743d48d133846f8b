//! Envoy's rate limit services against a real Envoy 1.40 (installed by
//! `scripts/envoy-setup.sh`) with the configs in `deploy/envoy/`: the
//! fleet-wide admitted rate follows the resource's capacity through RLS and
//! RLQS (one Envoy, two Envoys, two leaves), a config push changes it within
//! a refresh for both, a killed Doorman server lets RLS traffic through
//! (Envoy's default failure mode) or refuses it (`failure_mode_deny`),
//! RLQS keeps limiting by its assignment meanwhile, both limit again once
//! it is back, Envoy's `x-ratelimit-*` headers come from the answers, and
//! a leaf serves RLS with capacity from its root shared with ordinary
//! clients, and an Envoy reaching Doorman over mutual TLS is admitted by
//! its certificate's identity (an access rule) while one of another
//! identity, or without a certificate, is refused.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use doorman_core::config::Config;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::envoy::{get_full, offer, Counts, EnvoyProcess};
use doorman_testkit::{eventually_blocking, free_port, IsolatedServer};

/// Capacity of `edge/*`, requests per second.
const C: f64 = 20.0;

fn config(capacity: f64) -> String {
    let edge = Resource::fair("edge/*", capacity).lease(20).refresh(2);
    TestConfig::new().resource(edge).toml()
}

fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port().expect("a free port")))
}

fn server(listen: SocketAddr, file: &Path, parent: Option<&IsolatedServer>) -> IsolatedServer {
    let source = match parent {
        None => ConfigSource::File(file.to_path_buf()),
        // A leaf without a config of its own: the parent's applies.
        Some(_) => ConfigSource::Inline(Arc::new(Config::empty())),
    };
    let mut o = ServerOptions::new(listen, source);
    o.reload_interval = Duration::from_millis(200);
    if let Some(p) = parent {
        o.parent = vec![p.addr()];
    }
    IsolatedServer::start(o).expect("server starts")
}

fn write_config(dir: &Path, capacity: f64) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, config(capacity)).expect("config written");
    path
}

/// A Doorman server on an address that stays the same across a restart,
/// and an Envoy (`yaml`) sending to it.
struct Restartable {
    _dir: tempfile::TempDir,
    file: PathBuf,
    listen: SocketAddr,
    envoy: EnvoyProcess,
}

impl Restartable {
    fn start(yaml: &str) -> (Self, IsolatedServer) {
        let dir = tempfile::tempdir().unwrap();
        let file = write_config(dir.path(), C);
        let listen = free_addr();
        let doorman = server(listen, &file, None);
        let envoy = EnvoyProcess::start(yaml, listen.port()).expect("envoy");
        let rig = Restartable {
            _dir: dir,
            file,
            listen,
            envoy,
        };
        (rig, doorman)
    }

    /// Starts Doorman again on the same address and config, lets Envoy
    /// find it for `warmup` seconds, and checks it admits the capacity.
    fn restart_and_limit_again(&self, warmup: f64) {
        let _doorman = server(self.listen, &self.file, None);
        offer(self.envoy.listen, 3.0 * C, warmup, &[]);
        let got = offer(self.envoy.listen, 3.0 * C, 10.0, &[]);
        assert_admits(&got, C, 0.10);
    }
}

/// A Doorman server with the config `file` and two Envoys using RLQS
/// against it, after 12 s of 1.5 C each: both want more than half, and two
/// usage reports (about 10 s) have made the demand known.
fn two_rlqs_envoys(file: &Path) -> (IsolatedServer, [EnvoyProcess; 2]) {
    let doorman = server(free_addr(), file, None);
    let port = doorman.grpc_addr.port();
    let pair = [
        EnvoyProcess::start("rlqs.yaml", port).expect("envoy a"),
        EnvoyProcess::start("rlqs.yaml", port).expect("envoy b"),
    ];
    offer_both(&pair, 1.5 * C, 12.0);
    (doorman, pair)
}

fn within(measured: f64, target: f64, share: f64) -> bool {
    (measured - target).abs() <= share * target
}

/// The load admitted `target` per second within `share`.
fn assert_admits(got: &Counts, target: f64, share: f64) {
    let rate = got.ok_rate();
    assert!(
        within(rate, target, share),
        "admitted {rate}/s of {target}: {got:?}"
    );
}

/// Offers `rate` requests a second to each of two Envoys at once for `secs`.
fn offer_both(pair: &[EnvoyProcess; 2], rate: f64, secs: f64) -> (Counts, Counts) {
    let load = |e: &EnvoyProcess| {
        let addr = e.listen;
        std::thread::spawn(move || offer(addr, rate, secs, &[]))
    };
    let (a, b) = (load(&pair[0]), load(&pair[1]));
    (a.join().unwrap(), b.join().unwrap())
}

#[test]
fn rls_one_envoy_admits_the_capacity_and_follows_a_config_push() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), C);
    let doorman = server(free_addr(), &file, None);
    let envoy = EnvoyProcess::start("rls.yaml", doorman.grpc_addr.port()).expect("envoy");
    offer(envoy.listen, 3.0 * C, 5.0, &[]); // warm-up: demand becomes known
    let got = offer(envoy.listen, 3.0 * C, 20.0, &[]);
    assert_admits(&got, C, 0.10);
    assert!(got.limited > 0 && got.other == 0, "{got:?}");
    assert!(envoy.stat("cluster.backend.ratelimit.over_limit") > 0);
    assert_eq!(
        envoy.stat("cluster.backend.ratelimit.error"),
        0,
        "{}",
        envoy.log()
    );
    assert!(doorman.requests("ShouldRateLimit") > 0);

    // Halve the capacity; after one refresh (2 s) plus the file poll the
    // new rate holds.
    write_config(dir.path(), C / 2.0);
    std::thread::sleep(Duration::from_millis(2500));
    let got = offer(envoy.listen, 3.0 * C, 10.0, &[]);
    assert_admits(&got, C / 2.0, 0.10);
}

#[test]
fn rls_fails_open_while_doorman_is_down_and_limits_again_after_a_restart() {
    let (rig, doorman) = Restartable::start("rls.yaml");
    offer(rig.envoy.listen, 3.0 * C, 5.0, &[]);
    doorman.kill();
    // Envoy's default (failure_mode_deny: false): everything passes.
    let got = offer(rig.envoy.listen, 3.0 * C, 4.0, &[]);
    assert_eq!(got.ok, (3.0 * C * 4.0) as u64, "{got:?}");
    assert!(
        rig.envoy
            .stat("cluster.backend.ratelimit.failure_mode_allowed")
            > 0
    );
    rig.restart_and_limit_again(5.0);
}

#[test]
fn rlqs_two_envoys_share_the_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let (doorman, pair) = two_rlqs_envoys(&write_config(dir.path(), C));
    let (ga, gb) = offer_both(&pair, 1.5 * C, 20.0);
    let (ra, rb) = (ga.ok_rate(), gb.ok_rate());
    assert!(
        within(ra + rb, C, 0.10),
        "admitted {ra} + {rb} of {C}: {ga:?} {gb:?}"
    );
    assert!(within(ra, rb, 0.15), "unequal: {ra} vs {rb}");
    assert!(ga.limited > 0 && gb.limited > 0, "{ga:?} {gb:?}");
    let status = doorman.state.status(10);
    let r = status
        .resources
        .iter()
        .find(|r| r.id == "edge/name=default");
    assert_eq!(r.map(|r| r.leases.len()), Some(2), "two RLQS clients");
    // Closing the streams releases the leases.
    drop(pair);
    eventually_blocking("leases released", Duration::from_secs(5), || {
        let status = doorman.state.status(10);
        status
            .resources
            .iter()
            .find(|r| r.id == "edge/name=default")
            .is_none_or(|r| r.leases.is_empty())
    });
}

#[test]
fn a_leaf_serves_rls_with_its_roots_capacity_shared_with_clients() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), C);
    let root = server(free_addr(), &file, None);
    let leaf = server(free_addr(), &file, Some(&root));
    let envoy = EnvoyProcess::start("rls.yaml", leaf.grpc_addr.port()).expect("envoy");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async {
        doorman_client::Client::builder()
            .servers([root.addr()])
            .client_id("ordinary")
            .build()
            .await
            .expect("client")
    });
    let res = rt.block_on(async {
        client
            .rate_resource(
                "edge/generic_key=api",
                doorman_client::RateOptions::wants(100.0),
            )
            .expect("resource")
    });
    offer(envoy.listen, 3.0 * C, 8.0, &[]);
    let got = offer(envoy.listen, 3.0 * C, 20.0, &[]);
    // FAIR_SHARE between the leaf (Envoy's demand) and the client: C/2 each.
    assert_admits(&got, C / 2.0, 0.15);
    let theirs = res.capacity();
    assert!(within(theirs, C / 2.0, 0.15), "the client has {theirs}");
    rt.block_on(client.close());
}

#[test]
fn rls_fails_closed_when_envoy_is_configured_to() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), C);
    let doorman = server(free_addr(), &file, None);
    let deny = [("failure_mode_deny: false", "failure_mode_deny: true")];
    let envoy =
        EnvoyProcess::start_with("rls.yaml", doorman.grpc_addr.port(), &deny).expect("envoy");
    offer(envoy.listen, 3.0 * C, 3.0, &[]);
    doorman.kill();
    // failure_mode_deny: true: nothing passes while Doorman is away.
    let got = offer(envoy.listen, 2.0 * C, 3.0, &[]);
    assert_eq!((got.ok, got.limited), (0, 0), "{got:?}");
    assert_eq!(got.other, (2.0 * C * 3.0) as u64, "{got:?}");
}

#[test]
fn rls_answers_give_envoy_its_x_ratelimit_headers() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), C);
    let doorman = server(free_addr(), &file, None);
    let envoy = EnvoyProcess::start("rls.yaml", doorman.grpc_addr.port()).expect("envoy");
    offer(envoy.listen, 3.0 * C, 5.0, &[]);
    let (code, headers, _) = get_full(envoy.listen, "/", &[]).expect("answered");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name}: {headers:?}"))
    };
    // DRAFT_VERSION_03: "x-ratelimit-limit: 20, 20;w=1" (the limit and its
    // window in seconds), remaining requests, seconds until reset.
    let limit = header("x-ratelimit-limit");
    assert!(limit.starts_with("20, 20;w=1"), "{limit}");
    let remaining: u64 = header("x-ratelimit-remaining").parse().expect("a number");
    assert!(remaining <= 20, "{remaining}");
    let reset: u64 = header("x-ratelimit-reset").parse().expect("a number");
    assert!(reset <= 1, "a second's bucket: {reset}");
    assert!(code == 200 || code == 429, "{code}");
}

#[test]
fn rlqs_follows_a_config_push_within_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let (_doorman, pair) = two_rlqs_envoys(&write_config(dir.path(), C));
    // Halve the capacity: one refresh (2 s) after the file poll, the next
    // assignments carry the new rate.
    write_config(dir.path(), C / 2.0);
    std::thread::sleep(Duration::from_millis(2500));
    let (ga, gb) = offer_both(&pair, 1.5 * C, 10.0);
    let sum = ga.ok_rate() + gb.ok_rate();
    assert!(
        within(sum, C / 2.0, 0.10),
        "admitted {sum}/s of {}: {ga:?} {gb:?}",
        C / 2.0
    );
}

#[test]
fn rlqs_keeps_its_assignment_while_doorman_is_down_and_limits_again_after_a_restart() {
    let (rig, doorman) = Restartable::start("rlqs.yaml");
    offer(rig.envoy.listen, 3.0 * C, 12.0, &[]);
    doorman.kill();
    // The assignment lives as long as the lease it came from (20 s): Envoy
    // goes on limiting by it.
    let got = offer(rig.envoy.listen, 3.0 * C, 5.0, &[]);
    assert_admits(&got, C, 0.15);
    // Back: Envoy reopens its stream (about every 5 s) as a new client.
    rig.restart_and_limit_again(12.0);
}

#[test]
fn two_leaves_serving_rls_share_their_roots_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), C);
    let root = server(free_addr(), &file, None);
    let leaves = [
        server(free_addr(), &file, Some(&root)),
        server(free_addr(), &file, Some(&root)),
    ];
    let pair = leaves
        .each_ref()
        .map(|l| EnvoyProcess::start("rls.yaml", l.grpc_addr.port()).expect("envoy"));
    offer_both(&pair, 3.0 * C, 10.0);
    let got = offer_both(&pair, 3.0 * C, 20.0);
    let (a, b) = (got.0.ok_rate(), got.1.ok_rate());
    assert!(within(a + b, C, 0.10), "admitted {a} + {b} of {C}: {got:?}");
    assert!(within(a, b, 0.15), "unequal: {a} vs {b}");
}

/// The Envoy cluster `doorman` over mutual TLS: `ca` to trust, and the
/// client certificate Envoy presents (none: plain TLS).
fn tls_cluster(ca: &Path, me: Option<&doorman_testkit::CertFiles>) -> String {
    let cert = me.map_or(String::new(), |m| {
        format!(
            "          tls_certificates:\n          - certificate_chain: {{ filename: {} }}\n            private_key: {{ filename: {} }}\n",
            m.cert.display(),
            m.key.display()
        )
    });
    format!(
        "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \
         \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n        \
         sni: localhost\n        common_tls_context:\n          alpn_protocols: [\"h2\"]\n{cert}          \
         validation_context:\n            trusted_ca: {{ filename: {} }}\n    load_assignment:\n      cluster_name: doorman",
        ca.display()
    )
}

#[test]
fn rls_over_mutual_tls_follows_the_access_rules() {
    use doorman_testkit::{Name, Pki};
    let pki = Pki::new("envoy-test");
    let server_cert = pki.server("doorman");
    let envoy_cert = pki.client("envoy", Name::Uri("spiffe://doorman.test/envoy"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let rules = "\n[[access]]\nidentities = [\"spiffe://doorman.test/envoy\"]\n\
                 resources = [\"edge/*\"]\nactions = [\"acquire\"]\n";
    std::fs::write(&file, config(C) + rules).unwrap();
    let mut o = ServerOptions::new(free_addr(), ConfigSource::File(file));
    o.tls = Some(doorman_transport::tls::TlsFiles {
        cert: server_cert.cert.clone(),
        key: server_cert.key.clone(),
        client_ca: Some(pki.ca()),
    });
    let doorman = IsolatedServer::start(o).expect("server starts");
    let port = doorman.grpc_addr.port();
    let doorman_cluster = "    load_assignment:\n      cluster_name: doorman";
    let trusted = tls_cluster(&pki.ca(), Some(&envoy_cert));
    let envoy = EnvoyProcess::start_with("rls.yaml", port, &[(doorman_cluster, &trusted)])
        .expect("envoy with a client certificate");
    offer(envoy.listen, 3.0 * C, 5.0, &[]);
    let got = offer(envoy.listen, 3.0 * C, 10.0, &[]);
    assert_admits(&got, C, 0.10);
    assert_eq!(
        envoy.stat("cluster.backend.ratelimit.error"),
        0,
        "{}",
        envoy.log()
    );
    // An Envoy with a valid certificate of another identity: no rule lets
    // it acquire, Doorman refuses each request (PERMISSION_DENIED, counted)
    // and Envoy's failure mode applies.
    let other_cert = pki.client("other", Name::Uri("spiffe://doorman.test/other"));
    let other = tls_cluster(&pki.ca(), Some(&other_cert));
    let other = EnvoyProcess::start_with("rls.yaml", port, &[(doorman_cluster, &other)])
        .expect("envoy of another identity");
    let got = offer(other.listen, C, 2.0, &[]);
    assert_eq!(got.ok, (2.0 * C) as u64, "failure mode: allowed {got:?}");
    assert!(
        other.stat("cluster.backend.ratelimit.error") > 0,
        "{}",
        other.log()
    );
    // (The metrics page is rebuilt at most once a second.)
    eventually_blocking("the refusals are counted", Duration::from_secs(5), || {
        doorman
            .state
            .metrics_text()
            .contains("doorman_server_access_denied_total{action=\"acquire\"}")
    });
    // An Envoy without a client certificate: the gRPC port requires one
    // (`--tls-client-ca`), so its handshake is refused, and Envoy's failure
    // mode (allow) applies.
    let anonymous = tls_cluster(&pki.ca(), None);
    let stranger = EnvoyProcess::start_with("rls.yaml", port, &[(doorman_cluster, &anonymous)])
        .expect("envoy without a client certificate");
    let got = offer(stranger.listen, C, 2.0, &[]);
    assert_eq!(got.ok, (2.0 * C) as u64, "failure mode: allowed {got:?}");
    assert!(
        stranger.stat("cluster.backend.ratelimit.error") > 0,
        "{}",
        stranger.log()
    );
    let refused = doorman
        .state
        .metrics
        .tls_handshake_failures("grpc", "no_client_certificate");
    assert!(refused > 0, "the refused handshakes are counted");
}
