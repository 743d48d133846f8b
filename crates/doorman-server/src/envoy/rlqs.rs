//! Envoy's rate limit quota service
//! (`envoy.service.rate_limit_quota.v3.RateLimitQuotaService`,
//! `StreamRateLimitQuotas`) on the server's gRPC port. Each stream is one
//! client of the server's core (`client:rlqs-N`, owned by the caller's
//! identity), each bucket id one resource (`D/k=v/…`, keys sorted, or as
//! `[envoy]` maps it). A usage report gives the bucket's demand
//! ((allowed + denied) / time elapsed; the first report of a bucket, with
//! no time elapsed, asks for the template's whole capacity until the next
//! report says better). Whenever the core grants a lease, the bucket is
//! assigned a token bucket at the leased rate (fill interval 1 s) with the
//! lease's remaining time as its time to live; Envoy limits by itself from
//! it. The stream's end releases its leases. Several Envoys on one bucket
//! share it by the resource's algorithm, as Doorman clients do.
//!
//! Must not: decide capacity (the core does) or block Envoy's requests
//! (nothing here is on their path).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use doorman_client::{ClientCore, CoreOptions};
use doorman_core::config::{Action, Config, Unit, Unmatched};
use doorman_core::server::{Decision, Grant, Who};
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    self, QuotaAssignmentAction,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaService;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{caller, refresh, refusal_reason, resource_problem};
use crate::state::ServerState;

/// Answers queued per stream before the stream's task waits for Envoy.
const QUEUE: usize = 16;

/// The RLQS service.
#[derive(Debug, Clone)]
pub struct RlqsService {
    state: Arc<ServerState>,
    streams: Arc<AtomicU64>,
}

impl RlqsService {
    /// A service over shared state.
    pub fn new(state: Arc<ServerState>) -> Self {
        RlqsService {
            state,
            streams: Arc::default(),
        }
    }
}

/// One bucket of a stream.
struct Bucket {
    id: BucketId,
    unit: Unit,
}

/// One stream: a client of the core.
struct Stream {
    state: Arc<ServerState>,
    who: Who,
    identity: Option<Arc<str>>,
    core: ClientCore,
    buckets: HashMap<String, Bucket>,
}

type Answer = Result<RateLimitQuotaResponse, Status>;

#[tonic::async_trait]
impl RateLimitQuotaService for RlqsService {
    type StreamRateLimitQuotasStream = ReceiverStream<Answer>;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Self::StreamRateLimitQuotasStream>, Status> {
        let identity = caller(&self.state, &request)?;
        let n = self.streams.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("rlqs-{n}");
        let stream = Stream {
            state: self.state.clone(),
            who: Who::Client(id.as_str().into()).owned_by(identity.as_deref()),
            identity,
            core: ClientCore::new(id, CoreOptions::default()),
            buckets: HashMap::new(),
        };
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(stream.run(request.into_inner(), tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

impl Stream {
    /// Reads reports and sends assignments until either side ends the
    /// stream; then releases the leases.
    async fn run(
        mut self,
        mut inbound: Streaming<RateLimitQuotaUsageReports>,
        tx: mpsc::Sender<Answer>,
    ) {
        let metrics = self.state.metrics.envoy.clone();
        metrics.rlqs_stream(1);
        loop {
            let sleep = self.until_due();
            let ended = tokio::select! {
                m = inbound.message() => match m {
                    Ok(Some(reports)) => match self.on_reports(&reports) {
                        Ok(()) => false,
                        Err(status) => { let _ = tx.send(Err(status)).await; true }
                    },
                    Ok(None) | Err(_) => true,
                },
                _ = tokio::time::sleep(sleep) => false,
                _ = tx.closed() => true,
            };
            if ended {
                break;
            }
            match self.exchange() {
                Ok(Some(answer)) => {
                    if tx.send(Ok(answer)).await.is_err() {
                        break;
                    }
                }
                Ok(None) => {}
                Err(status) => {
                    let _ = tx.send(Err(status)).await;
                    break;
                }
            }
        }
        let ids: Vec<String> = self.buckets.keys().cloned().collect();
        if !ids.is_empty() {
            let _ = self.state.core().release(&self.who, &ids);
        }
        metrics.rlqs_stream(-1);
    }

    /// How long until the client core has something due (at most a minute).
    fn until_due(&self) -> std::time::Duration {
        let now = self.state.now();
        let next = self.core.next_wakeup(now).map(|t| (t - now).to_duration());
        next.unwrap_or(std::time::Duration::from_secs(60))
            .min(std::time::Duration::from_secs(60))
    }

    /// Records each bucket's demand; a new bucket becomes a resource.
    fn on_reports(&mut self, reports: &RateLimitQuotaUsageReports) -> Result<(), Status> {
        if reports.domain.is_empty() {
            return Err(Status::invalid_argument("domain: must not be empty"));
        }
        let config = self.state.core().config().clone();
        let now = self.state.now();
        for (i, usage) in reports.bucket_quota_usages.iter().enumerate() {
            let field = format!("bucket_quota_usages[{i}]");
            let bucket = usage.bucket_id.clone().unwrap_or_default();
            let (resource, unit) = resource(&config, &reports.domain, &bucket, &field)?;
            self.state.metrics.envoy.rlqs_report();
            let used = (usage.num_requests_allowed + usage.num_requests_denied) as f64;
            let elapsed = usage
                .time_elapsed
                .map_or(0.0, |d| d.seconds as f64 + f64::from(d.nanos) / 1e9);
            let first = !self.buckets.contains_key(&resource);
            let wants = if elapsed > 0.0 {
                used / elapsed * unit.seconds()
            } else {
                // No rate yet: as much as the template could give.
                config.find(&resource).map_or(used, |t| t.capacity)
            };
            if first {
                let ids = [resource.as_str()];
                let acl = config.acl();
                if let Some(why) = acl.first_denial(self.identity.as_deref(), Action::Acquire, ids)
                {
                    self.state.metrics.denied(Action::Acquire.name());
                    return Err(Status::permission_denied(why));
                }
                self.core.add(&resource, 0, wants, now);
                self.buckets.insert(resource, Bucket { id: bucket, unit });
            } else if elapsed > 0.0 {
                self.core.set_wants(&resource, wants, now);
            }
        }
        Ok(())
    }

    /// Asks the core for what is due; the assignments for the buckets it
    /// answered.
    fn exchange(&mut self) -> Result<Option<RateLimitQuotaResponse>, Status> {
        let grants = match refresh(&self.state, &self.who, &mut self.core) {
            None => return Ok(None),
            Some(Ok(grants)) => grants,
            Some(Err(refusal)) => return Err(Status::unavailable(refusal_reason(&refusal))),
        };
        let unmatched = self.state.core().config().envoy().unmatched;
        let now = self.state.now();
        let actions: Vec<BucketAction> = grants
            .iter()
            .filter(|g| g.decision != Decision::Pending)
            .filter_map(|g| {
                let bucket = self.buckets.get(&g.resource_id)?;
                let capacity = self.core.capacity(&g.resource_id, now).map_or(0.0, |c| c.0);
                Some(self.assignment(g, bucket, capacity, unmatched))
            })
            .collect();
        if actions.is_empty() {
            return Ok(None);
        }
        Ok(Some(RateLimitQuotaResponse {
            bucket_action: actions,
        }))
    }

    /// The assignment for one granted bucket, counted.
    fn assignment(
        &self,
        g: &Grant,
        b: &Bucket,
        capacity: f64,
        unmatched: Unmatched,
    ) -> BucketAction {
        let metrics = &self.state.metrics.envoy;
        let strategy = if g.decision == Decision::Unmatched {
            metrics.descriptor("rlqs", "unmatched");
            blanket(unmatched == Unmatched::Ok)
        } else {
            metrics.descriptor("rlqs", "assigned");
            token_bucket(capacity / b.unit.seconds())
        };
        let ttl = (g.lease.expiry - self.state.now())
            .to_duration()
            .as_secs()
            .max(1);
        BucketAction {
            bucket_id: Some(b.id.clone()),
            bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
                QuotaAssignmentAction {
                    assignment_time_to_live: Some(PbDuration {
                        seconds: ttl.min(i64::MAX as u64) as i64,
                        nanos: 0,
                    }),
                    rate_limit_strategy: Some(strategy),
                },
            )),
        }
    }
}

/// The resource a bucket id names, and its unit; INVALID_ARGUMENT naming
/// `field` if it names none.
fn resource(
    config: &Config,
    domain: &str,
    bucket: &BucketId,
    field: &str,
) -> Result<(String, Unit), Status> {
    if bucket.bucket.is_empty() {
        let why = format!("{field}.bucket_id: must have at least one entry");
        return Err(Status::invalid_argument(why));
    }
    let mut entries: Vec<(&str, &str)> = bucket
        .bucket
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    entries.sort_unstable();
    if entries.iter().any(|e| e.0.is_empty()) {
        let why = format!("{field}.bucket_id: keys must not be empty");
        return Err(Status::invalid_argument(why));
    }
    let mapped = config.envoy().map(domain, &entries);
    if let Some(why) = resource_problem(&mapped.resource_id) {
        return Err(Status::invalid_argument(format!(
            "{field}.bucket_id: {why}"
        )));
    }
    Ok((mapped.resource_id, mapped.unit))
}

fn blanket(allow: bool) -> RateLimitStrategy {
    let rule = if allow {
        BlanketRule::AllowAll
    } else {
        BlanketRule::DenyAll
    };
    RateLimitStrategy {
        strategy: Some(Strategy::BlanketRule(rule as i32)),
    }
}

/// A token bucket admitting `rate` requests per second. Envoy divides by
/// whole seconds of fill interval and only notices a changed bucket by its
/// token counts, so: 1 s and `rate` tokens from 1/s up; below, one token
/// per `ceil(1/rate)` s with that many tokens of burst (the counts change
/// with the interval). No rate: deny all.
pub fn token_bucket(rate: f64) -> RateLimitStrategy {
    if rate.is_nan() || rate <= 0.0 {
        return blanket(false);
    }
    let (interval, tokens, max) = if rate >= 1.0 {
        let t = rate.round().min(u32::MAX as f64) as u32;
        (1, t, t)
    } else {
        let secs = (1.0 / rate).ceil().min(86_400.0) as u32;
        (secs, 1, secs)
    };
    RateLimitStrategy {
        strategy: Some(Strategy::TokenBucket(TokenBucket {
            max_tokens: max,
            tokens_per_fill: Some(UInt32Value { value: tokens }),
            fill_interval: Some(PbDuration {
                seconds: i64::from(interval),
                nanos: 0,
            }),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(s: RateLimitStrategy) -> (u32, u32, i64) {
        match s.strategy {
            Some(Strategy::TokenBucket(t)) => (
                t.max_tokens,
                t.tokens_per_fill.map_or(0, |v| v.value),
                t.fill_interval.map_or(0, |d| d.seconds),
            ),
            other => panic!("not a token bucket: {other:?}"),
        }
    }

    #[test]
    fn token_buckets_use_whole_seconds() {
        assert_eq!(parts(token_bucket(20.0)), (20, 20, 1));
        assert_eq!(parts(token_bucket(19.6)), (20, 20, 1));
        assert_eq!(parts(token_bucket(0.25)), (4, 1, 4));
        assert_eq!(parts(token_bucket(0.3)), (4, 1, 4));
        let deny = Some(Strategy::BlanketRule(BlanketRule::DenyAll as i32));
        assert_eq!(token_bucket(0.0).strategy, deny);
        assert_eq!(token_bucket(f64::NAN).strategy, deny);
    }
}
