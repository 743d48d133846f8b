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
mod families;
pub mod resources;

use prometheus::core::Collector;
use prometheus::{Encoder, IntGaugeVec, Opts, Registry, TextEncoder};

use doorman_core::server::{Counters, LinkStatus, ResourceGauge};
use doorman_lease::Time;

use crate::config_version::ConfigVersion;
use families::{ConfigFamilies, Node, Rpc, Security};
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
    rpc: Rpc,
    config: ConfigFamilies,
    security: Security,
    node: Node,
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
        Metrics {
            envoy: envoy::EnvoyMetrics::new(&r),
            rpc: Rpc::new(&r),
            config: ConfigFamilies::new(&r),
            security: Security::new(&r),
            node: Node::new(&r),
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
        self.node
            .parent_errors
            .with_label_values(&[&format!("{code:?}")])
            .inc();
    }

    /// Counts a change of mastership.
    pub fn master_transition(&self) {
        self.node.master_transitions.inc();
    }

    /// The registry (to add more metrics or gather).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Records one RPC.
    pub fn observe(&self, method: &str, seconds: f64, error: Option<tonic::Code>) {
        self.rpc.requests.with_label_values(&[method]).inc();
        self.rpc
            .latency
            .with_label_values(&[method])
            .observe(seconds);
        if let Some(code) = error {
            self.rpc
                .errors
                .with_label_values(&[method, &format!("{code:?}")])
                .inc();
        }
    }

    /// Counts a resource entry left out of a `method` request.
    pub fn rejected(&self, method: &str, reason: &str) {
        self.rpc.rejected.with_label_values(&[method, reason]).inc();
    }

    /// Counts a grant pushed on a lease stream.
    pub fn pushed(&self) {
        self.rpc.pushes.inc();
    }

    /// Counts a request received on a lease stream.
    pub fn stream_request(&self) {
        self.rpc.stream_requests.inc();
    }

    /// Requests received on lease streams so far.
    pub fn stream_requests_seen(&self) -> u64 {
        self.rpc.stream_requests.get()
    }

    /// A lease stream opened (`+1`) or ended (`-1`).
    pub fn streams(&self, delta: i64) {
        self.rpc.streams.add(delta);
    }

    /// RPCs of `method` received so far.
    pub fn requests(&self, method: &str) -> u64 {
        self.rpc.requests.with_label_values(&[method]).get()
    }

    /// Counts a lost etcd config watch.
    pub fn config_watch_restart(&self) {
        self.config.watch_restarts.inc();
    }

    /// Etcd config watches lost so far.
    pub fn config_watch_restarts(&self) -> u64 {
        self.config.watch_restarts.get()
    }

    /// Counts a request whose token was refused.
    pub fn auth_failed(&self, reason: &str) {
        self.security
            .auth_failures
            .with_label_values(&[reason])
            .inc();
    }

    /// Counts a request the access rules refused.
    pub fn denied(&self, action: &str) {
        self.security.denied.with_label_values(&[action]).inc();
    }

    /// Records which config runs.
    pub fn config_version(&self, v: &ConfigVersion) {
        self.config.version.set(v.version.unwrap_or(0));
        self.config.info.reset();
        let pusher = v.pusher.as_deref().unwrap_or("");
        self.config
            .info
            .with_label_values(&[v.sha256.as_str(), pusher])
            .set(1);
    }

    /// Records a config load at `now` (the server's clock).
    pub fn config_reload(&self, ok: bool, now: Time) {
        if ok {
            self.config.last_reload.set(now.as_secs_f64());
        }
        self.config.reloads.with_label_values(&[result(ok)]).inc();
    }

    /// Counts a failed TLS handshake.
    pub fn tls_handshake_failed(&self, port: &str, reason: &str) {
        self.security
            .tls_handshake_failures
            .with_label_values(&[port, reason])
            .inc();
    }

    /// TLS handshakes of `port` that failed for `reason` so far.
    pub fn tls_handshake_failures(&self, port: &str, reason: &str) -> u64 {
        self.security
            .tls_handshake_failures
            .with_label_values(&[port, reason])
            .get()
    }

    /// Records a reload of the TLS material.
    pub fn tls_reload(&self, ok: bool) {
        self.security
            .tls_reloads
            .with_label_values(&[result(ok)])
            .inc();
    }

    /// Counts a reload of the bearer-token file.
    pub fn token_reload(&self, ok: bool) {
        self.security
            .token_reloads
            .with_label_values(&[result(ok)])
            .inc();
    }

    /// Reloads of the bearer-token file so far that succeeded (`ok`) or
    /// failed.
    pub fn token_reloads(&self, ok: bool) -> u64 {
        self.security
            .token_reloads
            .with_label_values(&[result(ok)])
            .get()
    }

    /// Reloads of the TLS material so far that succeeded (`ok`) or failed.
    pub fn tls_reloads(&self, ok: bool) -> u64 {
        self.security
            .tls_reloads
            .with_label_values(&[result(ok)])
            .get()
    }

    /// Refreshes the core's counters and renders the text format: the
    /// registry, then the series computed from the snapshot.
    pub fn render(&self, scrape: &Scrape) -> String {
        let c = &scrape.counters;
        self.node.unmatched.inc_by(
            c.unmatched_requests
                .saturating_sub(self.node.unmatched.get()),
        );
        self.node
            .expired
            .inc_by(c.expired_leases.saturating_sub(self.node.expired.get()));
        self.node.is_master.set(i64::from(scrape.is_master));
        let gauges = &scrape.gauges;
        self.node
            .leases
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
