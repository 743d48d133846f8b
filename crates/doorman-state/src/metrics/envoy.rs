//! Metrics of the Envoy front-ends (`doorman_envoy`): descriptors and
//! buckets by outcome, open RLQS streams, usage reports. Their RPCs are
//! also counted and timed with the others (`doorman_server_requests_total`
//! with `method="ShouldRateLimit"`), and their leases show per resource
//! like any client's.
//!
//! Must not: change server state.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

use super::register;

/// The Envoy front-ends' metrics.
#[derive(Debug, Clone)]
pub struct EnvoyMetrics {
    descriptors: IntCounterVec,
    streams: IntGauge,
    reports: IntCounter,
}

impl EnvoyMetrics {
    /// Creates them in `r`.
    pub fn new(r: &Registry) -> Self {
        EnvoyMetrics {
            descriptors: register(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "doorman_server_envoy_descriptors_total",
                        "Envoy descriptors (RLS: ok, over_limit, shadow_over_limit, unmatched) and bucket \
                         assignments (RLQS: assigned, shadow_assigned, unmatched), by protocol and result.",
                    ),
                    &["protocol", "result"],
                ),
            ),
            streams: register(
                r,
                IntGauge::new(
                    "doorman_server_envoy_rlqs_streams",
                    "Open RLQS streams (one per Envoy instance).",
                ),
            ),
            reports: register(
                r,
                IntCounter::new(
                    "doorman_server_envoy_rlqs_bucket_reports_total",
                    "RLQS bucket usage reports received.",
                ),
            ),
        }
    }

    /// One descriptor or bucket assignment of `protocol` with `result`.
    pub fn descriptor(&self, protocol: &str, result: &str) {
        self.descriptors
            .with_label_values(&[protocol, result])
            .inc();
    }

    /// A stream opened (+1) or closed (-1).
    pub fn rlqs_stream(&self, delta: i64) {
        self.streams.add(delta);
    }

    /// One bucket's usage report.
    pub fn rlqs_report(&self) {
        self.reports.inc();
    }
}
