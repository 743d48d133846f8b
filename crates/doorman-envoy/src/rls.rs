//! Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService`,
//! `ShouldRateLimit`) on the server's gRPC port: each descriptor names a
//! resource (`[envoy]` in the config, `doorman_core::config::EnvoyConfig`),
//! and its hits are admitted or refused at once by this server's
//! [`LocalRequester`], which leases the capacity from the server's own
//! core like any client. The answer carries one `DescriptorStatus` per
//! descriptor (code, the leased limit, what is left, when the bucket is
//! full again) for Envoy's `x-ratelimit-*` headers.
//!
//! Shadow mode: a descriptor of a resource in shadow mode is answered OK
//! whatever its bucket says; a hit the bucket refused is counted apart
//! (`doorman_envoy_descriptors_total{result="shadow_over_limit"}`).
//!
//! Hits: the request's `hits_addend` (0 means 1), or the descriptor's own
//! when it sets one (0 then checks without consuming). A request is over
//! the limit when any of its descriptors is; each descriptor's hits are
//! counted and taken on its own.
//!
//! Must not: decide capacity (the requester asks the core) or hold a
//! shard lock of the core (the running config is read without one).

use doorman_core::server::Sharded;
use std::sync::Arc;

use doorman_core::config::{EnvoyConfig, Unit, Unmatched};
use doorman_core::limits::MAX_RESOURCES_PER_REQUEST;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit as PbUnit, Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tonic::{Request, Response, Status};

use super::local::{Admission, LocalRequester};
use super::{may_acquire, resource_problem, whole_seconds};
use doorman_grpc::layers::Caller;
use doorman_state::ServerState;

/// The RLS service.
#[derive(Debug, Clone)]
pub struct RlsService {
    state: Arc<ServerState>,
    requester: Arc<LocalRequester>,
}

impl RlsService {
    /// A service admitting hits through `requester`.
    pub fn new(state: Arc<ServerState>, requester: Arc<LocalRequester>) -> Self {
        RlsService { state, requester }
    }

    fn answer(&self, request: &Request<RateLimitRequest>) -> Result<RateLimitResponse, Status> {
        let who = Caller::of(request)?;
        let req = request.get_ref();
        let config = self.state.core().config().clone();
        let asks = asks(config.envoy(), req)?;
        let ids = asks.iter().map(|a| a.0.as_str());
        may_acquire(&self.state, &config, who.as_deref(), ids)?;
        let admissions = self
            .requester
            .admit(&self.state, &asks)
            .map_err(Status::unavailable)?;
        let unmatched = config.envoy().unmatched;
        let statuses: Vec<DescriptorStatus> = admissions
            .iter()
            .zip(&asks)
            .map(|(a, (_, unit, _))| self.status(a, *unit, unmatched))
            .collect();
        let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
        Ok(RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            ..Default::default()
        })
    }

    /// One descriptor's status, counted.
    fn status(&self, a: &Admission, unit: Unit, unmatched: Unmatched) -> DescriptorStatus {
        let metrics = &self.state.metrics.envoy;
        if a.unmatched {
            metrics.descriptor("rls", "unmatched");
            let code = match unmatched {
                Unmatched::Ok => Code::Ok,
                Unmatched::OverLimit => Code::OverLimit,
            };
            return DescriptorStatus {
                code: code as i32,
                ..Default::default()
            };
        }
        // Shadow mode: over the limit is counted apart and answered OK.
        let result = match (a.allowed, a.shadow) {
            (true, _) => "ok",
            (false, false) => "over_limit",
            (false, true) => "shadow_over_limit",
        };
        metrics.descriptor("rls", result);
        let ok = a.allowed || a.shadow;
        DescriptorStatus {
            code: if ok { Code::Ok } else { Code::OverLimit } as i32,
            current_limit: Some(RateLimit {
                name: String::new(),
                requests_per_unit: a.limit.round().clamp(0.0, u32::MAX as f64) as u32,
                unit: pb_unit(unit) as i32,
            }),
            limit_remaining: a.remaining,
            duration_until_reset: Some(duration(a.reset)),
            quota: None,
        }
    }
}

/// `(resource id, unit, hits)` per descriptor, validated.
fn asks(envoy: &EnvoyConfig, req: &RateLimitRequest) -> Result<Vec<(String, Unit, u64)>, Status> {
    if req.domain.is_empty() {
        return Err(Status::invalid_argument("domain: must not be empty"));
    }
    if req.descriptors.is_empty() {
        return Err(Status::invalid_argument(
            "descriptors: at least one descriptor is needed",
        ));
    }
    if req.descriptors.len() > MAX_RESOURCES_PER_REQUEST {
        let why = format!(
            "descriptors: at most {MAX_RESOURCES_PER_REQUEST}, got {}",
            req.descriptors.len()
        );
        return Err(Status::invalid_argument(why));
    }
    let hits = u64::from(req.hits_addend.max(1));
    req.descriptors
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let entries = entries(i, d)?;
            let mapped = envoy.map(&req.domain, &entries);
            if let Some(why) = resource_problem(&mapped.resource_id) {
                return Err(Status::invalid_argument(format!("descriptors[{i}]: {why}")));
            }
            let hits = d.hits_addend.as_ref().map_or(hits, |h| h.value);
            Ok((mapped.resource_id, mapped.unit, hits))
        })
        .collect()
}

/// A descriptor's entries as `(key, value)`.
fn entries(i: usize, d: &RateLimitDescriptor) -> Result<Vec<(&str, &str)>, Status> {
    if d.entries.is_empty() {
        let why = format!("descriptors[{i}].entries: at least one entry is needed");
        return Err(Status::invalid_argument(why));
    }
    d.entries
        .iter()
        .enumerate()
        .map(|(j, e)| {
            if e.key.is_empty() {
                let why = format!("descriptors[{i}].entries[{j}].key: must not be empty");
                return Err(Status::invalid_argument(why));
            }
            Ok((e.key.as_str(), e.value.as_str()))
        })
        .collect()
}

fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
    }
}

/// A protobuf duration, whole seconds rounded up (Envoy reads the seconds).
fn duration(d: std::time::Duration) -> PbDuration {
    whole_seconds(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

#[tonic::async_trait]
impl RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.answer(&request).map(Response::new)
    }
}
