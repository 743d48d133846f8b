//! Rate-limiting any tower service with `RateLimitLayer`: here a plain
//! `service_fn` standing in for a tonic or HTTP client, limited to the 20
//! calls/s the server grants.
//!
//!     cargo run --release -p doorman-client --example tower_layer

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;

use std::time::Instant;

use doorman_client::tower::RateLimitLayer;
use doorman_client::{Client, RateOptions};
use tower::{Layer, ServiceExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (addr, _server) = common::server(&common::config("example/*", "FAIR_SHARE", 20.0)).await;
    let client = Client::builder().servers([addr]).build().await?;
    let rate = client.rate_resource("example/api", RateOptions::wants(100.0))?;
    common::wait_for_capacity(|| (rate.mode(), rate.capacity(), rate.note())).await;
    let backend =
        tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n * 2) });
    let svc = RateLimitLayer::new(rate.clone()).layer(backend);
    let start = Instant::now();
    for i in 0..40 {
        let out = svc.clone().oneshot(i).await.map_err(|e| e.to_string())?;
        assert_eq!(out, i * 2);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "40 calls in {secs:.2} s = {:.1} calls/s (granted {})",
        40.0 / secs,
        rate.capacity()
    );
    client.close().await;
    Ok(())
}
