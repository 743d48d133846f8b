//! `doorman demo`: a whole tree in one process on 127.0.0.1 with real gRPC:
//! a root (capacity 500 on one FAIR_SHARE resource), two parents, four
//! leaves and twenty clients using `RateResource` with varying demand (some
//! above their fair share of 25, one spiking to 200 midway). Prints a table
//! every second and a summary at the end.

use std::net::SocketAddr;
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
) -> anyhow::Result<RunningServer> {
    let mut o = ServerOptions::new("127.0.0.1:0".parse()?, ConfigSource::Inline(config));
    o.http = Some(http);
    if let Some(p) = parent {
        o.parent = vec![p.grpc_addr.to_string()];
    }
    let s = start(o)
        .await
        .with_context(|| format!("cannot start {name}"))?;
    if let Some(h) = s.http_addr {
        println!(
            "  {name:<9} gRPC {}  status http://{h}/debug/status",
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

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.duration == 0 {
        anyhow::bail!("--duration must be at least 1 second");
    }
    println!("doorman demo: 1 root (capacity {CAPACITY} on {RESOURCE}, FAIR_SHARE), 2 parents, 4 leaves, 20 clients\n");
    let root_cfg = Arc::new(Config::parse(CONFIG, "demo").context("demo config")?);
    let empty = Arc::new(Config::empty());
    let root = node("root", root_cfg, None, http_addr(args.http, 0)).await?;
    let mut parents = Vec::new();
    for p in 0..2 {
        parents.push(
            node(
                &format!("parent-{}", p + 1),
                empty.clone(),
                Some(&root),
                http_addr(args.http, 1 + p as u16),
            )
            .await?,
        );
    }
    let mut leaves = Vec::new();
    for l in 0..4 {
        leaves.push(
            node(
                &format!("leaf-{}", l + 1),
                empty.clone(),
                Some(&parents[l / 2]),
                http_addr(args.http, 3 + l as u16),
            )
            .await?,
        );
    }
    let mut clients = Vec::new();
    for i in 0..20 {
        let leaf = i % 4;
        let base = 10.0 + ((i * 13) % 9) as f64 * 5.0;
        let client = Client::builder()
            .servers([leaves[leaf].grpc_addr.to_string()])
            .client_id(format!("demo-client-{i:02}"))
            .fallback(Fallback::Pessimistic)
            .build()
            .await?;
        let resource = client.rate_resource(
            RESOURCE,
            RateOptions::wants(demand(i, base, 0, args.duration)),
        )?;
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
    let start_time = Instant::now();
    let mut last_ops = 0u64;
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let mut peak: f64 = 0.0;
    for t in 1..=args.duration {
        tokio::time::sleep_until((start_time + Duration::from_secs(t)).into()).await;
        for (i, c) in clients.iter().enumerate() {
            c.resource
                .set_wants(Wants::Fixed(demand(i, c.base, t, args.duration)));
        }
        let mut wants = [0.0f64; 4];
        let mut has = [0.0f64; 4];
        for c in &clients {
            wants[c.leaf] += c.resource.current_wants();
            has[c.leaf] += c.resource.capacity();
        }
        let total_has: f64 = has.iter().sum();
        let total_wants: f64 = wants.iter().sum();
        let target = total_wants.min(CAPACITY);
        let util = if target > 0.0 {
            total_has / target * 100.0
        } else {
            100.0
        };
        peak = peak.max(total_has);
        samples.push((total_has, target));
        let ops: u64 = clients.iter().map(|c| c.ops.load(Ordering::Relaxed)).sum();
        let cells: Vec<String> = (0..4)
            .map(|l| format!("{:>6.1}/{:<6.1}", wants[l], has[l]))
            .collect();
        let spike = if t == args.duration * 2 / 5 {
            "  <- client 0 spikes to 200"
        } else if t == args.duration * 3 / 5 {
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
            ops - last_ops
        );
        last_ops = ops;
    }
    let settled: Vec<&(f64, f64)> = samples.iter().skip(5).collect();
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
    let ops: u64 = clients.iter().map(|c| c.ops.load(Ordering::Relaxed)).sum();
    println!("\nsummary after {} s:", args.duration);
    println!("  mean utilisation after the first 5 s: {mean_util:.1} % of min(Σ wants, capacity)");
    println!(
        "  peak handed out: {peak:.1} of {CAPACITY} ({:.1} %)",
        peak / CAPACITY * 100.0
    );
    println!(
        "  operations done by the clients: {ops} ({:.0}/s on average)",
        ops as f64 / args.duration as f64
    );
    println!(
        "  root: {} lease(s) (the two parents)",
        root.state.core().lease_count()
    );
    for c in &clients {
        c.client.close().await;
    }
    drop(clients);
    for l in leaves {
        l.shutdown().await;
    }
    for p in parents {
        p.shutdown().await;
    }
    root.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
