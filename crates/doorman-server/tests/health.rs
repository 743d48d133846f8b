//! The standard gRPC health and reflection services, checked with the
//! tonic ecosystem's own clients (`tonic-health`'s `HealthClient`,
//! `tonic-reflection`'s `ServerReflectionClient`): health follows
//! readiness both ways, per service, on the gRPC port and on the
//! plaintext health port (which serves nothing else, also when the gRPC
//! port is TLS); an unknown service is NOT_FOUND; reflection lists
//! Doorman's, health's and its own services and serves their descriptors.

use std::net::SocketAddr;
use std::time::Duration;

use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use doorman_server::server::{start, ConfigSource, RunningServer, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually_async, Pki};
use doorman_transport::tls::TlsFiles;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// Every name the gRPC port reports: the server, then its services.
const NAMES: [&str; 4] = [
    "",
    "doorman.Capacity",
    "envoy.service.ratelimit.v3.RateLimitService",
    "envoy.service.rate_limit_quota.v3.RateLimitQuotaService",
];

fn config_text() -> String {
    TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(60).refresh(5))
        .toml()
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connects")
}

/// What the health service says of `service`, or the call's error code.
async fn check(addr: SocketAddr, service: &str) -> Result<ServingStatus, Code> {
    let req = HealthCheckRequest {
        service: service.into(),
    };
    let resp = HealthClient::new(channel(addr).await).check(req).await;
    resp.map(|r| r.into_inner().status()).map_err(|s| s.code())
}

/// Waits until every name says `want` on `addr`.
async fn all_say(addr: SocketAddr, names: &[&str], want: ServingStatus) {
    eventually_async(
        &format!("{addr}: {names:?} {want:?}"),
        Duration::from_secs(10),
        || async {
            for n in names {
                if check(addr, n).await != Ok(want) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}

fn options(config: ConfigSource) -> ServerOptions {
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), config);
    o.health = Some("127.0.0.1:0".parse().unwrap());
    o.reload_interval = Duration::from_millis(50);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_readiness_on_the_grpc_and_the_health_port() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doorman.toml");
    // No config yet: the server starts, not ready until one arrives.
    let s = start(options(ConfigSource::File(path.clone())))
        .await
        .expect("starts");
    let health = s.health_addr.expect("the health port is bound");
    all_say(s.grpc_addr, &NAMES, ServingStatus::NotServing).await;
    all_say(health, &NAMES, ServingStatus::NotServing).await;

    std::fs::write(&path, config_text()).unwrap();
    all_say(s.grpc_addr, &NAMES, ServingStatus::Serving).await;
    all_say(health, &NAMES, ServingStatus::Serving).await;

    assert_eq!(check(s.grpc_addr, "no.Such").await, Err(Code::NotFound));
    // The health port serves health alone.
    let req = pb::GetCapacityRequest {
        client_id: "c".into(),
        resource: vec![],
    };
    let e = CapacityClient::new(channel(health).await)
        .get_capacity(req)
        .await
        .expect_err("no capacity service on the health port");
    assert_eq!(e.code(), Code::Unimplemented, "{e:?}");

    s.shutdown().await;
    assert!(check_fails_fast(health).await, "the health port closed");
}

/// True once nothing answers on `addr` (the server stopped).
async fn check_fails_fast(addr: SocketAddr) -> bool {
    let ep = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(2));
    ep.connect().await.is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_port_is_plaintext_beside_a_tls_grpc_port() {
    let pki = Pki::new("health");
    let cert = pki.server("server");
    let cfg =
        std::sync::Arc::new(doorman_core::config::Config::parse(&config_text(), "t.toml").unwrap());
    let mut o = options(ConfigSource::Inline(cfg));
    o.tls = Some(TlsFiles {
        cert: cert.cert.clone(),
        key: cert.key.clone(),
        client_ca: Some(pki.ca()),
    });
    let s: RunningServer = start(o).await.expect("starts");
    all_say(s.health_addr.unwrap(), &NAMES, ServingStatus::Serving).await;
    // Plaintext on the TLS port fails: probes need the health port.
    assert!(check(s.grpc_addr, "").await.is_err());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_services_and_serves_their_descriptors() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let cfg =
        std::sync::Arc::new(doorman_core::config::Config::parse(&config_text(), "t.toml").unwrap());
    let s = start(options(ConfigSource::Inline(cfg)))
        .await
        .expect("starts");
    let mut client = ServerReflectionClient::new(channel(s.grpc_addr).await);
    let ask = |m: MessageRequest| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    };
    let requests = tokio_stream::iter(vec![
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "doorman.Capacity".into(),
        )),
    ]);
    let mut answers = client
        .server_reflection_info(requests)
        .await
        .expect("reflection answers")
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        answers.next().await.unwrap().unwrap().message_response
    else {
        panic!("the first answer lists services")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "doorman.Capacity",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let Some(MessageResponse::FileDescriptorResponse(files)) =
        answers.next().await.unwrap().unwrap().message_response
    else {
        panic!("the second answer is a file descriptor")
    };
    assert!(!files.file_descriptor_proto.is_empty());
    s.shutdown().await;
}
