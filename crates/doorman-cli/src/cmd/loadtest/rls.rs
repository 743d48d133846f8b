//! `doorman loadtest --protocol rls`: the load Envoy's rate limit filter
//! sends (`ShouldRateLimit` in domain `loadtest`, one descriptor
//! `[("resource", ID)]` per resource, one hit), so its cost per request can
//! be measured next to `GetCapacity`'s. An OVER_LIMIT answer is a success
//! (the server decided); such answers are counted apart.
//!
//! Must not: send anything but the request built here.

use doorman_client::BearerToken;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use tonic::transport::Channel;

/// The domain the load's descriptors are in.
pub const DOMAIN: &str = "loadtest";

/// One request naming every resource.
pub fn request(resources: &[String]) -> RateLimitRequest {
    RateLimitRequest {
        domain: DOMAIN.into(),
        descriptors: resources
            .iter()
            .map(|id| RateLimitDescriptor {
                entries: vec![Entry {
                    key: "resource".into(),
                    value: id.clone(),
                }],
                ..Default::default()
            })
            .collect(),
        hits_addend: 1,
    }
}

/// One call; `Ok(true)` when the answer was OVER_LIMIT.
pub async fn call(
    channel: Channel,
    req: RateLimitRequest,
    token: Option<&BearerToken>,
) -> Result<bool, tonic::Status> {
    let mut req = tonic::Request::new(req);
    if let Some(t) = token {
        t.attach(&mut req);
    }
    let resp = RateLimitServiceClient::new(channel)
        .should_rate_limit(req)
        .await?;
    Ok(resp.into_inner().overall_code == Code::OverLimit as i32)
}
