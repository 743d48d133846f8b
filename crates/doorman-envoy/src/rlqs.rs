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
//! share it by the resource's algorithm, as Doorman clients do. A
//! resource in shadow mode is assigned allow-all; the token bucket it
//! would have been is counted (`result="shadow_assigned"`) and logged.
//!
//! Must not: decide capacity (the core does) or block Envoy's requests
//! (nothing here is on their path).

use doorman_core::server::Sharded;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use doorman_core::client::{ClientCore, CoreOptions};
use doorman_core::config::{Config, Unit, Unmatched};
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
use envoy_types::pb::google::protobuf::UInt32Value;
use doorman_core::limits::MAX_RESOURCES_PER_REQUEST;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{may_acquire, refresh, refusal_reason, resource_problem, whole_seconds};
use doorman_grpc::layers::Caller;
use doorman_state::ServerState;

/// Answers queued per stream before the stream's task waits for Envoy.
const QUEUE: usize = 16;

/// The RLQS service.
#[derive(Debug, Clone)]
pub struct RlqsService {
    state: Arc<ServerState>,
    streams: Arc<AtomicU64>,
    stop: watch::Receiver<bool>,
}

impl RlqsService {
    /// A service over shared state; its streams end when `stop` turns true.
    pub fn new(state: Arc<ServerState>, stop: watch::Receiver<bool>) -> Self {
        RlqsService {
            state,
            streams: Arc::default(),
            stop,
        }
    }
}

/// One resource of a stream: the bucket ids naming it (several when a
/// mapping drops a key's value; they share the grant) and its unit.
struct Bucket {
    ids: Vec<BucketId>,
    unit: Unit,
    /// Shadow mode: the rate last logged as the assignment it would have
    /// made (logged again when it moves by more than 10 %).
    shadow_logged: Option<f64>,
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
        let identity = Caller::of(&request)?;
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
        tokio::spawn(stream.run(request.into_inner(), tx, self.stop.clone()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

impl Stream {
    /// Reads reports and sends assignments until either side ends the
    /// stream or the server stops; then releases the leases.
    async fn run(
        mut self,
        mut inbound: Streaming<RateLimitQuotaUsageReports>,
        tx: mpsc::Sender<Answer>,
        mut stop: watch::Receiver<bool>,
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
                _ = stop.changed() => {
                    let _ = tx.send(Err(Status::unavailable("the server is stopping"))).await;
                    true
                }
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

    /// Records each resource's demand (the sum over its buckets); a new
    /// resource is checked against the access rules and asked for.
    fn on_reports(&mut self, reports: &RateLimitQuotaUsageReports) -> Result<(), Status> {
        if reports.domain.is_empty() {
            return Err(Status::invalid_argument("domain: must not be empty"));
        }
        let config = self.state.core().config().clone();
        let mut used: HashMap<String, (f64, f64)> = HashMap::new();
        for (i, usage) in reports.bucket_quota_usages.iter().enumerate() {
            let field = format!("bucket_quota_usages[{i}]");
            let bucket = usage.bucket_id.clone().unwrap_or_default();
            let (resource, unit) = resource(&config, &reports.domain, &bucket, &field)?;
            self.state.metrics.envoy.rlqs_report();
            if !self.buckets.contains_key(&resource) {
                self.admit(&config, &resource, unit)?;
            }
            let b = self.buckets.get_mut(&resource).expect("admitted above");
            if !b.ids.contains(&bucket) {
                if b.ids.len() >= MAX_RESOURCES_PER_REQUEST {
                    let why = format!("{field}: too many buckets name {resource:?}");
                    return Err(Status::invalid_argument(why));
                }
                b.ids.push(bucket);
            }
            let n = usage.num_requests_allowed as f64 + usage.num_requests_denied as f64;
            let secs = usage
                .time_elapsed
                .map_or(0.0, |d| d.seconds as f64 + f64::from(d.nanos) / 1e9);
            let e = used.entry(resource).or_insert((0.0, 0.0));
            *e = (e.0 + n, e.1.max(secs));
        }
        let now = self.state.now();
        for (resource, (n, secs)) in used {
            let unit = self.buckets[&resource].unit;
            let first = self.core.wants(&resource).is_none();
            let wants = if secs > 0.0 {
                n / secs * unit.seconds()
            } else {
                // No rate yet: as much as the template could give.
                config.find(&resource).map_or(n, |t| t.capacity)
            };
            if first {
                self.core.add(&resource, 0, wants, now);
            } else if secs > 0.0 {
                self.core.set_wants(&resource, wants, now);
            }
        }
        Ok(())
    }

    /// A resource new to this stream: allowed by the access rules and
    /// within the stream's limit of resources, else the stream ends.
    fn admit(&mut self, config: &Config, resource: &str, unit: Unit) -> Result<(), Status> {
        let caller = self.identity.as_deref();
        may_acquire(&self.state, config, caller, [resource])?;
        if self.buckets.len() >= MAX_RESOURCES_PER_REQUEST {
            let why = format!("at most {MAX_RESOURCES_PER_REQUEST} resources per stream");
            return Err(Status::invalid_argument(why));
        }
        let ids = Vec::new();
        self.buckets.insert(
            resource.to_string(),
            Bucket {
                ids,
                unit,
                shadow_logged: None,
            },
        );
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
        let mut actions = Vec::new();
        for g in &grants {
            let capacity = self.core.capacity(&g.resource_id, now).map_or(0.0, |c| c.0);
            let Some(bucket) = self.buckets.get_mut(&g.resource_id) else {
                continue;
            };
            actions.extend(assignments(&self.state, g, bucket, capacity, unmatched));
        }
        if actions.is_empty() {
            return Ok(None);
        }
        Ok(Some(RateLimitQuotaResponse {
            bucket_action: actions,
        }))
    }
}

/// The assignments for one granted resource, one per bucket naming it
/// (the rate split evenly between them), counted. In shadow mode each is
/// allow-all; the token bucket it would have been is counted apart and
/// logged (again when its rate moves by more than 10 %).
fn assignments(
    state: &ServerState,
    g: &Grant,
    b: &mut Bucket,
    capacity: f64,
    unmatched: Unmatched,
) -> Vec<BucketAction> {
    let metrics = &state.metrics.envoy;
    let rate = capacity / b.unit.seconds() / b.ids.len().max(1) as f64;
    let strategy = if g.decision == Decision::Unmatched {
        metrics.descriptor("rlqs", "unmatched");
        blanket(unmatched == Unmatched::Ok)
    } else if g.shadow {
        metrics.descriptor("rlqs", "shadow_assigned");
        if b.shadow_logged
            .is_none_or(|r| (rate - r).abs() > 0.1 * r.max(1e-9))
        {
            b.shadow_logged = Some(rate);
            tracing::info!(
                resource = %g.resource_id, would_assign_per_s = rate,
                buckets = b.ids.len(),
                "shadow mode: assigned allow-all instead of this token bucket rate"
            );
        }
        blanket(true)
    } else {
        metrics.descriptor("rlqs", "assigned");
        token_bucket(rate)
    };
    let ttl = (g.lease.expiry - state.now())
        .to_duration()
        .as_secs()
        .max(1);
    let action = QuotaAssignmentAction {
        assignment_time_to_live: Some(whole_seconds(ttl)),
        rate_limit_strategy: Some(strategy),
    };
    b.ids
        .iter()
        .map(|id| BucketAction {
            bucket_id: Some(id.clone()),
            bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(action)),
        })
        .collect()
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

/// A token bucket admitting at most `rate` requests per second (rounded
/// down, so that several Envoys never add up to more than the grant).
/// Envoy divides by whole seconds of fill interval and only notices a
/// changed bucket by its token counts, so: 1 s and `floor(rate)` tokens from
/// 1/s up; below, one token per `ceil(1/rate)` s with a burst of one (Envoy
/// keeps the old interval while only the interval changes, until the
/// assignment's counts change or it expires). No rate: deny all.
pub fn token_bucket(rate: f64) -> RateLimitStrategy {
    if rate.is_nan() || rate <= 0.0 {
        return blanket(false);
    }
    let (interval, tokens) = if rate >= 1.0 {
        (1, rate.floor().min(u32::MAX as f64) as u32)
    } else {
        ((1.0 / rate).ceil().min(86_400.0 * 365.0) as u32, 1)
    };
    RateLimitStrategy {
        strategy: Some(Strategy::TokenBucket(TokenBucket {
            max_tokens: tokens,
            tokens_per_fill: Some(UInt32Value { value: tokens }),
            fill_interval: Some(whole_seconds(u64::from(interval))),
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
        assert_eq!(
            parts(token_bucket(6.67)),
            (6, 6, 1),
            "three of 20 stay within 20"
        );
        assert_eq!(parts(token_bucket(0.25)), (1, 1, 4));
        assert_eq!(parts(token_bucket(0.3)), (1, 1, 4));
        assert_eq!(
            parts(token_bucket(100.0 / 86_400.0)),
            (1, 1, 864),
            "100 a day"
        );
        let deny = Some(Strategy::BlanketRule(BlanketRule::DenyAll as i32));
        assert_eq!(token_bucket(0.0).strategy, deny);
        assert_eq!(token_bucket(f64::NAN).strategy, deny);
    }
}
