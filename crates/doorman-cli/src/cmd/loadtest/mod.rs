//! `doorman loadtest`: drives any server that speaks `doorman.Capacity`
//! (ours or an original Doorman), or with `--protocol rls` Envoy's rate
//! limit service (`rls.rs`), or with `--protocol stream` our lease
//! streams (`stream.rs`), with N clients × R resources, as fast as K
//! in-flight requests allow over C HTTP/2 connections (or at a fixed rate:
//! `pace.rs`), and reports RPC/s,
//! latency percentiles (HDR histogram), errors by status and the capacity
//! the clients were granted.
//!
//! It uses nothing but the wire protocol. Each client sends the `has` from
//! its previous answer, as a real client does. Mastership redirects are
//! followed only to the host that was given (another port on it), so the
//! load never goes anywhere but the address given. It stops by itself after
//! warmup + duration.
//!
//! Must not: send load anywhere but the host given, or run unbounded.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use doorman_client::tls::endpoint;
use doorman_client::{BearerToken, ClientTls};
use doorman_core::limits::{MAX_AMOUNT, MAX_RESOURCES_PER_REQUEST};
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use hdrhistogram::Histogram;
use serde::Serialize;
use tonic::transport::Channel;

use crate::args::{count, count_in_range, in_range};
use crate::tls_args::ClientTlsArgs;

mod pace;
mod report;
mod rls;
mod server_cpu;
mod stream;

use report::histogram;
pub use report::{print, Report};
pub use server_cpu::ServerCpu;

/// Which service the load calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// `doorman.Capacity/GetCapacity`.
    Capacity,
    /// Envoy's `RateLimitService/ShouldRateLimit` (domain `loadtest`, one
    /// descriptor `resource=ID` per resource; `--clients` plays no part).
    Rls,
    /// GetCapacity requests on lease streams (`CapacityStream`), one
    /// stream per client (`stream.rs`).
    Stream,
}

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Server address (host:port).
    #[arg(long)]
    pub server: String,
    /// Which RPC to load.
    #[arg(long, value_enum, default_value = "capacity")]
    pub protocol: Protocol,
    /// Number of distinct client ids (1 to 10 000 000).
    #[arg(long, default_value_t = 1000, value_parser = count(MAX_CLIENTS))]
    pub clients: usize,
    /// Resources per client (ids PREFIX0 … PREFIX{R-1}), all in each
    /// request (1 to the protocol's limit per request).
    #[arg(long, default_value_t = 1, value_parser = count(MAX_RESOURCES_PER_REQUEST))]
    pub resources: usize,
    /// What resource ids start with (runs with different prefixes load
    /// different resources).
    #[arg(long, default_value = "loadtest-", value_parser = resource_prefix)]
    pub resource_prefix: String,
    /// What each client wants of each resource.
    #[arg(long, default_value_t = 10.0, value_parser = crate::args::amount)]
    pub wants: f64,
    /// Requests in flight at once (1 to 100 000).
    #[arg(long, default_value_t = 64, value_parser = count(MAX_CONCURRENCY))]
    pub concurrency: usize,
    /// Open loop: send this many requests per second in all, each timed
    /// from when it was due, so that a server stall shows in the latency
    /// (0.1 to 10 000 000; `--concurrency` bounds the requests in flight).
    /// Without it: closed loop, as fast as `--concurrency` allows.
    #[arg(long, value_parser = crate::args::number(0.1, MAX_RATE))]
    pub rate: Option<f64>,
    /// Seconds to measure (0 to 86400).
    #[arg(long, default_value_t = 10.0, value_parser = crate::args::number(0.0, MAX_SECONDS))]
    pub duration: f64,
    /// Seconds to run before measuring (0 to 86400).
    #[arg(long, default_value_t = 2.0, value_parser = crate::args::number(0.0, MAX_SECONDS))]
    pub warmup: f64,
    /// HTTP/2 connections to spread the requests over (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = count(MAX_CONNECTIONS))]
    pub connections: usize,
    /// The resource's capacity, to compare what clients were granted with.
    #[arg(long, value_parser = crate::args::amount)]
    pub capacity: Option<f64>,
    /// Deadline of each RPC, in seconds (0.1 to 3600).
    #[arg(long, default_value_t = 5.0, value_parser = crate::args::number(0.1, 3600.0))]
    pub timeout: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// A process on this machine (the server) whose CPU time while
    /// measuring is reported, with its CPU per request.
    #[arg(long)]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    pub tls: ClientTlsArgs,
}

/// A resource id prefix: 1 to 1000 bytes, so that ids stay within the
/// protocol's limit.
fn resource_prefix(s: &str) -> Result<String, String> {
    match s.len() {
        0 => Err("must not be empty".into()),
        n if n > 1000 => Err(format!("at most 1000 bytes, got {n}")),
        _ => Ok(s.to_string()),
    }
}

fn host_of(addr: &str) -> anyhow::Result<Vec<IpAddr>> {
    let hostport = addr.rsplit("://").next().unwrap_or(addr);
    let addrs: Vec<SocketAddr> = hostport
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {addr:?}"))?
        .collect();
    Ok(addrs.iter().map(|a| a.ip()).collect())
}

struct Target {
    addr: String,
    channels: Vec<Channel>,
}

impl Target {
    /// Worker `w`'s connection.
    fn channel(&self, w: usize) -> Channel {
        self.channels[w % self.channels.len()].clone()
    }
}

async fn connect(
    addr: &str,
    n: usize,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> anyhow::Result<Target> {
    let ep = endpoint(addr, tls).map_err(anyhow::Error::msg)?;
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        let ch = ep
            .clone()
            .connect_timeout(timeout)
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|e| {
                let why = crate::tls_args::explain(&e, tls);
                anyhow::anyhow!("cannot connect to {addr}: {why}")
            })?;
        channels.push(ch);
    }
    Ok(Target {
        addr: addr.to_string(),
        channels,
    })
}

struct Shared {
    opts: Options,
    ids: Vec<String>,
    resources: Vec<String>,
    leases: Vec<Mutex<Vec<Option<pb::Lease>>>>,
    next: AtomicUsize,
    target: RwLock<Arc<Target>>,
    redirect_lock: tokio::sync::Mutex<()>,
    redirects: AtomicU64,
    allowed_hosts: Vec<IpAddr>,
    measure_from: Instant,
    end: Instant,
    pace: pace::Pace,
    tls: Option<ClientTls>,
    token: Option<BearerToken>,
    /// The server's latest `doorman-note` (learning mode, waiting for its
    /// parent), cleared by an answer without one.
    note: Mutex<Option<String>>,
    noted: std::sync::atomic::AtomicBool,
}

struct WorkerResult {
    hist: Histogram<u64>,
    rpcs: u64,
    over_limit: u64,
    errors: BTreeMap<String, u64>,
}

impl WorkerResult {
    fn answered(&mut self, took: Duration) {
        self.rpcs += 1;
        let _ = self.hist.record((took.as_micros() as u64).max(1));
    }

    fn failed(&mut self, code: String) {
        *self.errors.entry(code).or_default() += 1;
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Shared {
    /// The server the run talks to now (a redirect may move it).
    fn target(&self) -> Arc<Target> {
        self.target
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn request(&self, c: usize) -> pb::GetCapacityRequest {
        let now = now_secs();
        let leases = self.leases[c].lock().unwrap_or_else(|e| e.into_inner());
        pb::GetCapacityRequest {
            client_id: self.ids[c].clone(),
            resource: self
                .resources
                .iter()
                .zip(leases.iter())
                .map(|(id, has)| pb::ResourceRequest {
                    resource_id: id.clone(),
                    priority: 0,
                    has: has.filter(|l| l.expiry_time > now),
                    wants: self.opts.wants,
                    has_remaining_ms: None,
                })
                .collect(),
        }
    }

    /// Keeps the latest note (locking only while there is one).
    fn note(&self, header: Option<&tonic::metadata::MetadataValue<tonic::metadata::Ascii>>) {
        let text = header.and_then(|v| v.to_str().ok());
        if text.is_none() && !self.noted.load(Ordering::Relaxed) {
            return;
        }
        self.noted.store(text.is_some(), Ordering::Relaxed);
        *self.note.lock().unwrap_or_else(|e| e.into_inner()) = text.map(str::to_string);
    }

    fn record(&self, c: usize, resp: &pb::GetCapacityResponse) {
        let mut leases = self.leases[c].lock().unwrap_or_else(|e| e.into_inner());
        for r in &resp.response {
            if let Some(i) = self.resources.iter().position(|id| *id == r.resource_id) {
                leases[i] = Some(r.gets);
            }
        }
    }

    /// Switches to the master named in a redirect, if it is on an allowed host.
    async fn follow(&self, from: &str, to: Option<String>) -> anyhow::Result<()> {
        let Some(to) = to.filter(|t| !t.is_empty()) else {
            bail!("{from} is not the master and does not know who is");
        };
        let _guard = self.redirect_lock.lock().await;
        if self.target().addr != from {
            return Ok(()); // another worker already followed it
        }
        let hosts = host_of(&to)?;
        if !hosts.iter().any(|h| self.allowed_hosts.contains(h)) {
            bail!("{from} redirects to {to}, which is not on the host given with --server; not following");
        }
        let n = self.redirects.fetch_add(1, Ordering::Relaxed) + 1;
        if n > 10 {
            bail!("more than 10 mastership redirects; giving up (last: {from} → {to})");
        }
        let timeout = Duration::from_secs_f64(self.opts.timeout);
        let t = connect(&to, self.opts.connections, timeout, self.tls.as_ref()).await?;
        *self.target.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(t);
        Ok(())
    }
}

async fn worker(shared: Arc<Shared>, w: usize) -> anyhow::Result<WorkerResult> {
    let mut res = WorkerResult {
        hist: histogram(),
        rpcs: 0,
        over_limit: 0,
        errors: BTreeMap::new(),
    };
    let timeout = Duration::from_secs_f64(shared.opts.timeout);
    let n = shared.ids.len();
    let rls_request = rls::request(&shared.resources);
    loop {
        let Some(start) = shared.pace.next(shared.end).await else {
            return Ok(res);
        };
        let c = shared.next.fetch_add(1, Ordering::Relaxed) % n;
        let target = shared.target();
        let channel = target.channel(w);
        let measuring = start >= shared.measure_from;
        if shared.opts.protocol == Protocol::Rls {
            let call = rls::call(channel, rls_request.clone(), shared.token.as_ref());
            match tokio::time::timeout(timeout, call).await {
                Ok(Ok(over)) if measuring => {
                    res.answered(start.elapsed());
                    res.over_limit += u64::from(over);
                }
                Ok(Err(status)) if measuring => res.failed(format!("{:?}", status.code())),
                Err(_) if measuring => res.failed("DeadlineExceeded".into()),
                _ => {}
            }
            continue;
        }
        let mut req = tonic::Request::new(shared.request(c));
        if let Some(t) = &shared.token {
            t.attach(&mut req);
        }
        let r = tokio::time::timeout(timeout, CapacityClient::new(channel).get_capacity(req)).await;
        let took = start.elapsed();
        match r {
            Ok(Ok(resp)) => {
                shared.note(resp.metadata().get(doorman_client::connection::NOTE_HEADER));
                let resp = resp.into_inner();
                if let Some(m) = resp.mastership {
                    shared.follow(&target.addr, m.master_address).await?;
                    continue;
                }
                shared.record(c, &resp);
                if measuring {
                    res.answered(took);
                }
            }
            Ok(Err(status)) if measuring => res.failed(format!("{:?}", status.code())),
            Err(_) if measuring => res.failed("DeadlineExceeded".into()),
            _ => {}
        }
    }
}

/// Limits of the flags (the library checks them again for callers that
/// build [`Options`] themselves).
const MAX_CLIENTS: usize = 10_000_000;
const MAX_CONCURRENCY: usize = 100_000;
const MAX_CONNECTIONS: usize = 1024;
const MAX_SECONDS: f64 = 86_400.0;
const MAX_RATE: f64 = 10_000_000.0;

/// The checks the flags' parsers make, for options built in code.
fn validate(opts: &Options) -> anyhow::Result<()> {
    for (name, v, max) in [
        ("--clients", opts.clients, MAX_CLIENTS),
        ("--resources", opts.resources, MAX_RESOURCES_PER_REQUEST),
        ("--concurrency", opts.concurrency, MAX_CONCURRENCY),
        ("--connections", opts.connections, MAX_CONNECTIONS),
    ] {
        count_in_range(v, max).map_err(|e| anyhow::anyhow!("{name} {e}"))?;
    }
    for (name, v, min, max) in [
        ("--duration", opts.duration, 0.0, MAX_SECONDS),
        ("--warmup", opts.warmup, 0.0, MAX_SECONDS),
        ("--timeout", opts.timeout, 0.1, 3600.0),
        ("--wants", opts.wants, 0.0, MAX_AMOUNT),
        ("--rate", opts.rate.unwrap_or(1.0), 0.1, MAX_RATE),
    ] {
        in_range(v, min, max).map_err(|e| anyhow::anyhow!("{name} {e}"))?;
    }
    if let Some(pid) = opts.server_pid {
        server_cpu::read(pid)?;
    }
    Ok(())
}

/// The run's shared state, connected to the target.
async fn prepare(opts: &Options) -> anyhow::Result<Arc<Shared>> {
    let allowed_hosts = host_of(&opts.server)?;
    let timeout = Duration::from_secs_f64(opts.timeout);
    let tls = opts.tls.client_tls()?;
    let target = connect(&opts.server, opts.connections, timeout, tls.as_ref()).await?;
    let origin = Instant::now();
    let measure_from = origin + Duration::from_secs_f64(opts.warmup);
    let end = measure_from + Duration::from_secs_f64(opts.duration);
    let run_id = std::process::id();
    Ok(Arc::new(Shared {
        ids: (0..opts.clients)
            .map(|i| format!("loadtest-{run_id}-{i}"))
            .collect(),
        resources: (0..opts.resources)
            .map(|i| format!("{}{i}", opts.resource_prefix))
            .collect(),
        leases: (0..opts.clients)
            .map(|_| Mutex::new(vec![None; opts.resources]))
            .collect(),
        next: AtomicUsize::new(0),
        target: RwLock::new(Arc::new(target)),
        redirect_lock: tokio::sync::Mutex::new(()),
        redirects: AtomicU64::new(0),
        note: Mutex::new(None),
        noted: std::sync::atomic::AtomicBool::new(false),
        allowed_hosts,
        measure_from,
        end,
        pace: pace::Pace::new(origin, opts.rate),
        tls,
        token: opts.tls.token()?,
        opts: opts.clone(),
    }))
}

/// The server's CPU could not be read (it exited during the run): the
/// report goes on without it.
fn cpu_lost(e: anyhow::Error) {
    tracing::warn!("no server CPU in this report: {e:#}");
}

/// Runs a load test.
pub async fn run(opts: Options) -> anyhow::Result<Report> {
    validate(&opts)?;
    let began = Instant::now();
    let shared = prepare(&opts).await?;
    let workers: Vec<_> = (0..opts.concurrency)
        .map(|w| match opts.protocol {
            Protocol::Stream => tokio::spawn(stream::worker(shared.clone(), w)),
            _ => tokio::spawn(worker(shared.clone(), w)),
        })
        .collect();
    let cpu_from = match opts.server_pid {
        Some(pid) => {
            tokio::time::sleep_until(shared.measure_from.into()).await;
            server_cpu::read(pid).map_err(cpu_lost).ok()
        }
        None => None,
    };
    let totals = join(workers).await?;
    let measured = Instant::now()
        .saturating_duration_since(shared.measure_from)
        .as_secs_f64()
        .max(1e-9);
    let answered = totals.rpcs + totals.errors.values().sum::<u64>();
    let server_cpu =
        cpu_from.and_then(|from| from.since(measured, answered).map_err(cpu_lost).ok());
    let mut report = report::of_run(&shared, totals, measured);
    report.server_cpu = server_cpu;
    report.wall_s = began.elapsed().as_secs_f64();
    Ok(report)
}

/// Every worker's figures, added up.
async fn join(
    workers: Vec<tokio::task::JoinHandle<anyhow::Result<WorkerResult>>>,
) -> anyhow::Result<WorkerResult> {
    let mut totals = WorkerResult {
        hist: histogram(),
        rpcs: 0,
        over_limit: 0,
        errors: BTreeMap::new(),
    };
    for w in workers {
        let r = w.await.context("a load worker panicked")??;
        totals.hist.add(&r.hist).ok();
        totals.rpcs += r.rpcs;
        totals.over_limit += r.over_limit;
        for (k, v) in r.errors {
            *totals.errors.entry(k).or_default() += v;
        }
    }
    Ok(totals)
}

#[cfg(test)]
use report::latency;
#[cfg(test)]
mod tests;
