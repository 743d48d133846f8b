//! Serving the HTTP pages to whoever connects, without letting a peer hold
//! the server: HTTP/1.1 only, the shared accept loop
//! ([`doorman_transport::listener::Incoming`]: connection cap, idle connections
//! closed, back-off instead of a spin when out of file descriptors), a
//! deadline for the request headers (slow-loris connections are closed), a
//! deadline for each request, and bounded request bodies; over TLS when
//! the server has it (the handshake under its own deadline).
//!
//! Must not: know what the pages show (`mod.rs` and `page.rs` do).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use doorman_state::ServerState;
use doorman_transport::listener::{stopped, Incoming};
use doorman_transport::tls::{Peer, Port, ServerTls};

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

impl HttpLimits {
    /// Default of `max_connections` (and of `--http-max-connections`).
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
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
    tls: Option<Arc<ServerTls>>,
    state: Arc<ServerState>,
    mut stop: watch::Receiver<bool>,
) {
    let app = app
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES));
    let mut incoming = Incoming::new(
        listener,
        "HTTP",
        limits.max_connections,
        limits.idle_timeout,
    );
    while let Some(conn) = incoming.accept(&mut stop).await {
        let (stop, app, tls, state) = (stop.clone(), app.clone(), tls.clone(), state.clone());
        tokio::spawn(async move {
            if let Some(peer) = Peer::handshake(conn, tls.as_deref(), Port::Http, &*state).await {
                connection(peer, app, limits.header_timeout, stop).await;
            }
        });
    }
}

/// Serves one connection; each request carries what is known of the peer
/// ([`doorman_transport::tls::PeerInfo`]) for the pages that check identities.
async fn connection(
    stream: Peer,
    app: Router,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let info = stream.info().clone();
    let app = app.map_request(move |mut r: hyper::Request<hyper::body::Incoming>| {
        r.extensions_mut().insert(info.clone());
        r
    });
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
