//! The HTTP and gRPC listeners against peers that hold connections:
//! slow-loris headers are cut off, a connection over the cap is closed at
//! once, and the server keeps answering.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use doorman_testkit::rpc as common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use doorman_core::config::Config;
use doorman_http::serve::HttpLimits;
use doorman_proto::doorman as pb;
use doorman_server::server::{start, ConfigSource, RunningServer};
use doorman_testkit::eventually_async;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn server(limits: HttpLimits) -> RunningServer {
    let clock = ManualClock::new();
    let cfg = Arc::new(Config::parse(CONFIG, "t.toml").unwrap());
    let mut o = opts(ConfigSource::Inline(cfg), &clock);
    o.http_limits = limits;
    start(o).await.unwrap()
}

/// Everything the server sends until it closes the connection.
async fn until_closed(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let mut buf = Vec::new();
    tokio::time::timeout(limit, s.read_to_end(&mut buf))
        .await
        .expect("the server closes the connection in time")
        .ok();
    buf
}

#[tokio::test]
async fn headers_that_never_end_are_cut_off() {
    let s = server(HttpLimits {
        header_timeout: Duration::from_millis(300),
        ..HttpLimits::default()
    })
    .await;
    let mut loris = TcpStream::connect(s.http_addr.unwrap()).await.unwrap();
    loris
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let t = Instant::now();
    let got = until_closed(&mut loris, Duration::from_secs(5)).await;
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert!(!String::from_utf8_lossy(&got).contains("200 OK"));
    let (status, body) = http_get(s.http_addr.unwrap(), "/healthz").await;
    assert!(
        status.contains("200") && body.starts_with("ok"),
        "{status} {body}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_connection_over_the_cap_is_closed_and_the_pages_recover() {
    let s = server(HttpLimits {
        max_connections: 1,
        ..HttpLimits::default()
    })
    .await;
    let addr = s.http_addr.unwrap();
    let mut holder = TcpStream::connect(addr).await.unwrap();
    holder
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .unwrap();
    // Give the server the time to accept the holder first.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut over = TcpStream::connect(addr).await.unwrap();
    over.write_all(b"GET /healthz HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let got = until_closed(&mut over, Duration::from_secs(2)).await;
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    drop(holder);
    eventually_async("the pages answer again", Duration::from_secs(5), || async {
        http_get(addr, "/healthz").await.0.contains("200")
    })
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn a_grpc_connection_over_the_cap_is_closed() {
    let clock = ManualClock::new();
    let cfg = Arc::new(Config::parse(CONFIG, "t.toml").unwrap());
    let mut o = opts(ConfigSource::Inline(cfg), &clock);
    o.grpc_max_connections = 1;
    let s = start(o).await.unwrap();
    let mut first = client(s.grpc_addr).await;
    assert_eq!(cap(&mut first, "a", "fair", 10.0, None).await, 10.0);
    // A second connection is closed as soon as it is accepted.
    let mut raw = TcpStream::connect(s.grpc_addr).await.unwrap();
    let got = until_closed(&mut raw, Duration::from_secs(2)).await;
    assert!(got.is_empty());
    // The first keeps working; once it is gone, a new one is served.
    assert_eq!(cap(&mut first, "a", "fair", 10.0, None).await, 10.0);
    drop(first);
    let addr = s.grpc_addr;
    eventually_async(
        "a new connection is served",
        Duration::from_secs(5),
        || async {
            match doorman_proto::CapacityClient::connect(format!("http://{addr}")).await {
                Ok(mut c) => c
                    .discovery(doorman_proto::doorman::DiscoveryRequest {})
                    .await
                    .is_ok(),
                Err(_) => false,
            }
        },
    )
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn connections_without_traffic_are_closed() {
    let clock = ManualClock::new();
    let cfg = Arc::new(Config::parse(CONFIG, "t.toml").unwrap());
    let mut o = opts(ConfigSource::Inline(cfg), &clock);
    o.grpc_idle_timeout = Duration::from_millis(300);
    o.http_limits.idle_timeout = Duration::from_millis(300);
    let s = start(o).await.unwrap();
    for addr in [s.grpc_addr, s.http_addr.unwrap()] {
        // A peer that connects and never speaks gives its slot back.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let t = Instant::now();
        until_closed(&mut silent, Duration::from_secs(5)).await;
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{addr}: {:?}",
            t.elapsed()
        );
    }
    // A client that talks is served as usual.
    let mut c = client(s.grpc_addr).await;
    assert_eq!(cap(&mut c, "a", "fair", 10.0, None).await, 10.0);
    s.shutdown().await;
}

/// One raw HTTP/1.1 exchange: the response's status line.
async fn status_line(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let got = until_closed(&mut s, Duration::from_secs(5)).await;
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn a_body_over_64_kib_is_refused_and_a_slow_page_times_out() {
    let s = server(HttpLimits::default()).await;
    let addr = s.http_addr.unwrap();
    let big = format!(
        "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        65 << 10
    );
    let line = status_line(addr, big.as_bytes()).await;
    assert!(line.contains("413"), "{line}");
    s.shutdown().await;
    // Pages are built off the request's task: with no time at all to
    // answer, a status page of 5 000 resources (milliseconds of work) is
    // 408. (The timer has a millisecond's grain: a page that happened to
    // be built within it would be 200, so up to ten tries.)
    let s = server(HttpLimits {
        request_timeout: Duration::ZERO,
        ..HttpLimits::default()
    })
    .await;
    let mut c = client(s.grpc_addr).await;
    let many: Vec<_> = (0..5_000)
        .map(|i| rr(&format!("db/{i}"), 1.0, None))
        .collect();
    c.get_capacity(pb::GetCapacityRequest {
        client_id: "many".into(),
        resource: many,
    })
    .await
    .expect("5 000 resources");
    let addr = s.http_addr.unwrap();
    let mut lines = Vec::new();
    for _ in 0..10 {
        let line = status_line(
            addr,
            b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(line.contains("408") || line.contains("200"), "{line}");
        lines.push(line);
        if lines.last().is_some_and(|l| l.contains("408")) {
            break;
        }
    }
    assert!(lines.iter().any(|l| l.contains("408")), "{lines:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn grpc_advertises_its_stream_limit_and_refuses_oversized_messages() {
    let clock = ManualClock::new();
    let cfg = Arc::new(Config::parse(CONFIG, "t.toml").unwrap());
    let s = start(opts(ConfigSource::Inline(cfg), &clock))
        .await
        .unwrap();
    // The HTTP/2 SETTINGS the server sends: at most 1 024 streams at once.
    let tcp = TcpStream::connect(s.grpc_addr).await.unwrap();
    let (_send, mut conn) = h2::client::handshake(tcp).await.unwrap();
    // Drive the connection until the server's SETTINGS have arrived (the
    // limit is unbounded until then).
    for _ in 0..100 {
        if conn.max_concurrent_send_streams() != usize::MAX {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), &mut conn).await;
    }
    assert_eq!(
        conn.max_concurrent_send_streams(),
        doorman_grpc::transport::MAX_CONCURRENT_STREAMS as usize
    );
    // A request above 16 MiB is refused with OUT_OF_RANGE, not decoded.
    let mut c = doorman_proto::CapacityClient::connect(format!("http://{}", s.grpc_addr))
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20);
    let huge = doorman_proto::doorman::GetCapacityRequest {
        client_id: "x".repeat(17 << 20),
        resource: vec![],
    };
    let e = c.get_capacity(huge).await.expect_err("too large");
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e:?}");
    assert_eq!(
        cap(&mut c, "a", "fair", 10.0, None).await,
        10.0,
        "still served"
    );
    s.shutdown().await;
}
