//! The async adapter of an intermediate server: asks the parent's master
//! for capacity in one bulk GetServerCapacity whenever the core says a
//! resource is due (at once for a new resource, then at the upstream
//! lease's refresh interval), and hands the answer back to the core.
//! Finding the parent's master, redirects, deadlines and backoff with jitter
//! are the client library's (`doorman_client::Connector`, `Backoff`).
//!
//! Must not: decide anything (the core does).

use std::sync::Arc;
use std::time::Duration;

use doorman_algorithms::Time;
use doorman_client::{Backoff, Connector};
use doorman_proto::doorman as pb;
use tokio::sync::watch;

use crate::config::AlgorithmConfig;
use crate::core::{UpstreamAsk, UpstreamGrant};
use crate::service::ServerState;

fn request(node_id: &str, asks: &[UpstreamAsk]) -> pb::GetServerCapacityRequest {
    pb::GetServerCapacityRequest {
        server_id: node_id.to_string(),
        resource: asks
            .iter()
            .map(|a| pb::ServerCapacityResourceRequest {
                resource_id: a.resource_id.clone(),
                has: a.has.as_ref().map(doorman_proto::lease_to_wire),
                wants: a
                    .bands
                    .iter()
                    .map(
                        |&(priority, num_clients, wants)| pb::PriorityBandAggregate {
                            priority,
                            num_clients,
                            wants,
                        },
                    )
                    .collect(),
                outstanding: Some(a.outstanding),
            })
            .collect(),
    }
}

fn grants(resp: &pb::GetServerCapacityResponse) -> Vec<UpstreamGrant> {
    resp.response
        .iter()
        .map(|r| UpstreamGrant {
            resource_id: r.resource_id.clone(),
            lease: doorman_proto::lease_from_wire(&r.gets),
            algorithm: r.algorithm.as_ref().map(AlgorithmConfig::from_proto),
            safe_capacity: r.safe_capacity,
        })
        .collect()
}

/// Runs until `stop` turns true.
pub async fn run(
    state: Arc<ServerState>,
    mut conn: Connector,
    node_id: String,
    mut stop: watch::Receiver<bool>,
) {
    let seed = state.now().as_millis() as u64 ^ 0x5DEE_CE66;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30), seed);
    loop {
        if *stop.borrow() {
            return;
        }
        let asks = {
            let now = state.now();
            state.core().upstream_request(now)
        };
        if let Some(asks) = asks.filter(|a| !a.is_empty()) {
            // The protocol allows 10 000 resources per request.
            for chunk in asks.chunks(crate::validate::MAX_RESOURCES_PER_REQUEST) {
                let ids: Vec<String> = chunk.iter().map(|a| a.resource_id.clone()).collect();
                let r = tokio::select! {
                    r = conn.get_server_capacity(request(&node_id, chunk)) => r,
                    _ = stop.changed() => return,
                };
                let now = state.now();
                match r {
                    Ok(resp) => {
                        backoff.reset();
                        state.core().upstream_response(now, &ids, &grants(&resp));
                    }
                    Err(e) => {
                        let delay = backoff.next_delay();
                        tracing::warn!(error = %e, retry_in = ?delay, "GetServerCapacity to the parent failed");
                        state
                            .core()
                            .upstream_failure(now, &ids, Time::from_duration(delay));
                    }
                }
            }
        }
        let now = state.now();
        let next = state.core().next_upstream_wakeup();
        let sleep = next
            .map(|t| (t - now).to_duration())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = state.upstream_wake.notified() => {}
            // A dropped sender (the server was dropped) also means stop.
            r = stop.changed() => if r.is_err() { return },
        }
    }
}
