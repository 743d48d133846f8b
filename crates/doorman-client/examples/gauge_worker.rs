//! A gauge-limited worker pool: 16 tasks share `example/tx`, a resource of 4
//! operations in flight; each holds its permit for 50 ms. Prints the peak
//! in flight, which never exceeds the capacity.
//!
//!     cargo run --release -p doorman-client --example gauge_worker

#[path = "common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use doorman_client::{Client, GaugeOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (addr, _server) = common::server(&common::config("example/*", "STATIC", 4.0)).await;
    let client = Client::builder().servers([addr]).build().await?;
    let gauge = client.gauge_resource("example/tx", GaugeOptions::wants(16.0))?;
    common::wait_for_capacity(|| (gauge.mode(), gauge.capacity(), gauge.note())).await;
    println!("capacity {} in flight", gauge.capacity());
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (g, peak, done) = (gauge.clone(), peak.clone(), done.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    let permit = g.mark().await;
                    peak.fetch_max(g.in_flight(), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    drop(permit);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await?;
    }
    println!(
        "{} operations done, peak in flight {} (capacity {})",
        done.load(Ordering::Relaxed),
        peak.load(Ordering::Relaxed),
        gauge.capacity()
    );
    client.close().await;
    Ok(())
}
