//! HTTP endpoints of a server: `/metrics` (Prometheus), `/debug/status`
//! (HTML), `/api/v1/status` (JSON) and `/healthz`.
//!
//! Must not: change server state.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Json};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use crate::core::Status;
use crate::service::ServerState;

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
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(status_json))
        .route("/debug/status", get(status_html))
        .route("/", get(status_html))
        .with_state(state)
}

fn snapshot(state: &ServerState, leases: usize) -> (Status, crate::core::Counters) {
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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// Renders the status page.
pub fn render_html(s: &Status) -> String {
    let mut h = String::with_capacity(4096);
    let role = if s.is_master {
        "master".to_string()
    } else {
        match &s.master_address {
            Some(m) => format!("standby (master: {})", esc(m)),
            None => "standby (master unknown)".to_string(),
        }
    };
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>doorman {id}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse;margin:.5em 0 1.5em}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}th{{background:#eee}}\
         td.l,th.l{{text-align:left}}</style></head><body>\
         <h1>doorman server {id}</h1><p>Role: <b>{role}</b> · level {level} · \
         {leases} live leases · {unmatched} unmatched-resource requests</p>\
         <p>Config: {summary}</p>",
        id = esc(&s.server_id),
        level = s.level,
        leases = s.leases,
        unmatched = s.unmatched_requests,
        summary = esc(&s.config_summary),
    );
    h.push_str("<h2>Templates</h2><table><tr><th class=l>glob</th><th>capacity</th><th>safe</th><th class=l>algorithm</th><th>lease</th><th>refresh</th><th>learning</th><th class=l>description</th></tr>");
    for t in &s.templates {
        let _ = write!(
            h,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td class=l>{}</td><td>{}s</td><td>{}s</td><td>{}s</td><td class=l>{}</td></tr>",
            esc(&t.identifier_glob),
            num(t.capacity),
            t.safe_capacity.map(num).unwrap_or_else(|| "dynamic".into()),
            t.kind,
            t.lease_length,
            t.refresh_interval,
            t.learning_mode_duration,
            esc(t.description.as_deref().unwrap_or("")),
        );
    }
    h.push_str("</table><h2>Resources</h2><table><tr><th class=l>resource</th><th class=l>template</th><th class=l>algorithm</th><th>capacity</th><th>Σ has</th><th>Σ wants</th><th>requesters</th><th>subclients</th><th>safe</th><th class=l>mode</th></tr>");
    for r in &s.resources {
        let mode = if r.learning {
            format!("learning ({:.0}s left)", r.learning_remaining)
        } else {
            "normal".into()
        };
        let _ = write!(
            h,
            "<tr><td class=l><a href=\"#r-{id}\">{id}</a></td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
            esc(&r.template),
            r.kind,
            num(r.capacity),
            num(r.has),
            num(r.wants),
            r.requesters,
            num(r.subclients),
            num(r.safe_capacity),
            mode,
            id = esc(&r.id),
        );
    }
    h.push_str("</table>");
    for r in &s.resources {
        let _ = write!(h, "<h3 id=\"r-{id}\">{id}</h3>", id = esc(&r.id));
        if !r.bands.is_empty() {
            h.push_str(
                "<table><tr><th>band</th><th>demands</th><th>subclients</th><th>Σ wants</th></tr>",
            );
            for b in &r.bands {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    b.priority,
                    b.demands,
                    num(b.subclients),
                    num(b.wants)
                );
            }
            h.push_str("</table>");
        }
        h.push_str("<table><tr><th class=l>requester</th><th>priority</th><th>subclients</th><th>wants</th><th>has</th><th>target</th><th>expires in</th><th>last request</th></tr>");
        for l in &r.leases {
            let _ = write!(
                h,
                "<tr><td class=l>{}:{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}s</td><td>{:.1}s ago</td></tr>",
                l.kind,
                esc(&l.id),
                l.priority,
                num(l.subclients),
                num(l.wants),
                num(l.has),
                num(l.target),
                l.expires_in,
                l.last_request_ago,
            );
        }
        h.push_str("</table>");
        if r.leases_truncated {
            let _ = write!(
                h,
                "<p>Showing {} of {} leases (<a href=\"?leases={}\">more</a>).</p>",
                r.leases.len(),
                r.requesters,
                r.requesters
            );
        }
    }
    h.push_str("</body></html>\n");
    h
}
