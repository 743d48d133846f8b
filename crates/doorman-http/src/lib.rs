//! The HTTP boundary of a server: `/metrics` (Prometheus, rendered by
//! [`doorman_state::metrics`]),
//! `/debug/status` (HTML, `page.rs`), `/api/v1/status` (JSON), the tree
//! below the server (`/api/v1/tree` JSON, `/debug/tree` HTML,
//! `tree_page.rs`), `/healthz`
//! (the process lives) and `/readyz` (it can serve now, or why not). The
//! pages and metrics are built by `build.rs` (own low-priority threads)
//! from a snapshot taken step by step ([`ServerState::status`],
//! [`ServerState::scrape`]), so they neither hold the core lock for long
//! nor take CPU from the RPCs first.
//!
//! Must not: change server state.

pub mod build;
pub mod gate;
mod html;
mod page;
pub mod serve;
mod tree_page;

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use doorman_core::server::Status;
use doorman_core::tree::TreeNode;

use build::Builder;
use doorman_state::ServerState;
use doorman_transport::tls::PeerInfo;
use gate::Page;
pub use page::render_html;

/// Leases listed per resource unless `?leases=N` asks otherwise.
pub const DEFAULT_LEASES_SHOWN: usize = 100;

#[derive(Debug, Deserialize)]
struct StatusQuery {
    leases: Option<usize>,
}

/// The router for the HTTP endpoints.
pub fn router(state: Arc<ServerState>) -> Router {
    let pages = Builder::new(state);
    let health = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route_layer(from_fn_with_state(pages.clone(), health_gate));
    let status = Router::new()
        .route("/api/v1/status", get(status_json))
        .route("/debug/status", get(status_html))
        .route("/api/v1/tree", get(tree_json))
        .route("/debug/tree", get(tree_html))
        .route("/", get(status_html))
        .route_layer(from_fn_with_state(pages.clone(), status_gate));
    health.merge(status).with_state(pages)
}

async fn gated(pages: &Builder, page: Page, req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<PeerInfo>();
    match gate::check(pages.state(), peer, req.headers(), page) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}

async fn health_gate(State(pages): State<Builder>, req: Request, next: Next) -> Response {
    gated(&pages, Page::Health, req, next).await
}

async fn status_gate(State(pages): State<Builder>, req: Request, next: Next) -> Response {
    gated(&pages, Page::Status, req, next).await
}

/// The process lives and answers: nothing else (readiness is `/readyz`).
async fn healthz() -> &'static str {
    "ok\n"
}

/// 200 when the server can serve now, else 503 with the reason: no config
/// yet, the master unknown, (intermediate) no valid lease from the parent
/// for the resources in use, or a parent that never answered.
async fn readyz(State(pages): State<Builder>) -> impl IntoResponse {
    match pages.state().readiness() {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics(State(pages): State<Builder>) -> impl IntoResponse {
    let text = pages.metrics_page().await?;
    // Bytes: every scrape served from one page shares its buffer.
    Ok::<_, StatusCode>(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

async fn status_json(
    State(pages): State<Builder>,
    Query(q): Query<StatusQuery>,
) -> Result<Json<Status>, StatusCode> {
    let leases = q.leases.unwrap_or(DEFAULT_LEASES_SHOWN);
    Ok(Json(pages.build(move |s| s.status(leases)).await?))
}

async fn status_html(
    State(pages): State<Builder>,
    Query(q): Query<StatusQuery>,
) -> Result<Html<String>, StatusCode> {
    let leases = q.leases.unwrap_or(DEFAULT_LEASES_SHOWN);
    let page = pages
        .build(move |s| {
            let status = s.status(leases);
            render_html(&status, Some(&s.tree_of(&status)))
        })
        .await?;
    Ok(Html(page))
}

/// This server's node and the nodes that report to it (`doorman tree`).
async fn tree_json(State(pages): State<Builder>) -> Result<Json<TreeNode>, StatusCode> {
    Ok(Json(pages.build(|s| s.tree_of(&s.status(0))).await?))
}

/// The status page's tree section alone, for its live refresh.
async fn tree_html(State(pages): State<Builder>) -> Result<Html<String>, StatusCode> {
    let tree = pages.build(|s| s.tree_of(&s.status(0))).await?;
    Ok(Html(tree_page::render_tree(&tree)))
}
