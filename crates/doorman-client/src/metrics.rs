//! Client Prometheus metrics, registered on a registry the user passes in:
//! RPCs, errors and latency by method; capacity, wants and mode per
//! resource; permit wait time, refused acquisitions, acquisitions shadow
//! mode let through, and fallback activations per resource.
//!
//! Must not: register on a global registry or change client state.

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

use doorman_core::client::Mode;

/// The client's metrics.
#[derive(Debug, Clone)]
pub struct ClientMetrics {
    rpcs: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    capacity: GaugeVec,
    wants: GaugeVec,
    mode: IntGaugeVec,
    wait: HistogramVec,
    refused: IntCounterVec,
    shadow_refused: IntCounterVec,
    fallbacks: IntCounterVec,
    pushes: IntCounter,
}

/// The metrics one resource records itself.
#[derive(Debug, Clone)]
pub(crate) struct ResourceMetrics {
    /// Time spent waiting for a permit.
    pub wait: Histogram,
    /// `try_acquire`/`try_mark` calls that found no capacity.
    pub refused: IntCounter,
    /// Acquisitions shadow mode let through that would have waited or
    /// been refused.
    pub shadow_refused: IntCounter,
    capacity: Gauge,
    /// What the client asks for it.
    pub wants: Gauge,
    /// One gauge per mode, in `Mode::ALL`'s order.
    modes: Vec<IntGauge>,
    fallbacks: IntCounter,
}

impl ResourceMetrics {
    /// The capacity and mode applied now (by the task, or by the resource
    /// itself when its lease ends first). The mode gauges hold the
    /// previous mode: leaving a lease for a fallback mode counts as one
    /// activation (a resource starts in its fallback before its first
    /// lease; that is not counted).
    pub fn applied(&self, capacity: f64, mode: Mode) {
        let leased = Mode::ALL
            .iter()
            .position(|m| *m == Mode::Lease)
            .is_some_and(|i| self.modes[i].get() == 1);
        if leased && mode.is_fallback() {
            self.fallbacks.inc();
        }
        self.capacity.set(capacity);
        for (m, g) in Mode::ALL.iter().zip(&self.modes) {
            g.set(i64::from(*m == mode));
        }
    }
}

impl ClientMetrics {
    /// Creates the metrics and registers them on `registry`. Fails if they
    /// are already registered there (one registry per client, or use
    /// `Registry::new_custom` with a prefix or labels).
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let per_resource = &["resource"];
        Ok(ClientMetrics {
            rpcs: counters(registry, "doorman_client_rpcs_total", "RPCs sent, by method.", &["method"])?,
            errors: counters(
                registry,
                "doorman_client_rpc_errors_total",
                "RPCs that failed, by method and gRPC code.",
                &["method", "code"],
            )?,
            latency: histograms(
                registry,
                HistogramOpts::new("doorman_client_rpc_duration_seconds", "RPC latency, by method."),
                &["method"],
            )?,
            capacity: gauges(registry, "doorman_client_capacity", "Capacity applied, per resource.")?,
            wants: gauges(registry, "doorman_client_wants", "Wants sent, per resource.")?,
            mode: registered(
                registry,
                IntGaugeVec::new(
                    Opts::new(
                        "doorman_client_mode",
                        "1 for the mode a resource is in (lease, pessimistic, optimistic, safe, refused).",
                    ),
                    &["resource", "mode"],
                )?,
            )?,
            wait: histograms(
                registry,
                HistogramOpts::new("doorman_client_permit_wait_seconds", "Time spent waiting for a permit.")
                    .buckets(vec![0.0, 0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]),
                per_resource,
            )?,
            refused: counters(
                registry,
                "doorman_client_refused_total",
                "Acquisitions refused at once for lack of capacity (try_acquire, try_mark).",
                per_resource,
            )?,
            shadow_refused: counters(
                registry,
                "doorman_client_shadow_would_refuse_total",
                "Acquisitions of a resource in shadow mode that went ahead but would have waited or been refused.",
                per_resource,
            )?,
            fallbacks: counters(
                registry,
                "doorman_client_fallback_activations_total",
                "Times a resource went from a lease to a fallback mode (pessimistic, optimistic, safe).",
                per_resource,
            )?,
            pushes: registered(
                registry,
                IntCounter::new(
                    "doorman_client_pushed_grants_total",
                    "Grants the server pushed on the lease stream.",
                )?,
            )?,
        })
    }

    /// Counts `n` pushed grants.
    pub(crate) fn pushed(&self, n: usize) {
        self.pushes.inc_by(n as u64);
    }

    pub(crate) fn rpc(&self, method: &str, seconds: f64, error: Option<tonic::Code>) {
        self.rpcs.with_label_values(&[method]).inc();
        self.latency.with_label_values(&[method]).observe(seconds);
        if let Some(code) = error {
            self.errors
                .with_label_values(&[method, &format!("{code:?}")])
                .inc();
        }
    }

    pub(crate) fn forget(&self, id: &str) {
        let _ = self.capacity.remove_label_values(&[id]);
        let _ = self.wants.remove_label_values(&[id]);
        for m in Mode::ALL {
            let _ = self.mode.remove_label_values(&[id, m.name()]);
        }
        let _ = self.wait.remove_label_values(&[id]);
        let _ = self.refused.remove_label_values(&[id]);
        let _ = self.shadow_refused.remove_label_values(&[id]);
        let _ = self.fallbacks.remove_label_values(&[id]);
    }

    pub(crate) fn for_resource(&self, id: &str) -> ResourceMetrics {
        ResourceMetrics {
            wait: self.wait.with_label_values(&[id]),
            refused: self.refused.with_label_values(&[id]),
            shadow_refused: self.shadow_refused.with_label_values(&[id]),
            capacity: self.capacity.with_label_values(&[id]),
            wants: self.wants.with_label_values(&[id]),
            modes: Mode::ALL
                .iter()
                .map(|m| self.mode.with_label_values(&[id, m.name()]))
                .collect(),
            fallbacks: self.fallbacks.with_label_values(&[id]),
        }
    }
}

/// `metric`, registered on `registry`.
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> prometheus::Result<M> {
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

fn counters(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    registered(registry, IntCounterVec::new(Opts::new(name, help), labels)?)
}

fn gauges(registry: &Registry, name: &str, help: &str) -> prometheus::Result<GaugeVec> {
    registered(
        registry,
        GaugeVec::new(Opts::new(name, help), &["resource"])?,
    )
}

fn histograms(
    registry: &Registry,
    opts: HistogramOpts,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    registered(registry, HistogramVec::new(opts, labels)?)
}
