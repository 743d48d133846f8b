//! The standard gRPC services every probe and tool expects on the gRPC
//! port: health (`grpc.health.v1.Health`, for load balancers, meshes,
//! `grpc_health_probe` and Kubernetes' `grpc:` probes) and server
//! reflection (v1 and v1alpha, for `grpcurl` and friends), from the tonic
//! ecosystem's own crates.
//!
//! Health follows `/readyz`: every served service and the server as a
//! whole (`""`) are SERVING while [`ServerState::readiness`] is `Ok`, and
//! NOT_SERVING while it is not (the reason stays on `/readyz` and in the
//! log: the health message has no field for it) and once the server is
//! stopping. A service the port does not serve is NOT_FOUND, as the
//! protocol says.
//!
//! Must not: decide readiness (the state does) or answer anything but
//! health and reflection.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use doorman_state::ServerState;
use doorman_transport::listener::stopped;

/// How often readiness is read for the health service: a probe sees a
/// change at most this late. Readiness is one pass over the resources
/// (1.8 ms at 100 000, `docs/production.md`), so not on every Check.
pub const HEALTH_POLL: Duration = Duration::from_secs(1);

/// The health service over `state`, reporting `services` (the names of the
/// services the port serves) and the server as a whole, with the task that
/// keeps it following readiness until `stop`.
pub fn health(
    state: Arc<ServerState>,
    services: Vec<&'static str>,
    stop: watch::Receiver<bool>,
) -> (HealthServer<impl Health>, JoinHandle<()>) {
    let (reporter, service) = tonic_health::server::health_reporter();
    let task = tokio::spawn(follow(state, reporter, services, stop));
    (service, task)
}

/// Sets every name's status from readiness whenever it changes, and
/// NOT_SERVING once stopping.
async fn follow(
    state: Arc<ServerState>,
    reporter: HealthReporter,
    services: Vec<&'static str>,
    mut stop: watch::Receiver<bool>,
) {
    let names: Vec<&str> = std::iter::once("").chain(services).collect();
    let mut last: Option<Result<(), String>> = None;
    let mut tick = tokio::time::interval(HEALTH_POLL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped(&mut stop) => break,
        }
        let now = state.readiness().map_err(|e| e.to_string());
        if last.as_ref() == Some(&now) {
            continue;
        }
        let status = match &now {
            Ok(()) => ServingStatus::Serving,
            Err(why) => {
                tracing::info!("gRPC health: NOT_SERVING ({why})");
                ServingStatus::NotServing
            }
        };
        for n in &names {
            reporter.set_service_status(n, status).await;
        }
        last = Some(now);
    }
    for n in &names {
        reporter
            .set_service_status(n, ServingStatus::NotServing)
            .await;
    }
}

/// Server reflection, v1 and v1alpha, listing `descriptor_sets` (encoded
/// `FileDescriptorSet`s: Doorman's, health's, reflection's own).
pub fn reflection(
    descriptor_sets: &[&'static [u8]],
) -> Result<
    (
        tonic_reflection::server::v1::ServerReflectionServer<
            impl tonic_reflection::server::v1::ServerReflection,
        >,
        tonic_reflection::server::v1alpha::ServerReflectionServer<
            impl tonic_reflection::server::v1alpha::ServerReflection,
        >,
    ),
    tonic_reflection::server::Error,
> {
    let builder = || {
        descriptor_sets
            .iter()
            .fold(tonic_reflection::server::Builder::configure(), |b, set| {
                b.register_encoded_file_descriptor_set(set)
            })
    };
    Ok((builder().build_v1()?, builder().build_v1alpha()?))
}
