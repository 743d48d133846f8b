//! Prometheus metrics of a lease server, recorded by the boundaries (the
//! gRPC service per request, the config sources per reload) and rendered by
//! the HTTP boundary's `/metrics`. Request metrics are recorded as requests
//! happen; per-resource gauges and core counters are
//! refreshed from a core snapshot when `/metrics` is scraped, so resources
//! that disappear also disappear from the metrics.
//!
//! Must not: change server state or keep anything but the metrics.

use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

use doorman_core::server::{Counters, Status};

/// Every metric of one server, on its own registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    resources: ResourceGauges,
    unmatched: IntCounter,
    expired: IntCounter,
    config_reloads: IntCounterVec,
    rejected: IntCounterVec,
    is_master: IntGauge,
    leases: IntGauge,
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

/// The per-resource gauges, rebuilt from each snapshot.
#[derive(Debug, Clone)]
struct ResourceGauges {
    capacity: GaugeVec,
    has: GaugeVec,
    wants: GaugeVec,
    clients: GaugeVec,
    learning: GaugeVec,
}

impl ResourceGauges {
    fn new(r: &Registry) -> Self {
        let gauge = |name: &str, help: &str| {
            register(r, GaugeVec::new(Opts::new(name, help), &["resource"]))
        };
        ResourceGauges {
            capacity: gauge("doorman_server_resource_capacity", "Capacity being shared."),
            has: gauge(
                "doorman_server_resource_has",
                "Capacity handed out (sum of has).",
            ),
            wants: gauge("doorman_server_resource_wants", "Sum of wants."),
            clients: gauge(
                "doorman_server_resource_clients",
                "Requesters holding a lease.",
            ),
            learning: gauge(
                "doorman_server_resource_learning_mode",
                "1 while in learning mode.",
            ),
        }
    }

    /// Resources that are gone disappear from the metrics too.
    fn update(&self, status: &Status) {
        for g in [
            &self.capacity,
            &self.has,
            &self.wants,
            &self.clients,
            &self.learning,
        ] {
            g.reset();
        }
        for r in &status.resources {
            let l = [r.id.as_str()];
            self.capacity.with_label_values(&l).set(r.capacity);
            self.has.with_label_values(&l).set(r.has);
            self.wants.with_label_values(&l).set(r.wants);
            self.clients.with_label_values(&l).set(r.requesters as f64);
            self.learning
                .with_label_values(&l)
                .set(if r.learning { 1.0 } else { 0.0 });
        }
    }
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
            rejected: counters(
                "doorman_server_rejected_resources_total",
                "Resource entries left out of a request, by method and reason.",
                &["method", "reason"],
            ),
            latency: register(&r, HistogramVec::new(latency, &["method"])),
            resources: ResourceGauges::new(&r),
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

    /// Records a config load.
    pub fn config_reload(&self, ok: bool) {
        self.config_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    /// Refreshes gauges from a snapshot and renders the text format.
    pub fn render(&self, status: &Status, counters: Counters) -> String {
        self.resources.update(status);
        self.unmatched.inc_by(
            counters
                .unmatched_requests
                .saturating_sub(self.unmatched.get()),
        );
        self.expired
            .inc_by(counters.expired_leases.saturating_sub(self.expired.get()));
        self.is_master.set(i64::from(status.is_master));
        self.leases.set(status.leases as i64);
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            return format!("# error encoding metrics: {e}\n");
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}
