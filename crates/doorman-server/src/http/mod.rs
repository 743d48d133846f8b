//! The HTTP boundary of a server: `/metrics` (Prometheus, rendered by
//! [`crate::metrics`]),
//! `/debug/status` (HTML, `page.rs`), `/api/v1/status` (JSON), `/healthz`
//! (the process lives) and `/readyz` (it can serve now, or why not), all
//! read from one core snapshot per request.
//!
//! Must not: change server state.

mod page;
pub mod serve;

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Json};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use doorman_core::server::{Counters, Status};

use crate::state::ServerState;
pub use page::render_html;

/// Leases listed per resource unless `?leases=N` asks otherwise.
pub const DEFAULT_LEASES_SHOWN: usize = 100;

#[derive(Debug, Deserialize)]
struct StatusQuery {
    leases: Option<usize>,
}

/// The router for the HTTP endpoints.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(status_json))
        .route("/debug/status", get(status_html))
        .route("/", get(status_html))
        .with_state(state)
}

fn snapshot(state: &ServerState, leases: usize) -> (Status, Counters) {
    let now = state.now();
    let mut core = state.core();
    (core.status(now, leases), core.counters())
}

async fn healthz(State(state): State<Arc<ServerState>>) -> impl IntoResponse {
    let core = state.core();
    let role = if core.is_master() {
        "master"
    } else {
        "standby"
    };
    format!("ok {role}\n")
}

/// 200 when the server can serve now, else 503 with the reason: no config
/// yet, the master unknown, or (intermediate) no valid lease from the
/// parent for the resources in use.
async fn readyz(State(state): State<Arc<ServerState>>) -> impl IntoResponse {
    let now = state.now();
    let readiness = state.core().readiness(now);
    match readiness {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics(State(state): State<Arc<ServerState>>) -> impl IntoResponse {
    let (status, counters) = snapshot(&state, 0);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&status, counters),
    )
}

async fn status_json(
    State(state): State<Arc<ServerState>>,
    Query(q): Query<StatusQuery>,
) -> Json<Status> {
    Json(snapshot(&state, q.leases.unwrap_or(DEFAULT_LEASES_SHOWN)).0)
}

async fn status_html(
    State(state): State<Arc<ServerState>>,
    Query(q): Query<StatusQuery>,
) -> Html<String> {
    Html(render_html(
        &snapshot(&state, q.leases.unwrap_or(DEFAULT_LEASES_SHOWN)).0,
    ))
}
