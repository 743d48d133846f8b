//! An axum HTTP server that sheds load with a Doorman rate resource: the
//! router is layered with `RateLimitLayer` in `Reject` mode, and a rejected
//! request is answered 429 Too Many Requests. Fires a burst of requests
//! at itself and prints how many were served and how many shed.
//!
//!     cargo run --release -p doorman-client --example axum_server

#[path = "common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use doorman_client::tower::{BoxError, Mode, RateLimitLayer, ResourceExhausted};
use doorman_client::{Client, RateOptions};
use tower::ServiceBuilder;

/// 429 for a shed request, 500 for anything else.
async fn shed(e: BoxError) -> (StatusCode, String) {
    match ResourceExhausted::find(&e) {
        Some(ex) => (
            StatusCode::from_u16(ResourceExhausted::HTTP_STATUS).unwrap(),
            ex.to_string(),
        ),
        None => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// One GET over a fresh connection; the status code.
fn get_status(addr: std::net::SocketAddr) -> std::io::Result<u16> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(b"GET / HTTP/1.1\r\nhost: example\r\nconnection: close\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    Ok(code.unwrap_or(0))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (addr, _server) = common::server(&common::config("example/*", "FAIR_SHARE", 10.0)).await;
    let client = Client::builder().servers([addr]).build().await?;
    let rate = client.rate_resource("example/http", RateOptions::wants(10.0))?;
    common::wait_for_capacity(|| (rate.mode(), rate.capacity(), rate.note())).await;
    let app = Router::new()
        .route("/", get(|| async { "served\n" }))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(shed))
                .layer(RateLimitLayer::new(rate.clone()).mode(Mode::Reject)),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let http = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    let codes = tokio::task::spawn_blocking(move || {
        // 30 requests 10 ms apart: 300 ms at 10/s leaves room for ~3.
        let one = |_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            get_status(http)
        };
        (0..30).map(one).collect::<Result<Vec<u16>, _>>()
    })
    .await??;
    let served = codes.iter().filter(|c| **c == 200).count();
    let shed = codes.iter().filter(|c| **c == 429).count();
    println!(
        "granted {} req/s; 30 requests in 300 ms: {served} served, {shed} answered 429",
        rate.capacity()
    );
    assert_eq!(served + shed, 30, "every request got 200 or 429: {codes:?}");
    assert!(shed > 0 && served > 0, "{codes:?}");
    client.close().await;
    Ok(())
}
