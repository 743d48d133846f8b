//! Identities and what they may do, with real handshakes and certificates
//! made in the test: access rules per action (acquire, serve, read),
//! leases owned by (identity, client id), bearer tokens (valid, wrong,
//! missing), and the HTTP pages over TLS (health open, status following
//! the read rule).

use doorman_testkit::rpc as common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use doorman_client::{BearerToken, ClientTls};
use doorman_net::tls::endpoint;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use doorman_server::server::{start, ConfigSource, RunningServer};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{CertFiles, Name, Pki};
use doorman_transport::auth::{Auth, TokenFile, Tokens};
use doorman_transport::tls::TlsFiles;
use tonic::Code;

fn config() -> TestConfig {
    TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(60).refresh(5))
        .access(&["spiffe://example.org/web/*"], &["db/*"], &["acquire"])
        .access(&["leaf.example.org"], &[], &["serve"])
        .access(&["ops", "batch"], &[], &["read"])
        .access(&["batch"], &["jobs/*"], &["acquire"])
}

const BATCH_TOKEN: &str = "batch-0123456789abcdef";

struct Setup {
    pki: Pki,
    server: RunningServer,
}

/// A server with this test's rules over TLS: with a client CA (mutual
/// TLS) or with bearer tokens only.
async fn setup(mutual: bool, health_needs_identity: bool) -> Setup {
    setup_with(mutual, health_needs_identity, false).await
}

/// [`setup`], serving anonymous callers if `allow_anonymous`.
async fn setup_with(mutual: bool, health_needs_identity: bool, allow_anonymous: bool) -> Setup {
    let pki = Pki::new("auth");
    let cert = pki.server("server");
    let cfg = config().parse();
    let mut o = opts(ConfigSource::Inline(cfg), &ManualClock::new());
    // The client library and the server measure leases on one clock.
    o.clock = Arc::new(doorman_server::lease_clock);
    o.tls = Some(TlsFiles {
        cert: cert.cert,
        key: cert.key,
        client_ca: mutual.then(|| pki.ca()),
    });
    let tokens = format!("[[token]]\nidentity = \"batch\"\ntoken = \"{BATCH_TOKEN}\"\n");
    o.auth = Auth {
        tokens: Some(Arc::new(TokenFile::fixed(Tokens::parse(&tokens).unwrap()))),
        health_needs_identity,
        authenticating: false,
        allow_anonymous,
    };
    let server = start(o).await.expect("server starts");
    Setup { pki, server }
}

impl Setup {
    fn tls(&self, me: Option<&CertFiles>) -> ClientTls {
        let (c, k) = (me.map(|m| m.cert.as_path()), me.map(|m| m.key.as_path()));
        ClientTls::from_files(&self.pki.ca(), c, k).unwrap()
    }

    async fn client(&self, me: Option<&CertFiles>) -> CapacityClient<tonic::transport::Channel> {
        let tls = self.tls(me);
        let ep = endpoint(&self.server.grpc_addr.to_string(), Some(&tls)).unwrap();
        CapacityClient::new(ep.timeout(Duration::from_secs(5)).connect().await.unwrap())
    }

    fn leases(&self) -> Vec<String> {
        let st = self.server.state.status(100);
        let ids = st.resources.iter().flat_map(|r| r.leases.iter());
        ids.map(|l| l.id.clone()).collect()
    }

    async fn page(&self, path: &str, me: Option<&CertFiles>) -> (String, String) {
        let addr = self.server.http_addr.unwrap();
        https_get(addr, path, &self.pki.ca(), me, None).await
    }
}

fn acquire(client_id: &str, id: &str, wants: f64) -> pb::GetCapacityRequest {
    pb::GetCapacityRequest {
        client_id: client_id.into(),
        resource: vec![rr(id, wants, None)],
    }
}

fn serve(id: &str) -> pb::GetServerCapacityRequest {
    pb::GetServerCapacityRequest {
        report: None,
        server_id: "leaf-1".into(),
        resource: vec![pb::ServerCapacityResourceRequest {
            resource_id: id.into(),
            has: None,
            wants: vec![pb::PriorityBandAggregate {
                priority: 0,
                num_clients: 5,
                wants: 50.0,
            }],
            outstanding: None,
            has_remaining_ms: None,
        }],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_rules_allow_and_deny_each_action() {
    let s = setup(true, false).await;
    let web = s
        .pki
        .client("web", Name::Uri("spiffe://example.org/web/frontend"));
    let leaf = s.pki.client("leaf", Name::Dns("leaf.example.org"));
    let mut as_web = s.client(Some(&web)).await;
    let r = as_web.get_capacity(acquire("c", "db/users", 30.0)).await;
    assert_eq!(r.unwrap().into_inner().response[0].gets.capacity, 30.0);

    let e = as_web
        .get_capacity(acquire("c", "cache/x", 30.0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert_eq!(
        e.message(),
        "identity \"spiffe://example.org/web/frontend\" may not acquire resource \"cache/x\": no access rule allows it"
    );
    let e = as_web
        .get_server_capacity(serve("db/users"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().contains("may not serve resource \"db/users\""),
        "{}",
        e.message()
    );

    // Only identities allowed to serve may claim downstream clients.
    let mut as_leaf = s.client(Some(&leaf)).await;
    let r = as_leaf
        .get_server_capacity(serve("db/users"))
        .await
        .unwrap();
    assert!(r.into_inner().response[0].gets.capacity > 0.0);
    let e = as_leaf
        .get_capacity(acquire("c", "db/users", 1.0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);

    // No certificate: the handshake of the gRPC port fails (mutual TLS).
    let tls = s.tls(None);
    let ep = endpoint(&s.server.grpc_addr.to_string(), Some(&tls)).unwrap();
    let mut anon = CapacityClient::new(ep.timeout(Duration::from_secs(5)).connect_lazy());
    assert!(anon
        .get_capacity(acquire("c", "db/users", 1.0))
        .await
        .is_err());

    let (_, metrics) = s.page("/metrics", None).await;
    let denied = |a: &str| {
        metric(
            &metrics,
            &format!("doorman_server_access_denied_total{{action=\"{a}\"}}"),
        )
    };
    assert_eq!(denied("acquire"), Some(2.0));
    assert_eq!(denied("serve"), Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_owned_by_identity_and_client_id() {
    let s = setup(true, false).await;
    let a = s.pki.client("a", Name::Uri("spiffe://example.org/web/a"));
    let b = s.pki.client("b", Name::Uri("spiffe://example.org/web/b"));
    let (mut as_a, mut as_b) = (s.client(Some(&a)).await, s.client(Some(&b)).await);
    // The same client id from two identities: two leases, not one.
    let got_a = as_a
        .get_capacity(acquire("shared", "db/x", 60.0))
        .await
        .unwrap();
    let got_b = as_b
        .get_capacity(acquire("shared", "db/x", 60.0))
        .await
        .unwrap();
    assert_eq!(got_a.into_inner().response[0].gets.capacity, 60.0);
    assert_eq!(got_b.into_inner().response[0].gets.capacity, 40.0);
    let mut leases = s.leases();
    leases.sort();
    assert_eq!(
        leases,
        [
            "shared (spiffe://example.org/web/a)",
            "shared (spiffe://example.org/web/b)"
        ]
    );
    // b releasing "shared" releases b's lease only.
    let release = pb::ReleaseCapacityRequest {
        client_id: "shared".into(),
        resource_id: vec!["db/x".into()],
    };
    as_b.release_capacity(release).await.unwrap();
    assert_eq!(s.leases(), ["shared (spiffe://example.org/web/a)"]);
    // A client id that tries to spell an owned one is refused.
    let forged = "shared\u{1f}spiffe://example.org/web/a".to_string();
    let e = as_b
        .get_capacity(acquire(&forged, "db/x", 1.0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(s.leases(), ["shared (spiffe://example.org/web/a)"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_identify_callers_and_wrong_ones_are_refused() {
    let s = setup(false, false).await;
    let mut c = s.client(None).await;
    let with = |token: Option<&str>, id: &str| {
        let mut r = tonic::Request::new(acquire("job", id, 10.0));
        if let Some(t) = token {
            BearerToken::new(t).unwrap().attach(&mut r);
        }
        r
    };
    let r = c
        .get_capacity(with(Some(BATCH_TOKEN), "jobs/nightly"))
        .await;
    assert_eq!(r.unwrap().into_inner().response[0].gets.capacity, 10.0);
    let e = c
        .get_capacity(with(Some(BATCH_TOKEN), "db/x"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message()
            .starts_with("identity \"batch\" may not acquire"),
        "{}",
        e.message()
    );
    let e = c
        .get_capacity(with(Some("not-the-token-at-all"), "jobs/a"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::Unauthenticated, "invalid bearer token")
    );
    // No token on a server that takes tokens: refused before any rule is
    // looked at (so tokens protect something before rules exist), unless
    // the server allows anonymous callers: then the rules decide.
    let e = c.get_capacity(with(None, "jobs/a")).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert!(e.message().contains("--allow-anonymous"), "{}", e.message());
    let open = setup_with(false, false, true).await;
    let mut oc = open.client(None).await;
    let e = oc.get_capacity(with(None, "jobs/a")).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().contains("unauthenticated caller"),
        "{}",
        e.message()
    );

    // The client library sends the token on every RPC.
    let client = doorman_client::Client::builder()
        .servers([s.server.grpc_addr.to_string()])
        .tls(s.tls(None))
        .bearer_token(BearerToken::new(BATCH_TOKEN).unwrap())
        .build()
        .await
        .unwrap();
    let r = client
        .rate_resource("jobs/lib", doorman_client::RateOptions::wants(7.0))
        .unwrap();
    doorman_testkit::eventually("the library's lease", Duration::from_secs(10), || {
        r.capacity() == 7.0
    })
    .await;
    client.close().await;
    let (_, metrics) = s.page("/metrics", None).await;
    let failures = metric(
        &metrics,
        "doorman_server_auth_failures_total{reason=\"unknown_token\"}",
    );
    assert_eq!(failures, Some(1.0));
    let anonymous = metric(
        &metrics,
        "doorman_server_auth_failures_total{reason=\"anonymous\"}",
    );
    assert_eq!(anonymous, Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pages_follow_the_read_rule_and_health_stays_open() {
    let s = setup(true, false).await;
    let web = s
        .pki
        .client("web", Name::Uri("spiffe://example.org/web/frontend"));
    let ops = s.pki.client("ops", Name::CommonName("ops"));
    for path in ["/metrics", "/healthz"] {
        let (status, _) = s.page(path, None).await;
        assert!(
            status.contains("200"),
            "{path} without a certificate: {status}"
        );
    }
    let (status, body) = s.page("/api/v1/status", None).await;
    assert!(status.contains("401"), "{status}");
    assert!(
        body.contains("needs a client certificate or a bearer token"),
        "{body}"
    );
    let (status, body) = s.page("/api/v1/status", Some(&web)).await;
    assert!(status.contains("403"), "{status}");
    assert!(body.contains("may not read the status pages"), "{body}");
    let (status, body) = s.page("/debug/status", Some(&ops)).await;
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("doorman server"), "{body}");
    let addr = s.server.http_addr.unwrap();
    let (status, _) = https_get(addr, "/api/v1/status", &s.pki.ca(), None, Some(BATCH_TOKEN)).await;
    assert!(
        status.contains("200"),
        "batch may read with its token: {status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_pages_can_require_an_identity() {
    let s = setup(true, true).await;
    let ops = s.pki.client("ops", Name::CommonName("ops"));
    let (status, _) = s.page("/healthz", None).await;
    assert!(status.contains("401"), "{status}");
    let (status, body) = s.page("/healthz", Some(&ops)).await;
    assert!(
        status.contains("200") && body.starts_with("ok"),
        "{status} {body}"
    );
}

/// The token file is re-read when it changes: a new token works and a
/// removed one is refused, without a restart; a broken file keeps the
/// tokens in use and is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_token_file_takes_effect_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let entry = |id: &str, t: &str| format!("[[token]]\nidentity = \"{id}\"\ntoken = \"{t}\"\n");
    std::fs::write(&file, entry("batch", BATCH_TOKEN)).unwrap();
    let cfg = config().parse();
    let mut o = opts(ConfigSource::Inline(cfg), &ManualClock::new());
    o.reload_interval = Duration::from_millis(50);
    o.auth.tokens = Some(Arc::new(TokenFile::load(&file).unwrap()));
    let server = start(o).await.expect("server starts");
    let mut c = client(server.grpc_addr).await;
    let code = |r: Result<tonic::Response<pb::GetCapacityResponse>, tonic::Status>| {
        r.map(|_| Code::Ok).unwrap_or_else(|e| e.code())
    };
    let ask = |t: &str| {
        let mut r = tonic::Request::new(acquire("job", "jobs/a", 1.0));
        BearerToken::new(t).unwrap().attach(&mut r);
        r
    };
    assert_eq!(code(c.get_capacity(ask(BATCH_TOKEN)).await), Code::Ok);

    const NEW: &str = "rotated-0123456789abcdef";
    std::fs::write(&file, entry("batch", NEW)).unwrap();
    let mut ok = false;
    for _ in 0..100 {
        if code(c.get_capacity(ask(NEW)).await) == Code::Ok {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "the new token is accepted");
    let old = code(c.get_capacity(ask(BATCH_TOKEN)).await);
    assert_eq!(old, Code::Unauthenticated, "the removed token is refused");

    std::fs::write(&file, "not toml [[").unwrap();
    let rejected = || server.state.metrics.token_reloads(false);
    doorman_testkit::eventually("rejected", Duration::from_secs(5), || rejected() == 1).await;
    assert_eq!(code(c.get_capacity(ask(NEW)).await), Code::Ok, "kept");
    server.shutdown().await;
}
