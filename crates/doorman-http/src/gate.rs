//! Who may see which page: `/metrics`, `/healthz` and `/readyz` are open
//! (probes and scrapers often have no certificate) unless the server was
//! started with `--http-require-identity`; `/debug/status` and
//! `/api/v1/status` follow the config's `read` rule, and need an identity
//! whenever callers can authenticate. A caller is identified as on the
//! gRPC port: bearer token, else client certificate.
//!
//! Must not: decide what an identity may do (the access rules do).

use axum::http::{header, HeaderMap, StatusCode};

use doorman_state::ServerState;
use doorman_transport::tls::PeerInfo;

/// The kinds of page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// `/metrics`, `/healthz`, `/readyz`.
    Health,
    /// `/debug/status`, `/api/v1/status`.
    Status,
}

/// Ok, or the status and text to answer with (401 without a usable
/// identity, 403 when the rules refuse it).
pub fn check(
    state: &ServerState,
    peer: Option<&PeerInfo>,
    headers: &HeaderMap,
    page: Page,
) -> Result<(), (StatusCode, String)> {
    let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    let certificate = peer.and_then(|p| p.identity.as_ref());
    let caller = state
        .identify(certificate, authorization)
        .map_err(|e| (StatusCode::UNAUTHORIZED, format!("{e}\n")))?;
    let needs_identity = match page {
        Page::Health => state.auth.health_needs_identity,
        Page::Status => state.auth.authenticating,
    };
    if needs_identity && caller.is_none() {
        let why = "this page needs a client certificate or a bearer token\n";
        return Err((StatusCode::UNAUTHORIZED, why.into()));
    }
    if page == Page::Status {
        state.may_read(caller.as_deref()).map_err(|why| {
            state.metrics.denied("read");
            (StatusCode::FORBIDDEN, format!("{why}\n"))
        })?;
    }
    Ok(())
}
