//! The gRPC port as a tonic server: `doorman.Capacity`, Envoy's RLS and
//! RLQS behind doorman-grpc's layers, and beside them the open health and
//! reflection services; and the plaintext health port (`--health-listen`)
//! for probes that cannot speak TLS.
//!
//! Must not: hold behaviour of its own (each service is its crate's).

use std::sync::Arc;

use doorman_core::server::PushBudgetRule;
use doorman_grpc::{layers, transport, CapacityService};
use doorman_proto::CapacityServer;
use doorman_state::ServerState;
use doorman_transport::listener::{stopped, Incoming};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaServiceServer;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::pb::health_server::{Health, HealthServer};

/// The descriptors reflection lists: Doorman's, health's and its own
/// (Envoy's services are served but not listed: `envoy-types` ships no
/// descriptors).
const DESCRIPTOR_SETS: [&[u8]; 4] = [
    doorman_proto::FILE_DESCRIPTOR_SET,
    tonic_health::pb::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
];

/// Most open connections of the plaintext health port.
const HEALTH_MAX_CONNECTIONS: usize = 64;

/// The gRPC port's server.
pub(crate) fn spawn_grpc(
    (state, push_budget): (Arc<ServerState>, PushBudgetRule),
    rls: Arc<doorman_envoy::local::LocalRequester>,
    health: HealthServer<impl Health>,
    incoming: impl tokio_stream::Stream<Item = std::io::Result<doorman_transport::tls::Peer>>
        + Send
        + 'static,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let capacity = CapacityService::new(state.clone()).stopping_with(stop.clone());
    let hub = capacity.hub().clone();
    let pusher = doorman_grpc::stream::push::run((state.clone(), hub, push_budget), stop.clone());
    tokio::spawn(pusher);
    let svc = CapacityServer::new(capacity)
        .max_decoding_message_size(transport::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(transport::MAX_MESSAGE_BYTES);
    let rls = RateLimitServiceServer::new(doorman_envoy::rls::RlsService::new(state.clone(), rls))
        .max_decoding_message_size(transport::MAX_MESSAGE_BYTES);
    let rlqs = doorman_envoy::rlqs::RlqsService::new(state.clone(), stop.clone());
    let rlqs = RateLimitQuotaServiceServer::new(rlqs)
        .max_decoding_message_size(transport::MAX_MESSAGE_BYTES);
    // Health and reflection are open, as Discovery is: probes carry no
    // token, and reflection shows only the services' schemas.
    let (reflection_v1, reflection_v1alpha) = doorman_grpc::health::reflection(&DESCRIPTOR_SETS)
        .expect("the built-in descriptors decode");
    // Identity, timing and the level header: doorman-grpc's layers.
    let (svc, rls, rlqs) = (
        layers::capacity(&state, svc),
        layers::rls(&state, rls),
        layers::rlqs(&state, rlqs),
    );
    // Small request/response pairs: without TCP_NODELAY (set by Incoming),
    // Nagle and delayed ACKs add ~40 ms to every response that spans two
    // writes.
    let serve = tonic::transport::Server::builder()
        .max_concurrent_streams(transport::MAX_CONCURRENT_STREAMS)
        .http2_keepalive_interval(Some(transport::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(transport::KEEPALIVE_TIMEOUT))
        .layer(tower::util::MapResponseLayer::new(
            transport::undecodable_is_invalid_argument,
        ))
        .add_service(svc)
        .add_service(rls)
        .add_service(rlqs)
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming, async move { stopped(&mut stop).await });
    spawn_serving("gRPC", serve)
}

/// The names of the services the gRPC port serves, as health reports them.
pub(crate) fn served_names() -> Vec<&'static str> {
    use tonic::server::NamedService;
    vec![
        <CapacityServer<CapacityService> as NamedService>::NAME,
        <RateLimitServiceServer<doorman_envoy::rls::RlsService> as NamedService>::NAME,
        <RateLimitQuotaServiceServer<doorman_envoy::rlqs::RlqsService> as NamedService>::NAME,
    ]
}

/// The plaintext health port (`--health-listen`): `grpc.health.v1.Health`
/// alone, for probes that cannot speak TLS (Kubernetes' `grpc:` probes).
pub(crate) fn spawn_health(
    listener: TcpListener,
    health: HealthServer<impl Health>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let incoming = Incoming::new(
        listener,
        "health",
        HEALTH_MAX_CONNECTIONS,
        transport::KEEPALIVE_INTERVAL * 2,
    );
    let serve = tonic::transport::Server::builder()
        .add_service(health)
        .serve_with_incoming_shutdown(incoming, async move { stopped(&mut stop).await });
    spawn_serving("gRPC health", serve)
}

/// Runs a listener's serve loop; a failure is logged.
fn spawn_serving<E: std::fmt::Display>(
    what: &'static str,
    serve: impl std::future::Future<Output = Result<(), E>> + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "{what} server failed");
        }
    })
}
