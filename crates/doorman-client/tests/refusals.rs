//! Refusals through a real server: a request of 50 resources denied by
//! the access rules reaches a plain gRPC client as the status it always
//! was (PERMISSION_DENIED with a readable message, all the original Go
//! client reads) and our client as 50 typed refusals, one per resource,
//! read from the status details; a request with more denials than the
//! response headers can name gets its refusals in turns; an invalid
//! request is INVALID_ARGUMENT naming each entry's field.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use doorman_client::{AcquireError, BearerToken, Client, Mode, RateOptions};
use doorman_core::action::Action;
use doorman_core::client::Refused;
use doorman_core::refusal::Reason;
use doorman_net::refusal::from_status;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, free_port, IsolatedServer};
use doorman_transport::auth::{Auth, TokenFile, Tokens};
use tonic::Code;

fn config() -> TestConfig {
    TestConfig::new()
        .resource(Resource::new("*", 100.0, "STATIC").lease(60).refresh(5))
        .access(&["web"], &["web/*"], &["acquire"])
}

const TOKEN: &str = "web-0123456789abcdef";

fn server_at(listen: SocketAddr) -> IsolatedServer {
    let cfg = config().parse();
    let mut o = ServerOptions::new(listen, ConfigSource::Inline(cfg));
    o.min_request_interval = Duration::ZERO;
    let tokens = format!("[[token]]\nidentity = \"web\"\ntoken = \"{TOKEN}\"\n");
    o.auth = Auth {
        tokens: Some(Arc::new(TokenFile::fixed(Tokens::parse(&tokens).unwrap()))),
        ..Default::default()
    };
    IsolatedServer::start(o).expect("server starts")
}

fn denied_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("deny/{i:05}")).collect()
}

fn web_denial() -> Reason {
    Reason::Denied {
        identity: Some(Arc::from("web")),
        action: Action::Acquire,
    }
}

/// One GetCapacity of `ids` as a plain gRPC client sends it.
async fn ask(addr: SocketAddr, ids: &[String], wants: f64) -> tonic::Status {
    let mut c = CapacityClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let resource = ids.iter().map(|id| pb::ResourceRequest {
        resource_id: id.clone(),
        priority: 0,
        has: None,
        wants,
        has_remaining_ms: None,
    });
    let mut req = tonic::Request::new(pb::GetCapacityRequest {
        client_id: "plain".into(),
        resource: resource.collect(),
    });
    BearerToken::new(TOKEN).unwrap().attach(&mut req);
    c.get_capacity(req).await.unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_denials_are_a_plain_status_and_fifty_typed_refusals() {
    let s = server_at("127.0.0.1:0".parse().unwrap());
    let ids = denied_ids(50);
    let status = ask(s.grpc_addr, &ids, 1.0).await;
    // What the original Go client reads: the code and a readable message.
    assert_eq!(status.code(), Code::PermissionDenied);
    let m = status.message();
    assert!(
        m.starts_with(
            "identity \"web\" may not acquire resource \"deny/00000\": \
             no access rule allows it (also denied: \"deny/00001\", "
        ),
        "{m}"
    );
    assert!(
        m.len() <= doorman_core::refusal::MESSAGE_BYTES,
        "{}",
        m.len()
    );
    // What our clients read: every resource, by index and id, and why.
    let back = from_status(&status, &ids).expect("details");
    assert_eq!(back.unnamed, 0);
    assert_eq!(back.refusal.resources.len(), 50);
    for (i, r) in back.refusal.resources.iter().enumerate() {
        assert_eq!((r.index, r.resource_id.as_str()), (i, ids[i].as_str()));
        assert_eq!(r.reason, web_denial());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_is_a_plain_status_naming_each_field() {
    let s = server_at("127.0.0.1:0".parse().unwrap());
    let ids = vec!["web/a".to_string(), "web/b".to_string()];
    let status = ask(s.grpc_addr, &ids, -1.0).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "resource[0].wants: must be a finite number from 0 to 1e15, got -1; \
         resource[1].wants: must be a finite number from 0 to 1e15, got -1"
    );
    let back = from_status(&status, &ids).expect("details");
    let fields: Vec<_> = back
        .refusal
        .resources
        .iter()
        .map(|r| (r.resource_id.as_str(), r.reason.field()))
        .collect();
    assert_eq!(fields, [("web/a", Some("wants")), ("web/b", Some("wants"))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_denials_one_status_names_fit_a_clients_headers() {
    let s = server_at("127.0.0.1:0".parse().unwrap());
    let ids = denied_ids(10_000);
    // A tonic client with its default 16 KiB of response headers gets
    // the status whole (not an h2 error), naming as many as fit.
    let status = ask(s.grpc_addr, &ids, 1.0).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let back = from_status(&status, &ids).expect("details");
    let named = back.refusal.resources.len();
    eprintln!("one status names {named} of 10000 denied resources");
    assert!(named >= 150, "{named}");
    assert_eq!(named + back.unnamed, 10_000);
    assert!(status.message().ends_with(" more)"), "{}", status.message());
}

fn refused_count(registry: &prometheus::Registry) -> u64 {
    let families = registry.gather();
    let errors = families
        .iter()
        .find(|f| f.name() == "doorman_client_rpc_errors_total");
    let metrics = errors.map(|f| f.get_metric().to_vec()).unwrap_or_default();
    let denied = metrics.iter().filter(|m| {
        m.get_label()
            .iter()
            .any(|l| l.name() == "code" && l.value() == "PermissionDenied")
    });
    denied.map(|m| m.get_counter().get_value() as u64).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_tells_each_of_fifty_resources_denied_in_one_request_why() {
    // The server starts after the client has opened every resource, so
    // its first answered request carries all 50 (and one allowed).
    // A port from the test kit's allocator: below the ephemeral range, so
    // no other test's server (bound to port 0) lands on it meanwhile and
    // refuses this client's early requests.
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    let registry = prometheus::Registry::new();
    let c = Client::builder()
        .servers([addr.to_string()])
        .bearer_token(BearerToken::new(TOKEN).unwrap())
        .backoff(Duration::from_millis(500), Duration::from_millis(500))
        .metrics(&registry)
        .build()
        .await
        .unwrap();
    let ids = denied_ids(50);
    let denied: Vec<_> = ids
        .iter()
        .map(|id| c.rate_resource(id, RateOptions::wants(1.0)).unwrap())
        .collect();
    let allowed = c.rate_resource("web/ok", RateOptions::wants(1.0)).unwrap();
    let _s = server_at(addr);
    eventually("every refusal arrives", Duration::from_secs(10), || {
        denied.iter().all(|r| r.mode() == Mode::Refused)
    })
    .await;
    assert_eq!(refused_count(&registry), 1, "one request refused them all");
    for r in &denied {
        assert_eq!(r.refusal(), Some(Refused::Reason(web_denial())));
        let e = r.wait_timeout(Duration::from_secs(30)).await.unwrap_err();
        let AcquireError::PermissionDenied { resource, reason } = e else {
            panic!("expected PermissionDenied, got {e:?}");
        };
        assert_eq!(resource, r.id());
        let told = format!(
            "identity \"web\" may not acquire resource \"{}\": no access rule allows it",
            r.id()
        );
        assert_eq!(reason, told);
    }
    eventually("the allowed one is leased", Duration::from_secs(5), || {
        allowed.mode() == Mode::Lease && allowed.refusal().is_none()
    })
    .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_denials_than_one_status_names_reach_the_client_in_turns() {
    let s = server_at("127.0.0.1:0".parse().unwrap());
    let c = Client::builder()
        .servers([s.addr()])
        .bearer_token(BearerToken::new(TOKEN).unwrap())
        .backoff(Duration::from_millis(50), Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let denied: Vec<_> = denied_ids(600)
        .iter()
        .map(|id| c.rate_resource(id, RateOptions::wants(1.0)).unwrap())
        .collect();
    eventually("every refusal arrives", Duration::from_secs(20), || {
        denied
            .iter()
            .all(|r| r.refusal() == Some(Refused::Reason(web_denial())))
    })
    .await;
    c.close().await;
}
