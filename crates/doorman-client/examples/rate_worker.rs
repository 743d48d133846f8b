//! A rate-limited worker: asks for 1000 ops/s of `example/rate`, then runs a
//! saturating `wait()` loop for 10 s and reports the achieved rate against
//! the granted capacity.
//!
//!     cargo run --release -p doorman-client --example rate_worker

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use doorman_client::{Client, Fallback, RateOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (addr, _server) = common::server(&common::config("example/*", "FAIR_SHARE", 1000.0)).await;
    let client = Client::builder()
        .servers([addr.clone()])
        .fallback(Fallback::Pessimistic)
        .build()
        .await?;
    let rate = client.rate_resource("example/rate", RateOptions::wants(1000.0))?;
    common::wait_for_capacity(|| (rate.mode(), rate.capacity(), rate.note())).await;
    let granted = rate.capacity();
    println!(
        "server {addr}: granted {granted} ops/s to {}",
        client.client_id()
    );
    let secs = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10u64);
    let start = Instant::now();
    let mut ops = 0u64;
    let mut next_report = 1;
    while start.elapsed() < Duration::from_secs(secs) {
        rate.wait().await;
        ops += 1;
        if start.elapsed() >= Duration::from_secs(next_report) {
            println!("{next_report:>3} s  {ops:>7} ops  mode {:?}", rate.mode());
            next_report += 1;
        }
    }
    let achieved = ops as f64 / start.elapsed().as_secs_f64();
    println!(
        "achieved {achieved:.1} ops/s over {secs} s vs granted {granted}: {:+.2} %",
        (achieved / granted - 1.0) * 100.0
    );
    client.close().await;
    Ok(())
}
