//! Prometheus metrics of a lease server, recorded by the boundaries (the
//! gRPC service per request, the config sources per reload) and rendered by
//! the HTTP boundary's `/metrics`. Request metrics are recorded as requests
//! happen; per-resource gauges and core counters are
//! written from a stepwise core snapshot when `/metrics` is scraped, so
//! resources that disappear also disappear from the metrics.
//!
//! Must not: change server state or keep anything but the metrics.

use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use doorman_core::server::{Counters, ResourceGauge};

use crate::config_version::ConfigVersion;

/// Every metric of one server, on its own registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    unmatched: IntCounter,
    expired: IntCounter,
    config_reloads: IntCounterVec,
    config_watch_restarts: IntCounter,
    rejected: IntCounterVec,
    tls_handshake_failures: IntCounterVec,
    tls_reloads: IntCounterVec,
    token_reloads: IntCounterVec,
    is_master: IntGauge,
    leases: IntGauge,
    config_version: IntGauge,
    config_info: IntGaugeVec,
    auth_failures: IntCounterVec,
    denied: IntCounterVec,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Only fails on invalid metric names or duplicate registration, which
    // are fixed in this file: a programming error, caught by tests.
    r.unwrap_or_else(|e| panic!("metric definition error: {e}"))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers `metric` and returns it.
fn register<T: Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<T>,
) -> T {
    let metric = must(metric);
    must(registry.register(Box::new(metric.clone())));
    metric
}

/// Handling-time buckets, 10 µs to 100 ms.
const LATENCY_BUCKETS: [f64; 12] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1,
];

/// How a per-resource gauge reads its value.
type GaugeValue = fn(&ResourceGauge) -> f64;

/// The per-resource gauges: name, help, value. Written straight into the
/// text format from a stepwise snapshot (100 000 resources take a few
/// milliseconds this way; as labelled prometheus gauges, rebuilt each scrape,
/// they took far longer and far more memory).
const RESOURCE_GAUGES: [(&str, &str, GaugeValue); 5] = [
    (
        "doorman_server_resource_capacity",
        "Capacity being shared.",
        |g| g.capacity,
    ),
    (
        "doorman_server_resource_has",
        "Capacity handed out (sum of has).",
        |g| g.has,
    ),
    ("doorman_server_resource_wants", "Sum of wants.", |g| {
        g.wants
    }),
    (
        "doorman_server_resource_clients",
        "Requesters holding a lease.",
        |g| g.requesters as f64,
    ),
    (
        "doorman_server_resource_learning_mode",
        "1 while in learning mode.",
        |g| if g.learning { 1.0 } else { 0.0 },
    ),
];

/// Appends the per-resource gauges in the Prometheus text format.
fn write_resource_gauges(out: &mut String, gauges: &[ResourceGauge]) {
    let mut numbers = Numbers::default();
    for (name, help, value) in RESOURCE_GAUGES {
        for line in ["# HELP ", name, " ", help, "\n# TYPE ", name, " gauge\n"] {
            out.push_str(line);
        }
        for g in gauges {
            out.push_str(name);
            out.push_str("{resource=\"");
            out.push_str(&escape_label(&g.id));
            out.push_str("\"} ");
            out.push_str(sample(&mut numbers, value(g)));
            out.push('\n');
        }
    }
}

/// Number formatting buffers: integers (most samples: counts, flags and
/// whole capacities) are much cheaper to print than floats.
#[derive(Default)]
struct Numbers {
    ints: itoa::Buffer,
    floats: ryu::Buffer,
}

/// Below 2^53 every integer is exact in an f64.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

/// A sample value as the text format wants it.
fn sample(buf: &mut Numbers, v: f64) -> &str {
    match v {
        v if v.is_nan() => "NaN",
        f64::INFINITY => "+Inf",
        f64::NEG_INFINITY => "-Inf",
        v if v.fract() == 0.0 && v.abs() < EXACT_INTEGERS => buf.ints.format(v as i64),
        v => buf.floats.format_finite(v),
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape_label(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .into()
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let r = Registry::new();
        let counters = |name: &str, help: &str, labels: &[&str]| {
            register(&r, IntCounterVec::new(Opts::new(name, help), labels))
        };
        let latency = HistogramOpts::new(
            "doorman_server_request_duration_seconds",
            "RPC handling time, by method.",
        )
        .buckets(LATENCY_BUCKETS.to_vec());
        Metrics {
            requests: counters(
                "doorman_server_requests_total",
                "RPCs received, by method.",
                &["method"],
            ),
            errors: counters(
                "doorman_server_request_errors_total",
                "RPCs that failed, by method and gRPC code.",
                &["method", "code"],
            ),
            config_reloads: counters(
                "doorman_server_config_reloads_total",
                "Config loads, by result (ok, error).",
                &["result"],
            ),
            config_watch_restarts: register(
                &r,
                IntCounter::new(
                    "doorman_server_config_watch_restarts_total",
                    "Times the etcd config watch was lost and re-established (the key is re-read).",
                ),
            ),
            rejected: counters(
                "doorman_server_rejected_resources_total",
                "Resource entries left out of a request, by method and reason.",
                &["method", "reason"],
            ),
            tls_handshake_failures: counters(
                "doorman_server_tls_handshake_failures_total",
                "TLS handshakes that failed, by port (grpc, http) and reason.",
                &["port", "reason"],
            ),
            tls_reloads: counters(
                "doorman_server_tls_reloads_total",
                "Reloads of the TLS certificate, key and client CA, by result (ok, error).",
                &["result"],
            ),
            token_reloads: counters(
                "doorman_server_token_reloads_total",
                "Reloads of the bearer-token file after it changed or on SIGHUP, by result (ok, error).",
                &["result"],
            ),
            auth_failures: counters(
                "doorman_server_auth_failures_total",
                "Requests refused because their bearer token was malformed or unknown, by reason.",
                &["reason"],
            ),
            denied: counters(
                "doorman_server_access_denied_total",
                "Requests refused by the config's access rules, by action (acquire, serve, read).",
                &["action"],
            ),
            latency: register(&r, HistogramVec::new(latency, &["method"])),
            config_version: register(
                &r,
                IntGauge::new(
                    "doorman_server_config_version",
                    "Version of the running config: the etcd revision that wrote it (0 for a file).",
                ),
            ),
            config_info: register(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "doorman_server_config_info",
                        "The running config (value 1): its SHA-256 and who pushed it.",
                    ),
                    &["sha256", "pusher"],
                ),
            ),
            unmatched: register(
                &r,
                IntCounter::new(
                    "doorman_server_unmatched_resource_requests_total",
                    "Resource requests no template matched (granted what they asked for).",
                ),
            ),
            expired: register(
                &r,
                IntCounter::new(
                    "doorman_server_expired_leases_total",
                    "Leases forgotten because they expired.",
                ),
            ),
            is_master: register(
                &r,
                IntGauge::new(
                    "doorman_server_is_master",
                    "1 if this server is the master.",
                ),
            ),
            leases: register(
                &r,
                IntGauge::new("doorman_server_leases", "Live leases over all resources."),
            ),
            registry: r,
        }
    }

    /// The registry (to add more metrics or gather).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Records one RPC.
    pub fn observe(&self, method: &str, seconds: f64, error: Option<tonic::Code>) {
        self.requests.with_label_values(&[method]).inc();
        self.latency.with_label_values(&[method]).observe(seconds);
        if let Some(code) = error {
            self.errors
                .with_label_values(&[method, &format!("{code:?}")])
                .inc();
        }
    }

    /// Counts a resource entry left out of a `method` request.
    pub fn rejected(&self, method: &str, reason: &str) {
        self.rejected.with_label_values(&[method, reason]).inc();
    }

    /// RPCs of `method` received so far.
    pub fn requests(&self, method: &str) -> u64 {
        self.requests.with_label_values(&[method]).get()
    }

    /// Counts a lost etcd config watch.
    pub fn config_watch_restart(&self) {
        self.config_watch_restarts.inc();
    }

    /// Etcd config watches lost so far.
    pub fn config_watch_restarts(&self) -> u64 {
        self.config_watch_restarts.get()
    }

    /// Counts a request whose token was refused.
    pub fn auth_failed(&self, reason: &str) {
        self.auth_failures.with_label_values(&[reason]).inc();
    }

    /// Counts a request the access rules refused.
    pub fn denied(&self, action: &str) {
        self.denied.with_label_values(&[action]).inc();
    }

    /// Records which config runs.
    pub fn config_version(&self, v: &ConfigVersion) {
        self.config_version.set(v.version.unwrap_or(0));
        self.config_info.reset();
        let pusher = v.pusher.as_deref().unwrap_or("");
        self.config_info
            .with_label_values(&[v.sha256.as_str(), pusher])
            .set(1);
    }

    /// Records a config load.
    pub fn config_reload(&self, ok: bool) {
        self.config_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    /// Counts a failed TLS handshake.
    pub fn tls_handshake_failed(&self, port: &str, reason: &str) {
        self.tls_handshake_failures
            .with_label_values(&[port, reason])
            .inc();
    }

    /// TLS handshakes of `port` that failed for `reason` so far.
    pub fn tls_handshake_failures(&self, port: &str, reason: &str) -> u64 {
        self.tls_handshake_failures
            .with_label_values(&[port, reason])
            .get()
    }

    /// Records a reload of the TLS material.
    pub fn tls_reload(&self, ok: bool) {
        self.tls_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    /// Counts a reload of the bearer-token file.
    pub fn token_reload(&self, ok: bool) {
        self.token_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    /// Reloads of the bearer-token file so far that succeeded (`ok`) or
    /// failed.
    pub fn token_reloads(&self, ok: bool) -> u64 {
        self.token_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .get()
    }

    /// Reloads of the TLS material so far that succeeded (`ok`) or failed.
    pub fn tls_reloads(&self, ok: bool) -> u64 {
        self.tls_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .get()
    }

    /// Refreshes the core's counters and renders the text format, with the
    /// per-resource gauges of `gauges`.
    pub fn render(&self, gauges: &[ResourceGauge], counters: Counters, is_master: bool) -> String {
        self.unmatched.inc_by(
            counters
                .unmatched_requests
                .saturating_sub(self.unmatched.get()),
        );
        self.expired
            .inc_by(counters.expired_leases.saturating_sub(self.expired.get()));
        self.is_master.set(i64::from(is_master));
        self.leases
            .set(gauges.iter().map(|g| g.requesters as i64).sum());
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            return format!("# error encoding metrics: {e}\n");
        }
        let mut text = String::from_utf8(buf).unwrap_or_default();
        // Five lines per resource of about 50 bytes besides the id: one
        // allocation instead of a doubling series of 30 MB at 100 000.
        let ids: usize = gauges.iter().map(|g| g.id.len()).sum();
        text.reserve(5 * (ids + 64 * gauges.len()));
        write_resource_gauges(&mut text, gauges);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_ids_are_escaped_in_labels() {
        let g = ResourceGauge {
            id: "a\"b\\c\nd".into(),
            capacity: 5.0,
            has: 1.5,
            wants: 2.0,
            requesters: 1,
            learning: true,
        };
        let text = Metrics::new().render(&[g], Counters::default(), true);
        assert!(
            text.contains("doorman_server_resource_has{resource=\"a\\\"b\\\\c\\nd\"} 1.5"),
            "{text}"
        );
        assert!(text.contains("doorman_server_resource_learning_mode{resource=\"a"));
        assert!(text.contains("# TYPE doorman_server_resource_capacity gauge"));
        assert!(text.contains("doorman_server_leases 1"));
        assert!(
            text.contains("doorman_server_resource_capacity{resource=\"a"),
            "{text}"
        );
        assert!(
            text.contains("} 5\n"),
            "whole numbers print as integers: {text}"
        );
    }
}
