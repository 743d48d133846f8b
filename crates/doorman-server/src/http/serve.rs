//! Serving the HTTP pages to whoever connects, without letting a peer hold
//! the server: HTTP/1.1 only, a connection cap (a connection over it is
//! closed at once), a deadline for the request headers (slow-loris
//! connections are closed), a deadline for each request, bounded request
//! bodies, and an accept loop that backs off instead of spinning when the
//! process is out of file descriptors.
//!
//! Must not: know what the pages show (`mod.rs` and `page.rs` do).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::idle::Idle;

/// How the HTTP listener treats its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Open connections at most; one more is closed at once.
    pub max_connections: usize,
    /// Time a peer has to send a request's headers.
    pub header_timeout: Duration,
    /// Time a request may take from its headers to its response.
    pub request_timeout: Duration,
    /// A connection without a byte read or written for this long is closed
    /// (a peer that never reads its answers gives its slot back).
    pub idle_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Largest request body accepted (the pages take none).
const MAX_BODY_BYTES: usize = 64 << 10;

/// Serves `app` until `stop` turns true; connections in flight then finish
/// their current request.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
) {
    let app = app
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES));
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => return,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(
                max = limits.max_connections,
                "HTTP connection cap reached; closing a new connection"
            );
            continue;
        };
        let (app, stop) = (app.clone(), stop.clone());
        tokio::spawn(async move {
            let stream = Idle::new(stream, limits.idle_timeout);
            connection(stream, app, limits.header_timeout, stop).await;
            drop(permit);
        });
    }
}

/// Resolves when the server is told to stop (or dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Out of file descriptors (or another accept error): wait a little so the
/// loop does not spin, and keep serving the connections already open.
async fn accept_failed(e: &std::io::Error) {
    tracing::warn!(error = %e, "HTTP accept failed; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

async fn connection(
    stream: Idle<TcpStream>,
    app: Router,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
