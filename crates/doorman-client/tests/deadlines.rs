//! Acquisitions with a deadline against a real server: capacity that does
//! not come (Deadline), a resource the server's access rules refuse
//! (PermissionDenied at once, other resources of the same client served),
//! a closed client (ClientClosed), gauges likewise.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_client::{AcquireError, BearerToken, Client, GaugeOptions, Mode, Phase, RateOptions};
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, IsolatedServer};
use doorman_transport::auth::{Auth, TokenFile, Tokens};

fn config() -> TestConfig {
    TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(5).refresh(1))
        .access(&["web"], &["web/*"], &["acquire"])
}

const TOKEN: &str = "web-0123456789abcdef";

fn server() -> IsolatedServer {
    let cfg = config().parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    let tokens = format!("[[token]]\nidentity = \"web\"\ntoken = \"{TOKEN}\"\n");
    o.auth = Auth {
        tokens: Some(Arc::new(TokenFile::fixed(Tokens::parse(&tokens).unwrap()))),
        ..Default::default()
    };
    IsolatedServer::start(o).expect("server starts")
}

async fn client(s: &IsolatedServer) -> Client {
    Client::builder()
        .servers([s.addr()])
        .bearer_token(BearerToken::new(TOKEN).unwrap())
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_resource_fails_at_once_and_the_others_are_served() {
    let s = server();
    let c = client(&s).await;
    let denied = c
        .rate_resource("db/users", RateOptions::wants(5.0))
        .unwrap();
    let allowed = c
        .rate_resource("web/home", RateOptions::wants(5.0))
        .unwrap();
    eventually("the refusal arrives", Duration::from_secs(5), || {
        denied.mode() == Mode::Refused
    })
    .await;
    assert_eq!(denied.capacity_watch().borrow().phase, Phase::Refused);
    let t = Instant::now();
    let e = denied
        .wait_timeout(Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "at once, not at the deadline"
    );
    match e {
        AcquireError::PermissionDenied { resource, reason } => {
            assert_eq!(resource, "db/users");
            assert!(reason.contains("may not acquire"), "{reason}");
        }
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
    eventually("the allowed one is leased", Duration::from_secs(5), || {
        allowed.mode() == Mode::Lease && allowed.capacity() == 5.0
    })
    .await;
    allowed.wait_timeout(Duration::from_secs(5)).await.unwrap();
    let g = c
        .gauge_resource("db/pool", GaugeOptions::wants(2.0))
        .unwrap();
    eventually("refused too", Duration::from_secs(5), || {
        g.mode() == Mode::Refused
    })
    .await;
    let e = g.mark_timeout(Duration::from_secs(30)).await.unwrap_err();
    assert!(matches!(e, AcquireError::PermissionDenied { .. }), "{e:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_capacity_before_the_deadline_and_a_closed_client_are_errors() {
    let s = server();
    let c = client(&s).await;
    let r = c
        .rate_resource("web/zero", RateOptions::wants(0.0))
        .unwrap();
    eventually("leased at 0", Duration::from_secs(5), || {
        r.mode() == Mode::Lease
    })
    .await;
    let t = Instant::now();
    let e = r
        .wait_timeout(Duration::from_millis(300))
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(
        e,
        AcquireError::Deadline {
            resource: "web/zero".into()
        }
    );
    assert!(
        took >= Duration::from_millis(300),
        "not before the deadline: {took:?}"
    );
    let g = c
        .gauge_resource("web/none", GaugeOptions::wants(0.0))
        .unwrap();
    eventually("gauge leased", Duration::from_secs(5), || {
        g.mode() == Mode::Lease
    })
    .await;
    let e = g
        .mark_timeout(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(e, AcquireError::Deadline { .. }), "{e:?}");

    let ok = c.rate_resource("web/ok", RateOptions::wants(50.0)).unwrap();
    eventually("leased", Duration::from_secs(5), || ok.capacity() == 50.0).await;
    ok.wait_timeout(Duration::from_secs(1)).await.unwrap();
    c.close().await;
    let e = ok.wait_timeout(Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(
        e,
        AcquireError::ClientClosed {
            resource: "web/ok".into()
        }
    );
}

/// A token the server does not know is reported in the client's
/// connection state, and treated as transient (a replica may not have
/// reloaded its token file yet): the resource is not refused, and a
/// deadline wait ends at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_token_shows_in_the_connection_state() {
    let s = server();
    let c = Client::builder()
        .servers([s.addr()])
        .bearer_token(BearerToken::new("not-a-known-token-at-all").unwrap())
        .build()
        .await
        .unwrap();
    let r = c.rate_resource("web/a", RateOptions::wants(5.0)).unwrap();
    eventually("the error shows", Duration::from_secs(5), || {
        c.connection()
            .last_error
            .is_some_and(|e| e.contains("invalid bearer token"))
    })
    .await;
    assert_ne!(r.mode(), Mode::Refused);
    let e = r
        .wait_timeout(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(e, AcquireError::Deadline { .. }), "{e:?}");
    c.close().await;
}
