//! Prometheus metrics of a lease server, recorded by the boundaries (the
//! gRPC service per request, the config sources per reload) and rendered by
//! the HTTP boundary's `/metrics`. Request metrics are recorded as requests
//! happen; per-resource gauges and core counters are
//! written from a stepwise core snapshot when `/metrics` is scraped, so
//! resources that disappear also disappear from the metrics.
//!
//! The series computed at each scrape from a core snapshot (per template
//! or per resource, towards the parent) are `resources.rs`.
//!
//! Must not: change server state or keep anything but the metrics.

pub mod envoy;
pub mod resources;

use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use doorman_core::server::{Counters, LinkStatus, ResourceGauge};
use doorman_core::Time;

use crate::config_version::ConfigVersion;
pub use resources::ResourceSeries;
use resources::Writer;

/// What one scrape exports from the server's state besides the registry.
#[derive(Debug, Default)]
pub struct Scrape {
    /// Per-resource figures, taken step by step.
    pub gauges: Vec<ResourceGauge>,
    /// The core's counters.
    pub counters: Counters,
    /// This server is the master.
    pub is_master: bool,
    /// It knows the master (itself or another).
    pub master_known: bool,
    /// Its election session is alive (always, standalone).
    pub session_up: bool,
    /// The link to the parent; `None` at a root.
    pub parent: Option<LinkStatus>,
    /// Per template or per resource.
    pub series: ResourceSeries,
}

/// The `result` label of the reload counters.
fn result(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "error"
    }
}

/// Every metric of one server, on its own registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The Envoy front-ends'.
    pub envoy: envoy::EnvoyMetrics,
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
    parent_errors: IntCounterVec,
    master_transitions: IntCounter,
    config_last_reload: Gauge,
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
            envoy: envoy::EnvoyMetrics::new(&r),
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
                "Requests refused because their bearer token was malformed or unknown, or because they carried no identity where one is required, by reason (malformed, unknown_token, anonymous).",
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
            parent_errors: counters(
                "doorman_server_parent_errors_total",
                "Failed GetServerCapacity calls to the parent, by gRPC code.",
                &["code"],
            ),
            master_transitions: register(
                &r,
                IntCounter::new(
                    "doorman_server_master_transitions_total",
                    "Times this server became or stopped being the master.",
                ),
            ),
            config_last_reload: register(
                &r,
                Gauge::new(
                    "doorman_server_config_last_reload_timestamp_seconds",
                    "Unix time of the last successful config load (0: none yet).",
                ),
            ),
            registry: r,
        }
        .with_build_and_process()
    }

    /// Registers `doorman_build_info` and, on Linux, the standard
    /// `process_*` metrics (CPU, RSS, open and max fds, start time).
    fn with_build_and_process(self) -> Self {
        let info = register(
            &self.registry,
            IntGaugeVec::new(
                Opts::new(
                    "doorman_build_info",
                    "The running binary (value 1): its version and source revision.",
                ),
                &["version", "revision"],
            ),
        );
        let revision = option_env!("DOORMAN_REVISION").unwrap_or("unknown");
        info.with_label_values(&[env!("CARGO_PKG_VERSION"), revision])
            .set(1);
        #[cfg(target_os = "linux")]
        must(self.registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        )));
        self
    }

    /// Counts a failed call to the parent.
    pub fn parent_error(&self, code: tonic::Code) {
        self.parent_errors
            .with_label_values(&[&format!("{code:?}")])
            .inc();
    }

    /// Counts a change of mastership.
    pub fn master_transition(&self) {
        self.master_transitions.inc();
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

    /// Records a config load at `now` (the server's clock).
    pub fn config_reload(&self, ok: bool, now: Time) {
        if ok {
            self.config_last_reload.set(now.as_secs_f64());
        }
        self.config_reloads.with_label_values(&[result(ok)]).inc();
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
        self.tls_reloads.with_label_values(&[result(ok)]).inc();
    }

    /// Counts a reload of the bearer-token file.
    pub fn token_reload(&self, ok: bool) {
        self.token_reloads.with_label_values(&[result(ok)]).inc();
    }

    /// Reloads of the bearer-token file so far that succeeded (`ok`) or
    /// failed.
    pub fn token_reloads(&self, ok: bool) -> u64 {
        self.token_reloads.with_label_values(&[result(ok)]).get()
    }

    /// Reloads of the TLS material so far that succeeded (`ok`) or failed.
    pub fn tls_reloads(&self, ok: bool) -> u64 {
        self.tls_reloads.with_label_values(&[result(ok)]).get()
    }

    /// Refreshes the core's counters and renders the text format: the
    /// registry, then the series computed from the snapshot.
    pub fn render(&self, scrape: &Scrape) -> String {
        let c = &scrape.counters;
        self.unmatched
            .inc_by(c.unmatched_requests.saturating_sub(self.unmatched.get()));
        self.expired
            .inc_by(c.expired_leases.saturating_sub(self.expired.get()));
        self.is_master.set(i64::from(scrape.is_master));
        let gauges = &scrape.gauges;
        self.leases
            .set(gauges.iter().map(|g| g.requesters as i64).sum());
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            return format!("# error encoding metrics: {e}\n");
        }
        let mut text = String::from_utf8(buf).unwrap_or_default();
        if let ResourceSeries::PerResource(max) = scrape.series {
            // About 5 lines of 64 bytes besides the id per resource shown:
            // one allocation instead of a doubling series.
            let shown = &gauges[..max.min(gauges.len())];
            let ids: usize = shown.iter().map(|g| g.id.len() + g.template.len()).sum();
            text.reserve(5 * (ids + 64 * shown.len()));
        }
        resources::write(&mut text, gauges, scrape.series);
        write_node(&mut Writer::new(&mut text), scrape);
        text
    }
}

/// Election and parent-link gauges of one scrape.
fn write_node(w: &mut Writer<'_>, s: &Scrape) {
    let flag = |b: bool| f64::from(u8::from(b));
    w.gauge(
        "doorman_server_master_known",
        "1 if this server knows its node's master (itself or another).",
        flag(s.master_known),
    );
    w.gauge(
        "doorman_server_election_session_up",
        "1 while the election session (the etcd lease) is alive; 1 standalone.",
        flag(s.session_up),
    );
    let Some(p) = &s.parent else {
        return;
    };
    w.gauge(
        "doorman_server_parent_connected",
        "1 if the last call to the parent did not fail (1 before the first).",
        flag(!p.failing),
    );
    w.gauge(
        "doorman_server_parent_last_success_timestamp_seconds",
        "Unix time of the parent's last successful answer (0: never).",
        p.last_success_unix.unwrap_or(0.0),
    );
    // Nothing in use depends on the parent: as good as a fresh lease.
    let left = resources::parent_lease_left(&s.gauges).unwrap_or(f64::INFINITY);
    w.gauge(
        "doorman_server_parent_lease_seconds_left",
        "Seconds until the earliest parent lease of a resource in use expires (0: expired or none came; +Inf: nothing in use depends on the parent).",
        left,
    );
}

#[cfg(test)]
mod tests;
