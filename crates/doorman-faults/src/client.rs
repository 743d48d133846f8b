//! `doorman-faults client`: a real client process on the Rust client
//! library for the harness. It holds one rate resource and reports on
//! standard output, one JSON line each, every change of what it uses:
//! `{"t": <monotonic s>, "cap": <capacity>, "mode": "lease"|…,
//! "expiry_ms": <its lease's end on its own clock, or null>}`; it reads
//! `wants <n>` lines on standard input. End of input closes the client
//! (its lease released) and the process exits. The library's warnings
//! (a failed or refused request) go to standard error, the process's log,
//! stamped with the same monotonic seconds.
//!
//! Must not: decide anything (the library does) or report a capacity
//! later than it applies it.

use std::time::Duration;

use clap::Args as ClapArgs;
use doorman_client::{Client, Fallback, RateOptions, Wants};
use tokio::io::AsyncBufReadExt;

use crate::clock::mono;

/// The client's options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The addresses of its leaf's replicas, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub server: Vec<String>,
    /// Its client id.
    #[arg(long)]
    pub id: String,
    /// The resource.
    #[arg(long)]
    pub resource: String,
    /// What it wants at start.
    #[arg(long)]
    pub wants: f64,
}

/// Runs the client until its standard input ends.
pub async fn run(a: Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_timer(MonoTimer)
        .try_init();
    let client = Client::builder()
        .servers(a.server.clone())
        .client_id(a.id.clone())
        .fallback(Fallback::Pessimistic)
        .rpc_timeout(Duration::from_secs(2))
        .build()
        .await?;
    let res = client.rate_resource(&a.resource, RateOptions::wants(a.wants))?;
    let mut watch = res.capacity_watch();
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    report(&watch.borrow_and_update());
    loop {
        tokio::select! {
            changed = watch.changed() => {
                if changed.is_err() {
                    break;
                }
                report(&watch.borrow_and_update());
            }
            line = lines.next_line() => match line {
                Ok(Some(l)) => {
                    if let Some(w) = l.strip_prefix("wants ").and_then(|w| w.trim().parse().ok()) {
                        res.set_wants(Wants::Fixed(w));
                    }
                }
                _ => break,
            },
        }
    }
    drop(res);
    client.close().await;
    Ok(())
}

/// Log lines stamped with the machine's monotonic seconds, as reports are.
struct MonoTimer;

impl tracing_subscriber::fmt::time::FormatTime for MonoTimer {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:.3}", mono())
    }
}

fn report(s: &doorman_client::CapacityState) {
    let expiry_ms = s.lease_expiry.and_then(|e| {
        e.duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64)
    });
    let line = serde_json::json!({
        "t": mono(),
        "cap": s.capacity,
        "mode": s.mode.name(),
        "expiry_ms": expiry_ms,
    });
    println!("{line}");
}
