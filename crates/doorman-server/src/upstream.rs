//! The async adapter of an intermediate server: asks the parent's master
//! for capacity in one bulk GetServerCapacity whenever the core says a
//! resource is due (at once for a new resource, then at the upstream
//! lease's refresh interval), and hands the answer back to the core. The
//! requests go on a lease stream (`ServerCapacityStream`) when the parent
//! offers one, and the grants it pushes go to the core too
//! (`Sharded::upstream_push`), so a change at the parent reaches this
//! server's own streaming holders at once. Finding the parent's master,
//! redirects, deadlines, the stream's fallback to polling and back, and
//! backoff with jitter are shared with the client library
//! (`doorman_net::{Connector, StreamLink}`, `doorman_core::Backoff`).
//! Each request carries this node's tree report (`ServerState::tree`).
//!
//! Must not: decide anything (the core does).

use doorman_core::server::Sharded;
use std::sync::Arc;
use std::time::Duration;

use doorman_core::limits::MAX_RESOURCES_PER_REQUEST;
use doorman_core::server::{UpstreamAsk, UpstreamGrant};
use doorman_core::Backoff;
use doorman_lease::{Span, Time};
use doorman_net::{Connector, Incoming, StreamLink};
use doorman_proto::doorman as pb;
use tokio::sync::watch;

use doorman_state::ServerState;
use doorman_wire::convert::{upstream_grants, upstream_request};
use doorman_wire::tree::report_to_wire;

/// Runs until `stop` turns true.
pub async fn run(
    state: Arc<ServerState>,
    mut conn: Connector,
    node_id: String,
    mut stop: watch::Receiver<bool>,
) {
    let seed = state.now().as_millis() as u64 ^ 0x5DEE_CE66;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30), seed);
    let mut link = StreamLink::new(true);
    loop {
        if *stop.borrow() {
            return;
        }
        if link.is_open() && !state.core().is_master() {
            link = StreamLink::new(true);
        }
        // The asks are marked as sent now: the parent's leases count from
        // here (see `doorman_lease::Lease::received`).
        let sent_at = state.now();
        let asks = state.core().upstream_request(sent_at);
        let idle = asks.as_ref().is_none_or(|a| a.is_empty());
        if let Some(asks) = asks.filter(|a| !a.is_empty()) {
            for chunk in asks.chunks(MAX_RESOURCES_PER_REQUEST) {
                let sent = (chunk, sent_at);
                let to = (&mut conn, &mut link);
                let ask = ask_parent(&state, to, &node_id, sent, &mut backoff);
                tokio::select! {
                    _ = ask => {}
                    _ = stop.changed() => return,
                }
            }
        } else if state.core().is_master() {
            tokio::select! {
                _ = probe(&state, &mut conn) => {}
                _ = stop.changed() => return,
            }
        }
        if !wait(&state, &mut link, idle, &mut stop).await {
            return;
        }
    }
}

/// Waits until the next request is due, something wakes the link, or the
/// parent pushes (applied); false when the server stops.
async fn wait(
    state: &ServerState,
    link: &mut StreamLink<pb::GetServerCapacityRequest>,
    idle: bool,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let now = state.now();
    let next = state.core().next_upstream_wakeup();
    let sleep = next
        .map(|t| (t - now).to_duration())
        .unwrap_or(Duration::from_secs(3600));
    // With nothing to ask, look at the parent now and then anyway.
    let sleep = if idle {
        sleep.min(PROBE_INTERVAL)
    } else {
        sleep
    };
    tokio::select! {
        _ = tokio::time::sleep(sleep) => {}
        _ = state.upstream_wake.notified() => {}
        m = link.next_idle() => match m {
            Ok(Incoming::Pushed(m)) => pushed(state, &m, false),
            Ok(Incoming::Answer(_)) => {
                tracing::debug!("an answer with no request pending on the lease stream; ignored");
            }
            Err(e) => link.failed(&e),
        },
        // A dropped sender (the server was dropped) also means stop.
        r = stop.changed() => return r.is_ok(),
    }
    true
}

/// How often a master with nothing to ask checks that its parent answers
/// (Discovery), so `/readyz` and the metrics show a broken parent link
/// before the first client comes.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// The parent answered: the link is up, and this server is one level
/// below the parent's (when the parent says its level).
fn answered(state: &ServerState, conn: &Connector) {
    if let Some(link) = &state.parent_link {
        link.succeeded(state.now());
    }
    if let Some(level) = conn.server_level() {
        state.set_level(level.saturating_add(1));
    }
}

/// A Discovery call to the parent, recorded in the parent link.
async fn probe(state: &ServerState, conn: &mut Connector) {
    let Some(link) = &state.parent_link else {
        return;
    };
    match conn.discover().await {
        Ok(_) => answered(state, conn),
        Err(e) => {
            tracing::warn!(error = %e, "the parent does not answer Discovery");
            state.metrics.parent_error(e.code());
            link.failed(e.to_string());
        }
    }
}

/// Grants the parent pushed (`asking`: while a request is out): the core
/// takes them, and this server's own streaming holders hear of what moved.
fn pushed(state: &ServerState, m: &pb::GetServerCapacityResponse, asking: bool) {
    let now = state.now();
    let grants = upstream_grants(m, (now, now));
    let moved = state.core().upstream_push(now, (&grants, asking));
    state.horizon_wake.notify_one();
    state.moved.note(moved.iter().map(String::as_str));
}

/// Logs (debug) what the parent answered to the request sent at
/// `sent_at`, and when it was sent: `scripts/upstream-trace.py` reads
/// these lines for the simulator (docs/sim-vs-real.md).
fn log_answer(grants: &[UpstreamGrant], (sent_at, now): (Time, Time)) {
    let asked_s_ago = (now - sent_at).as_secs_f64();
    if grants.is_empty() {
        // An answer all the same (a new master holding its own first ask).
        tracing::debug!(asked_s_ago, "the parent answered with no grant");
    }
    for g in grants {
        tracing::debug!(
            resource = %g.resource_id,
            capacity = g.lease.capacity,
            lasts_s = (g.lease.expiry - now).as_secs_f64(),
            asked_s_ago,
            "the parent answered"
        );
    }
}

/// One GetServerCapacity for `chunk`, asked for at `sent_at` (on the lease
/// stream if one is open); the answer or the failure goes to the core.
async fn ask_parent(
    state: &ServerState,
    (conn, link): (
        &mut Connector,
        &mut StreamLink<pb::GetServerCapacityRequest>,
    ),
    node_id: &str,
    (chunk, sent_at): (&[UpstreamAsk], Time),
    backoff: &mut Backoff,
) {
    let ids: Vec<String> = chunk.iter().map(|a| a.resource_id.clone()).collect();
    conn.deadline_for(chunk.iter().filter_map(|a| a.has.as_ref()));
    let report = report_to_wire(&state.tree());
    let req = upstream_request(node_id, chunk, (sent_at, Some(report)));
    let r = match link.call(conn, &req, |m| pushed(state, m, true)).await {
        Some(r) => r,
        None => conn.get_server_capacity(req).await,
    };
    let now = state.now();
    match backoff.outcome(r) {
        Ok(resp) => {
            let grants = upstream_grants(&resp, (sent_at, now));
            log_answer(&grants, (sent_at, now));
            state.core().upstream_response(now, &ids, &grants);
            state.horizon_wake.notify_one();
            state.moved.note(ids.iter().map(String::as_str));
            answered(state, conn);
            // On a lease stream the level comes only with the stream's
            // opening, which may have been before the parent knew its
            // own: ask Discovery, which says it, until this server knows
            // (a parent that says no level, the original, never streams).
            if state.level().is_none() && link.is_open() {
                probe(state, conn).await;
            }
        }
        Err((e, delay)) => {
            tracing::warn!(error = %e, retry_in = ?delay, "GetServerCapacity to the parent failed");
            state.metrics.parent_error(e.code());
            if let Some(link) = &state.parent_link {
                link.failed(e.to_string());
            }
            state
                .core()
                .upstream_failure(now, &ids, Span::from_duration(delay));
        }
    }
}
