//! The registered metric families of a server, in four groups by who
//! records them: the RPCs ([`Rpc`]), the running config ([`ConfigFamilies`]),
//! tokens, TLS and access rules ([`Security`]), and the node's place in
//! the tree ([`Node`]). Each group creates and registers its own; the
//! methods that record into them are `Metrics`'s (`mod.rs`).
//!
//! Must not: record anything (only create and register).

use prometheus::{
    Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

use super::register;

/// Handling-time buckets, 10 µs to 100 ms.
const LATENCY_BUCKETS: [f64; 12] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1,
];

/// Creates metrics in one registry.
struct Reg<'a>(&'a Registry);

impl Reg<'_> {
    fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        register(self.0, IntCounterVec::new(Opts::new(name, help), labels))
    }

    fn counter(&self, name: &str, help: &str) -> IntCounter {
        register(self.0, IntCounter::new(name, help))
    }

    fn int_gauge(&self, name: &str, help: &str) -> IntGauge {
        register(self.0, IntGauge::new(name, help))
    }
}

/// The RPCs: counted, timed, failed, entries left out.
#[derive(Debug, Clone)]
pub(super) struct Rpc {
    pub requests: IntCounterVec,
    pub errors: IntCounterVec,
    pub latency: HistogramVec,
    pub rejected: IntCounterVec,
    pub streams: IntGauge,
    pub stream_requests: IntCounter,
    pub pushes: IntCounter,
}

impl Rpc {
    pub fn new(r: &Registry) -> Self {
        let reg = Reg(r);
        let latency = HistogramOpts::new(
            "doorman_server_request_duration_seconds",
            "RPC handling time, by method.",
        )
        .buckets(LATENCY_BUCKETS.to_vec());
        Rpc {
            requests: reg.counters(
                "doorman_server_requests_total",
                "RPCs received, by method.",
                &["method"],
            ),
            errors: reg.counters(
                "doorman_server_request_errors_total",
                "RPCs that failed, by method and gRPC code.",
                &["method", "code"],
            ),
            latency: register(r, HistogramVec::new(latency, &["method"])),
            rejected: reg.counters(
                "doorman_server_rejected_resources_total",
                "Resource entries left out of a request, by method and reason.",
                &["method", "reason"],
            ),
            streams: reg.int_gauge(
                "doorman_server_lease_streams",
                "Lease streams (CapacityStream, ServerCapacityStream) open.",
            ),
            stream_requests: reg.counter(
                "doorman_server_stream_requests_total",
                "GetCapacity and GetServerCapacity requests received on lease streams.",
            ),
            pushes: reg.counter(
                "doorman_server_pushed_grants_total",
                "Grants pushed to holders on lease streams without a request.",
            ),
        }
    }
}

/// The running config: loads, watch restarts, which version, when.
#[derive(Debug, Clone)]
pub(super) struct ConfigFamilies {
    pub reloads: IntCounterVec,
    pub watch_restarts: IntCounter,
    pub version: IntGauge,
    pub info: IntGaugeVec,
    pub last_reload: Gauge,
}

impl ConfigFamilies {
    pub fn new(r: &Registry) -> Self {
        let reg = Reg(r);
        ConfigFamilies {
            reloads: reg.counters(
                "doorman_server_config_reloads_total",
                "Config loads, by result (ok, error).",
                &["result"],
            ),
            watch_restarts: reg.counter(
                "doorman_server_config_watch_restarts_total",
                "Times the etcd config watch was lost and re-established (the key is re-read).",
            ),
            version: reg.int_gauge(
                "doorman_server_config_version",
                "Version of the running config: the etcd revision that wrote it (0 for a file).",
            ),
            info: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "doorman_server_config_info",
                        "The running config (value 1): its SHA-256 and who pushed it.",
                    ),
                    &["sha256", "pusher"],
                ),
            ),
            last_reload: register(
                r,
                Gauge::new(
                    "doorman_server_config_last_reload_timestamp_seconds",
                    "Unix time of the last successful config load (0: none yet).",
                ),
            ),
        }
    }
}

/// Tokens, TLS and the access rules.
#[derive(Debug, Clone)]
pub(super) struct Security {
    pub tls_handshake_failures: IntCounterVec,
    pub tls_reloads: IntCounterVec,
    pub token_reloads: IntCounterVec,
    pub auth_failures: IntCounterVec,
    pub denied: IntCounterVec,
}

impl Security {
    pub fn new(r: &Registry) -> Self {
        let reg = Reg(r);
        Security {
            tls_handshake_failures: reg.counters(
                "doorman_server_tls_handshake_failures_total",
                "TLS handshakes that failed, by port (grpc, http) and reason.",
                &["port", "reason"],
            ),
            tls_reloads: reg.counters(
                "doorman_server_tls_reloads_total",
                "Reloads of the TLS certificate, key and client CA, by result (ok, error).",
                &["result"],
            ),
            token_reloads: reg.counters(
                "doorman_server_token_reloads_total",
                "Reloads of the bearer-token file after it changed or on SIGHUP, by result (ok, error).",
                &["result"],
            ),
            auth_failures: reg.counters(
                "doorman_server_auth_failures_total",
                "Requests refused because their bearer token was malformed or unknown, or because they carried no identity where one is required, by reason (malformed, unknown_token, anonymous).",
                &["reason"],
            ),
            denied: reg.counters(
                "doorman_server_access_denied_total",
                "Requests refused by the config's access rules, by action (acquire, serve, read).",
                &["action"],
            ),
        }
    }
}

/// The node: mastership, leases, the core's counters, the parent.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub unmatched: IntCounter,
    pub expired: IntCounter,
    pub is_master: IntGauge,
    pub leases: IntGauge,
    pub parent_errors: IntCounterVec,
    pub master_transitions: IntCounter,
}

impl Node {
    pub fn new(r: &Registry) -> Self {
        let reg = Reg(r);
        Node {
            unmatched: reg.counter(
                "doorman_server_unmatched_resource_requests_total",
                "Resource requests no template matched (granted what they asked for).",
            ),
            expired: reg.counter(
                "doorman_server_expired_leases_total",
                "Leases forgotten because they expired.",
            ),
            is_master: reg.int_gauge(
                "doorman_server_is_master",
                "1 if this server is the master.",
            ),
            leases: reg.int_gauge("doorman_server_leases", "Live leases over all resources."),
            parent_errors: reg.counters(
                "doorman_server_parent_errors_total",
                "Failed GetServerCapacity calls to the parent, by gRPC code.",
                &["code"],
            ),
            master_transitions: reg.counter(
                "doorman_server_master_transitions_total",
                "Times this server became or stopped being the master.",
            ),
        }
    }
}
