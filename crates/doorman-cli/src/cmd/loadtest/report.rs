//! What `doorman loadtest` reports: latency percentiles from an HDR
//! histogram, the run's figures (with what the clients hold at the end),
//! and the table printed without `--json`.
//!
//! Must not: send anything (the load is `mod.rs`'s).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;

use std::sync::atomic::Ordering;

use super::{Protocol, ServerCpu, Shared, WorkerResult};

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub server: String,
    pub protocol: Protocol,
    pub clients: usize,
    pub resources: usize,
    pub concurrency: usize,
    /// `--rate`: requests per second, open loop (`None`: closed loop).
    pub rate: Option<f64>,
    pub connections: usize,
    /// Seconds measured (after warmup).
    pub duration_s: f64,
    /// Successful RPCs while measuring.
    pub rpcs: u64,
    pub rpcs_per_s: f64,
    pub latency_us: Latency,
    /// Failed RPCs while measuring, by gRPC code.
    pub errors: BTreeMap<String, u64>,
    /// `--protocol rls`: answers that were OVER_LIMIT (counted in `rpcs`);
    /// `--protocol stream`: grants pushed.
    pub over_limit: u64,
    /// Mastership redirects followed.
    pub redirects: u64,
    /// Σ of the last unexpired grants, per resource.
    pub granted: BTreeMap<String, f64>,
    /// The capacity given with --capacity.
    pub capacity: Option<f64>,
    /// Why grants were small at the end, as the server said (learning
    /// mode, waiting for its parent).
    pub note: Option<String>,
    /// `--server-pid`: the server's CPU while measuring.
    pub server_cpu: Option<ServerCpu>,
    /// Wall time of the whole run, warmup included.
    pub wall_s: f64,
}

/// Percentiles of a histogram of microseconds.
pub fn latency(h: &Histogram<u64>) -> Latency {
    Latency {
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
    }
}

pub(super) fn histogram() -> Histogram<u64> {
    // 1 µs … 60 s, 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds are valid")
}

/// Prints a report as a small table.
pub fn print(r: &Report) {
    let pace = match r.rate {
        Some(rate) => format!("open loop at {rate} requests/s, latency from when each was due"),
        None => "closed loop".to_string(),
    };
    println!(
        "doorman loadtest: {} · {} clients × {} resource(s) · concurrency {} over {} connection(s) · {pace}",
        r.server, r.clients, r.resources, r.concurrency, r.connections
    );
    let method = match r.protocol {
        Protocol::Capacity => "GetCapacity",
        Protocol::Rls => "ShouldRateLimit",
        Protocol::Stream => "CapacityStream",
    };
    println!(
        "rpcs        {} in {:.1} s = {:.0} {method}/s",
        r.rpcs, r.duration_s, r.rpcs_per_s
    );
    match r.protocol {
        Protocol::Rls => println!("over limit  {} of the answers", r.over_limit),
        Protocol::Stream => println!("pushed      {} grants", r.over_limit),
        Protocol::Capacity => {}
    }
    let l = r.latency_us;
    println!(
        "latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (mean {:.0})",
        l.p50, l.p90, l.p99, l.p999, l.max, l.mean
    );
    if r.errors.is_empty() {
        println!("errors      none");
    } else {
        let e: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        println!("errors      {}", e.join(", "));
    }
    println!("redirects   {}", r.redirects);
    if let Some(c) = r.server_cpu {
        println!(
            "server cpu  pid {}: {:.2} s = {:.2} cores, {:.1} µs per RPC",
            c.pid, c.cpu_s, c.cores, c.us_per_rpc
        );
    }
    for (id, g) in &r.granted {
        let g = g + 0.0; // no "-0.0"
        match r.capacity {
            Some(c) if c > 0.0 => println!(
                "granted     {id}: Σ {g:.1} of capacity {c} ({:.1} %)",
                g / c * 100.0
            ),
            _ => println!("granted     {id}: Σ {g:.1}"),
        }
    }
    if let Some(n) = &r.note {
        println!("server says {n}");
    }
}

/// The report of a run measured for `measured` seconds (without the
/// server's CPU and the wall time, which the caller adds).
pub(super) fn of_run(shared: &Shared, totals: WorkerResult, measured: f64) -> Report {
    let opts = &shared.opts;
    let server = shared
        .target
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .addr
        .clone();
    let note = shared
        .note
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let granted = match opts.protocol {
        Protocol::Capacity | Protocol::Stream => granted(shared),
        Protocol::Rls => BTreeMap::new(),
    };
    Report {
        server,
        protocol: opts.protocol,
        clients: opts.clients,
        resources: opts.resources,
        concurrency: opts.concurrency,
        rate: opts.rate,
        connections: opts.connections,
        duration_s: measured,
        rpcs: totals.rpcs,
        rpcs_per_s: totals.rpcs as f64 / measured,
        latency_us: latency(&totals.hist),
        errors: totals.errors,
        over_limit: totals.over_limit,
        redirects: shared.redirects.load(Ordering::Relaxed),
        granted,
        capacity: opts.capacity,
        note,
        server_cpu: None,
        wall_s: 0.0,
    }
}

/// Σ of the unexpired leases the clients hold, per resource.
fn granted(shared: &Shared) -> BTreeMap<String, f64> {
    let now = super::now_secs();
    let mut granted = BTreeMap::new();
    for (i, id) in shared.resources.iter().enumerate() {
        let sum: f64 = shared
            .leases
            .iter()
            .filter_map(|l| l.lock().unwrap_or_else(|e| e.into_inner())[i])
            .filter(|l| l.expiry_time > now)
            .map(|l| l.capacity)
            .sum();
        granted.insert(id.clone(), sum);
    }
    granted
}
