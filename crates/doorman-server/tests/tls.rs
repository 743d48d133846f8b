//! TLS and mutual TLS with real handshakes and certificates made in the
//! test: plaintext against TLS, missing, expired and untrusted client
//! certificates (failing on the client with a reason, counted on the
//! server), the HTTP pages over TLS, rotation of the server's certificate
//! without a restart (a bad new file keeps the old one), and an
//! intermediate server reaching its parent over mutual TLS.

use doorman_testkit::rpc as common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use doorman_core::config::Config;
use doorman_net::tls::endpoint;
use doorman_net::ClientTls;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use doorman_server::server::{start, ConfigSource, RunningServer};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, eventually_async, CertFiles, Name, Pki};
use doorman_transport::tls::TlsFiles;

fn config() -> TestConfig {
    TestConfig::new().resource(Resource::fair("*", 100.0).lease(60).refresh(5))
}

async fn tls_server(files: TlsFiles, clock: &ManualClock) -> RunningServer {
    let cfg = config().parse();
    let mut o = opts(ConfigSource::Inline(cfg), clock);
    o.tls = Some(files);
    o.reload_interval = Duration::from_millis(50);
    start(o).await.expect("server starts")
}

fn files(server: &CertFiles, client_ca: Option<&Pki>) -> TlsFiles {
    TlsFiles {
        cert: server.cert.clone(),
        key: server.key.clone(),
        client_ca: client_ca.map(Pki::ca),
    }
}

fn trust(ca: &Pki, me: Option<&CertFiles>) -> ClientTls {
    let (c, k) = (me.map(|m| m.cert.as_path()), me.map(|m| m.key.as_path()));
    ClientTls::from_files(&ca.ca(), c, k).unwrap()
}

/// One GetCapacity over a fresh connection; the error with its causes.
async fn ask(s: &RunningServer, tls: Option<&ClientTls>) -> Result<f64, String> {
    let ep = endpoint(&s.grpc_addr.to_string(), tls).map_err(|e| e.to_string())?;
    let ep = ep.timeout(Duration::from_secs(5));
    let ch = ep.connect().await.map_err(|e| chain(&e))?;
    let req = pb::GetCapacityRequest {
        client_id: "c".into(),
        resource: vec![rr("r", 10.0, None)],
    };
    let resp = CapacityClient::new(ch)
        .get_capacity(req)
        .await
        .map_err(|e| chain(&e))?;
    Ok(resp.into_inner().response[0].gets.capacity)
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out = format!("{out}: {s}");
        next = s.source();
    }
    out
}

async fn soon(what: &str, f: impl FnMut() -> bool) {
    eventually(what, Duration::from_secs(5), f).await;
}

fn failures(s: &RunningServer, reason: &str) -> u64 {
    s.state.metrics.tls_handshake_failures("grpc", reason)
}

#[tokio::test]
async fn tls_serves_trusting_clients_and_refuses_plaintext() {
    let ca = Pki::new("a");
    let s = tls_server(files(&ca.server("server"), None), &ManualClock::new()).await;
    assert_eq!(ask(&s, Some(&trust(&ca, None))).await, Ok(10.0));
    let plain = ask(&s, None).await.unwrap_err();
    assert!(!plain.is_empty());
    soon("not_tls counted", || failures(&s, "not_tls") == 1).await;
    let other = Pki::new("other");
    let untrusted = ask(&s, Some(&trust(&other, None))).await.unwrap_err();
    assert!(untrusted.contains("UnknownIssuer"), "{untrusted}");
    s.shutdown().await;
}

#[tokio::test]
async fn mutual_tls_refuses_missing_expired_and_untrusted_certificates() {
    let ca = Pki::new("a");
    let s = tls_server(files(&ca.server("server"), Some(&ca)), &ManualClock::new()).await;
    let good = ca.client("good", Name::Uri("spiffe://test/client"));
    assert_eq!(ask(&s, Some(&trust(&ca, Some(&good)))).await, Ok(10.0));

    let none = ask(&s, Some(&trust(&ca, None))).await.unwrap_err();
    assert!(none.to_lowercase().contains("certificate"), "{none}");
    soon("no_client_certificate counted", || {
        failures(&s, "no_client_certificate") == 1
    })
    .await;

    let old = ca.expired_client("old", Name::CommonName("old"));
    let expired = ask(&s, Some(&trust(&ca, Some(&old)))).await.unwrap_err();
    assert!(expired.to_lowercase().contains("certificate"), "{expired}");
    soon("bad_client_certificate counted", || {
        failures(&s, "bad_client_certificate") == 1
    })
    .await;

    let other = Pki::new("other");
    let stranger = other.client("stranger", Name::Dns("stranger.test"));
    let untrusted = ask(&s, Some(&trust(&ca, Some(&stranger)))).await;
    assert!(untrusted.is_err());
    soon("bad_client_certificate counted", || {
        failures(&s, "bad_client_certificate") == 2
    })
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn the_certificate_is_rotated_without_a_restart() {
    let (a, b) = (Pki::new("a"), Pki::new("b"));
    let live = a.server("live");
    let s = tls_server(files(&live, None), &ManualClock::new()).await;
    assert_eq!(ask(&s, Some(&trust(&a, None))).await, Ok(10.0));
    // cert-manager style: new files from another CA replace the old ones.
    let next = b.server("next");
    std::fs::copy(&next.key, &live.key).unwrap();
    std::fs::copy(&next.cert, &live.cert).unwrap();
    let new_ca = trust(&b, None);
    eventually_async(
        "the new certificate in use",
        Duration::from_secs(5),
        || async { ask(&s, Some(&new_ca)).await == Ok(10.0) },
    )
    .await;
    assert!(
        ask(&s, Some(&trust(&a, None))).await.is_err(),
        "old CA no longer matches"
    );
    // A broken file is refused; the material in use stays.
    std::fs::write(&live.cert, "not a certificate").unwrap();
    soon("the bad file refused", || {
        s.state.metrics.tls_reloads(false) == 1
    })
    .await;
    assert_eq!(ask(&s, Some(&trust(&b, None))).await, Ok(10.0));
    s.shutdown().await;
}

/// cert-manager renews a certificate (same CA) while clients run: RPCs on
/// open connections and on new ones all succeed, before, during and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_while_clients_run_fails_no_rpc() {
    let ca = Pki::new("renew");
    let live = ca.server("live");
    let s = tls_server(files(&live, None), &ManualClock::new()).await;
    let tls = trust(&ca, None);
    let ep = endpoint(&s.grpc_addr.to_string(), Some(&tls)).unwrap();
    let mut open = CapacityClient::new(ep.connect().await.unwrap());
    let req = pb::GetCapacityRequest {
        client_id: "c".into(),
        resource: vec![rr("r", 10.0, None)],
    };
    let (mut ok, mut failed) = (0, Vec::new());
    for i in 0..40 {
        if i == 10 {
            let next = ca.server("next");
            std::fs::copy(&next.key, &live.key).unwrap();
            std::fs::copy(&next.cert, &live.cert).unwrap();
        }
        match open.get_capacity(req.clone()).await {
            Ok(_) => ok += 1,
            Err(e) => failed.push(format!("open connection: {e}")),
        }
        match ask(&s, Some(&tls)).await {
            Ok(_) => ok += 1,
            Err(e) => failed.push(format!("new connection: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(ok, 80);
    assert!(
        s.state.metrics.tls_reloads(true) >= 1,
        "the renewed certificate was loaded"
    );
    s.shutdown().await;
}

/// A node of a tree: serves mutual TLS with its own certificate and, below
/// the root, presents the same certificate to its parent.
async fn node(ca: &Pki, name: &str, parent: Option<&RunningServer>) -> RunningServer {
    let me = ca.server(name);
    let config = match parent {
        None => config().parse(),
        Some(_) => Arc::new(Config::empty()),
    };
    let mut o = opts(ConfigSource::Inline(config), &ManualClock::new());
    o.clock = Arc::new(doorman_server::lease_clock);
    o.tls = Some(files(&me, Some(ca)));
    if let Some(p) = parent {
        o.parent = vec![p.grpc_addr.to_string()];
        o.parent_tls = Some(trust(ca, Some(&me)));
        o.parent_timeout = Duration::from_secs(2);
    }
    start(o).await.expect("node starts")
}

#[tokio::test]
async fn a_three_level_tree_over_mutual_tls() {
    let ca = Pki::new("tree");
    let root = node(&ca, "root", None).await;
    let mid = node(&ca, "mid", Some(&root)).await;
    let leaf = node(&ca, "leaf", Some(&mid)).await;
    let me = ca.client("app", Name::Uri("spiffe://test/app"));
    let tls = trust(&ca, Some(&me));
    // The leaf is pending until its parent, pending until the root, has
    // answered; then the client gets its wants.
    eventually_async(
        "capacity through the tree",
        Duration::from_secs(10),
        || async { ask(&leaf, Some(&tls)).await == Ok(10.0) },
    )
    .await;
    for s in [&root, &mid, &leaf] {
        assert_eq!(failures(s, "no_client_certificate"), 0);
        assert_eq!(failures(s, "bad_client_certificate"), 0);
    }
    // A leaf without a client certificate is refused by its parent.
    let mut o = opts(
        ConfigSource::Inline(Arc::new(Config::empty())),
        &ManualClock::new(),
    );
    o.parent = vec![mid.grpc_addr.to_string()];
    o.parent_tls = Some(trust(&ca, None));
    let stranger = start(o).await.unwrap();
    // A request makes it ask its parent.
    let _ = ask(&stranger, None).await;
    soon("the parent refuses a node without a certificate", || {
        failures(&mid, "no_client_certificate") >= 1
    })
    .await;
    for s in [stranger, leaf, mid, root] {
        s.shutdown().await;
    }
}
