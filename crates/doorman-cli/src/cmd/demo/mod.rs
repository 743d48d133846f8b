//! `doorman demo`: a whole tree in one process on 127.0.0.1 with real gRPC:
//! a root (capacity 500 on one FAIR_SHARE resource), two parents, four
//! leaves and twenty clients using `RateResource` with varying demand (some
//! above their fair share of 25, one spiking to 200 midway). Prints a table
//! every second and a summary at the end. With `--tls` every link (clients
//! to leaves, leaves to parents, parents to the root, the status pages) is
//! mutual TLS with certificates made for the run (`pki.rs`), or with the
//! user's own (`--tls-ca`, `--tls-cert`, `--tls-key`).
//!
//! Must not: bind anything but 127.0.0.1, or run longer than `--duration`.

mod pki;

use doorman_core::server::Sharded;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use doorman_client::{Client, Fallback, RateOptions, RateResource, Wants};
use doorman_core::config::Config;
use doorman_server::server::{start, ConfigSource, RunningServer, ServerOptions};

const RESOURCE: &str = "demo/db";
const CAPACITY: f64 = 500.0;
const CONFIG: &str = r#"
[[resources]]
identifier_glob = "demo/*"
capacity = 500
description = "the demo's shared database"
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 4
learning_mode_duration = 0
"#;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to run, in seconds (1 to 86400).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: u64,
    /// HTTP base address: the root's status page is served there and the
    /// other servers on the following ports (default: free ports).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Run every link over mutual TLS with a throwaway CA and certificates
    /// made for this run (printed, deleted at exit).
    #[arg(long)]
    tls: bool,
    /// Run every link over mutual TLS with this CA (with --tls-cert and
    /// --tls-key, used by every node and client; the certificate must be
    /// valid for 127.0.0.1 as a server and as a client).
    #[arg(long, requires_all = ["tls_cert", "tls_key"], conflicts_with = "tls")]
    tls_ca: Option<PathBuf>,
    /// PEM certificate for --tls-ca.
    #[arg(long, requires = "tls_ca")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_ca")]
    tls_key: Option<PathBuf>,
}

impl Args {
    /// The TLS material asked for, if any.
    fn tls(&self) -> anyhow::Result<Option<pki::DemoTls>> {
        if let (Some(ca), Some(cert), Some(key)) = (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            return Ok(Some(pki::DemoTls::given(ca, cert, key)));
        }
        Ok(if self.tls {
            Some(pki::DemoTls::make()?)
        } else {
            None
        })
    }
}

struct DemoClient {
    leaf: usize,
    base: f64,
    resource: RateResource,
    client: Client,
    ops: Arc<AtomicU64>,
}

fn http_addr(base: Option<SocketAddr>, i: u16) -> SocketAddr {
    match base {
        Some(b) => SocketAddr::new(b.ip(), b.port().saturating_add(i)),
        None => "127.0.0.1:0".parse().expect("literal address"),
    }
}

async fn node(
    name: &str,
    config: Arc<Config>,
    parent: Option<&RunningServer>,
    http: SocketAddr,
    tls: Option<&pki::DemoTls>,
) -> anyhow::Result<RunningServer> {
    let mut o = ServerOptions::new("127.0.0.1:0".parse()?, ConfigSource::Inline(config));
    o.http = Some(http);
    if let Some(p) = parent {
        o.parent = vec![p.grpc_addr.to_string()];
    }
    if let Some(t) = tls {
        o.tls = Some(t.server(name)?);
        o.parent_tls = parent.map(|_| t.client(name)).transpose()?;
    }
    let s = start(o)
        .await
        .with_context(|| format!("cannot start {name}"))?;
    if let Some(h) = s.http_addr {
        let scheme = if tls.is_some() { "https" } else { "http" };
        println!(
            "  {name:<9} gRPC {}  status {scheme}://{h}/debug/status",
            s.grpc_addr
        );
    }
    Ok(s)
}

/// Demand of client `i` at second `t`: a base between 10 and 50 (fair share
/// is 25), wobbling ±20 % every 5 s; client 0 spikes to 200 in the middle
/// fifth of the run.
fn demand(i: usize, base: f64, t: u64, duration: u64) -> f64 {
    if i == 0 && t >= duration * 2 / 5 && t < duration * 3 / 5 {
        return 200.0;
    }
    let step = t / 5;
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ step.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    let wobble = ((x % 401) as f64 - 200.0) / 1000.0;
    (base * (1.0 + wobble)).max(1.0)
}

/// The root, its two parents and four leaves, in that order.
struct Tree {
    root: RunningServer,
    parents: Vec<RunningServer>,
    leaves: Vec<RunningServer>,
}

async fn tree(http: Option<SocketAddr>, tls: Option<&pki::DemoTls>) -> anyhow::Result<Tree> {
    let root_cfg = Arc::new(Config::parse(CONFIG, "demo").context("demo config")?);
    let empty = Arc::new(Config::empty());
    let root = node("root", root_cfg, None, http_addr(http, 0), tls).await?;
    let mut parents = Vec::new();
    for p in 0..2u16 {
        let name = format!("parent-{}", p + 1);
        let addr = http_addr(http, 1 + p);
        parents.push(node(&name, empty.clone(), Some(&root), addr, tls).await?);
    }
    let mut leaves = Vec::new();
    for l in 0..4u16 {
        let name = format!("leaf-{}", l + 1);
        let parent = &parents[usize::from(l / 2)];
        let addr = http_addr(http, 3 + l);
        leaves.push(node(&name, empty.clone(), Some(parent), addr, tls).await?);
    }
    Ok(Tree {
        root,
        parents,
        leaves,
    })
}

/// Twenty clients, five per leaf, each using its capacity as fast as it may.
async fn clients(
    leaves: &[RunningServer],
    duration: u64,
    tls: Option<&pki::DemoTls>,
) -> anyhow::Result<Vec<DemoClient>> {
    let mut clients = Vec::new();
    for i in 0..20 {
        let leaf = i % 4;
        let base = 10.0 + ((i * 13) % 9) as f64 * 5.0;
        let id = format!("demo-client-{i:02}");
        let mut builder = Client::builder()
            .servers([leaves[leaf].grpc_addr.to_string()])
            .client_id(id.clone())
            .fallback(Fallback::Pessimistic);
        if let Some(t) = tls {
            builder = builder.tls(t.client(&id)?);
        }
        let client = builder.build().await?;
        let wants = RateOptions::wants(demand(i, base, 0, duration));
        let resource = client.rate_resource(RESOURCE, wants)?;
        let ops = Arc::new(AtomicU64::new(0));
        let (r, o) = (resource.clone(), ops.clone());
        tokio::spawn(async move {
            loop {
                r.wait().await;
                o.fetch_add(1, Ordering::Relaxed);
            }
        });
        clients.push(DemoClient {
            leaf,
            base,
            resource,
            client,
            ops,
        });
    }
    Ok(clients)
}

/// What the table and the summary are made of.
#[derive(Default)]
struct Watch {
    last_ops: u64,
    /// (Σ has, min(Σ wants, capacity)) per second.
    samples: Vec<(f64, f64)>,
    peak: f64,
}

fn print_header() {
    println!(
        "\n{:>4}  {:>13} {:>13} {:>13} {:>13}  {:>16}  {:>5}  {:>6}",
        "t",
        "leaf-1 w/h",
        "leaf-2 w/h",
        "leaf-3 w/h",
        "leaf-4 w/h",
        "handed out/cap",
        "util",
        "ops/s"
    );
}

/// Second `t`: new demands, then one row of the table.
fn tick(clients: &[DemoClient], t: u64, duration: u64, w: &mut Watch) {
    for (i, c) in clients.iter().enumerate() {
        c.resource
            .set_wants(Wants::Fixed(demand(i, c.base, t, duration)));
    }
    let mut wants = [0.0f64; 4];
    let mut has = [0.0f64; 4];
    for c in clients {
        wants[c.leaf] += c.resource.current_wants();
        has[c.leaf] += c.resource.capacity();
    }
    let total_has: f64 = has.iter().sum();
    let target = wants.iter().sum::<f64>().min(CAPACITY);
    let util = if target > 0.0 {
        total_has / target * 100.0
    } else {
        100.0
    };
    w.peak = w.peak.max(total_has);
    w.samples.push((total_has, target));
    let ops: u64 = clients.iter().map(|c| c.ops.load(Ordering::Relaxed)).sum();
    let cells: Vec<String> = (0..4)
        .map(|l| format!("{:>6.1}/{:<6.1}", wants[l], has[l]))
        .collect();
    let spike = if t == duration * 2 / 5 {
        "  <- client 0 spikes to 200"
    } else if t == duration * 3 / 5 {
        "  <- spike over"
    } else {
        ""
    };
    println!(
        "{:>3}s  {}  {:>7.1} / {:<6.0}  {:>4.0}%  {:>6}{spike}",
        t,
        cells.join(" "),
        total_has,
        CAPACITY,
        util,
        ops - w.last_ops
    );
    w.last_ops = ops;
}

fn print_summary(w: &Watch, duration: u64, root_leases: usize) {
    let settled: Vec<&(f64, f64)> = w.samples.iter().skip(5).collect();
    let mean_util = if settled.is_empty() {
        0.0
    } else {
        settled
            .iter()
            .map(|(h, t)| if *t > 0.0 { h / t } else { 1.0 })
            .sum::<f64>()
            / settled.len() as f64
            * 100.0
    };
    let peak = w.peak;
    println!("\nsummary after {duration} s:");
    println!("  mean utilisation after the first 5 s: {mean_util:.1} % of min(Σ wants, capacity)");
    println!(
        "  peak handed out: {peak:.1} of {CAPACITY} ({:.1} %)",
        peak / CAPACITY * 100.0
    );
    println!(
        "  operations done by the clients: {} ({:.0}/s on average)",
        w.last_ops,
        w.last_ops as f64 / duration as f64
    );
    println!("  root: {root_leases} lease(s) (the two parents)");
}

/// Says where the certificates are and how to talk to the tree with them.
fn print_tls(t: &pki::DemoTls) -> anyhow::Result<()> {
    let ca = t.ca().display();
    match t.dir() {
        Some(dir) => {
            let (cert, key) = t.cert("you")?;
            println!("every link uses mutual TLS; a throwaway CA and certificates are in {} (deleted at exit)", dir.display());
            println!(
                "  e.g. doorman get --server LEAF --resource {RESOURCE} --wants 10 --tls-ca {ca} --tls-cert {} --tls-key {}\n",
                cert.display(),
                key.display()
            );
        }
        None => println!("every link uses mutual TLS with the CA {ca}\n"),
    }
    Ok(())
}

/// Runs `doorman demo`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    println!("doorman demo: 1 root (capacity {CAPACITY} on {RESOURCE}, FAIR_SHARE), 2 parents, 4 leaves, 20 clients\n");
    let tls = args.tls()?;
    if let Some(t) = &tls {
        print_tls(t)?;
    }
    let tree = tree(args.http, tls.as_ref()).await?;
    let clients = clients(&tree.leaves, args.duration, tls.as_ref()).await?;
    print_header();
    let start_time = Instant::now();
    let mut watch = Watch::default();
    for t in 1..=args.duration {
        tokio::time::sleep_until((start_time + Duration::from_secs(t)).into()).await;
        tick(&clients, t, args.duration, &mut watch);
    }
    watch.last_ops = clients.iter().map(|c| c.ops.load(Ordering::Relaxed)).sum();
    print_summary(&watch, args.duration, tree.root.state.core().lease_count());
    for c in &clients {
        c.client.close().await;
    }
    drop(clients);
    for s in tree.leaves.into_iter().chain(tree.parents) {
        s.shutdown().await;
    }
    tree.root.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
