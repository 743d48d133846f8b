//! Prometheus metrics of a lease server. Request metrics are recorded by the
//! service as requests happen; per-resource gauges and core counters are
//! refreshed from a core snapshot when `/metrics` is scraped, so resources
//! that disappear also disappear from the metrics.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

use doorman_core::server::{Counters, Status};

/// Every metric of one server, on its own registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    capacity: prometheus::GaugeVec,
    has: prometheus::GaugeVec,
    wants: prometheus::GaugeVec,
    clients: prometheus::GaugeVec,
    learning: prometheus::GaugeVec,
    unmatched: IntCounter,
    expired: IntCounter,
    config_reloads: IntCounterVec,
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

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let c = must(IntCounterVec::new(Opts::new(name, help), labels));
            must(registry.register(Box::new(c.clone())));
            c
        };
        let gauge_vec = |name: &str, help: &str| {
            let g = must(prometheus::GaugeVec::new(
                Opts::new(name, help),
                &["resource"],
            ));
            must(registry.register(Box::new(g.clone())));
            g
        };
        let requests = counter_vec(
            "doorman_server_requests_total",
            "RPCs received, by method.",
            &["method"],
        );
        let errors = counter_vec(
            "doorman_server_request_errors_total",
            "RPCs that failed, by method and gRPC code.",
            &["method", "code"],
        );
        let config_reloads = counter_vec(
            "doorman_server_config_reloads_total",
            "Config loads, by result (ok, error).",
            &["result"],
        );
        let latency = must(HistogramVec::new(
            HistogramOpts::new(
                "doorman_server_request_duration_seconds",
                "RPC handling time, by method.",
            )
            .buckets(vec![
                0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                0.025, 0.1,
            ]),
            &["method"],
        ));
        must(registry.register(Box::new(latency.clone())));
        let unmatched = must(IntCounter::new(
            "doorman_server_unmatched_resource_requests_total",
            "Resource requests no template matched (granted what they asked for).",
        ));
        must(registry.register(Box::new(unmatched.clone())));
        let expired = must(IntCounter::new(
            "doorman_server_expired_leases_total",
            "Leases forgotten because they expired.",
        ));
        must(registry.register(Box::new(expired.clone())));
        let is_master = must(IntGauge::new(
            "doorman_server_is_master",
            "1 if this server is the master.",
        ));
        must(registry.register(Box::new(is_master.clone())));
        let leases = must(IntGauge::new(
            "doorman_server_leases",
            "Live leases over all resources.",
        ));
        must(registry.register(Box::new(leases.clone())));
        Metrics {
            requests,
            errors,
            latency,
            capacity: gauge_vec("doorman_server_resource_capacity", "Capacity being shared."),
            has: gauge_vec(
                "doorman_server_resource_has",
                "Capacity handed out (sum of has).",
            ),
            wants: gauge_vec("doorman_server_resource_wants", "Sum of wants."),
            clients: gauge_vec(
                "doorman_server_resource_clients",
                "Requesters holding a lease.",
            ),
            learning: gauge_vec(
                "doorman_server_resource_learning_mode",
                "1 while in learning mode.",
            ),
            unmatched,
            expired,
            config_reloads,
            is_master,
            leases,
            registry,
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
