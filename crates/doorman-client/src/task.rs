//! The client's background task (the bottom half's I/O): one bulk
//! GetCapacity for every resource that is due, ReleaseCapacity for dropped
//! resources, the leases or fallbacks applied to the resources, and a last
//! release of everything at close. The decisions are the client core's.
//!
//! Must not: decide when to refresh or what capacity applies (the core
//! does), or wait without a deadline.

use std::sync::Arc;
use std::time::Duration;

use doorman_core::client::{ClientCore, Refused, RequestItem};
use doorman_core::limits::MAX_RESOURCES_PER_REQUEST;
use doorman_core::Backoff;
use doorman_lease::{Span, Time};
use doorman_net::refusal;
use doorman_net::Incoming;
use doorman_proto::doorman as pb;
use tokio::sync::watch;

use crate::connection::{note_for, CallError, Connector};
use crate::registry::ClientShared;
use crate::stream::{grants, Streaming};

/// How often Auto wants are sampled while idle.
const AUTO_SAMPLE: Span = Span::secs(1);

/// What one turn of the loop has to send.
struct Turn {
    client_id: String,
    release: Vec<String>,
    request: Option<Vec<RequestItem>>,
    /// When the core marked the request sent: its leases count from here.
    at: Time,
}

/// Samples wants and asks the core what is due.
fn next_turn(shared: &ClientShared) -> Turn {
    let now = shared.now();
    let instant = crate::clock::instant();
    let mut guard = shared.lock();
    let st = &mut *guard;
    let release = std::mem::take(&mut st.to_release);
    for r in st.resources.values() {
        st.core.set_wants(&r.id, r.wants(instant), now);
    }
    Turn {
        client_id: st.core.client_id().to_string(),
        release,
        request: st.core.poll_request(now),
        at: now,
    }
}

/// ReleaseCapacity requests for `ids`, at most the server's limit of
/// resources each.
fn release_requests(client_id: &str, ids: &[String]) -> Vec<pb::ReleaseCapacityRequest> {
    ids.chunks(MAX_RESOURCES_PER_REQUEST)
        .map(|chunk| pb::ReleaseCapacityRequest {
            client_id: client_id.to_string(),
            resource_id: chunk.to_vec(),
        })
        .collect()
}

/// Releases dropped resources; a failure is ignored (the lease expires).
async fn release(conn: &mut Connector, client_id: &str, ids: Vec<String>) {
    for req in release_requests(client_id, &ids) {
        if let Err(e) = conn.release_capacity(req).await {
            tracing::debug!(error = %e, "ReleaseCapacity failed (ignored; the lease will expire)");
        }
    }
}

fn get_capacity_request(
    client_id: &str,
    chunk: &[RequestItem],
    now: Time,
) -> pb::GetCapacityRequest {
    pb::GetCapacityRequest {
        client_id: client_id.to_string(),
        resource: chunk
            .iter()
            .map(|i| {
                let claim = i.has.as_ref().map(|l| doorman_proto::claim_to_wire(l, now));
                pb::ResourceRequest {
                    resource_id: i.resource_id.clone(),
                    priority: i.priority,
                    has: claim.map(|c| c.0),
                    wants: i.wants,
                    has_remaining_ms: claim.map(|c| c.1),
                }
            })
            .collect(),
    }
}

/// One GetCapacity for `chunk`, asked for at `sent_at`; the answer or the
/// failure goes to the core.
async fn refresh(
    shared: &ClientShared,
    (conn, streaming): (&mut Connector, &mut Streaming),
    backoff: &mut Backoff,
    (client_id, sent_at): (&str, Time),
    chunk: &[RequestItem],
) {
    let ids: Vec<String> = chunk.iter().map(|i| i.resource_id.clone()).collect();
    conn.deadline_for(chunk.iter().filter_map(|i| i.has.as_ref()));
    let req = get_capacity_request(client_id, chunk, sent_at);
    let (r, note) = call(shared, conn, streaming, req).await;
    let now = shared.now();
    shared.called(conn.master(), r.as_ref().err().map(|e| e.to_string()));
    let mut st = shared.lock();
    match backoff.outcome(r) {
        Ok(resp) => {
            // When each answered request was sent: the simulator replays
            // these (docs/sim-vs-real.md, "Each process's renewal phase").
            tracing::debug!(
                asked_s_ago = (now - sent_at).as_secs_f64(),
                resources = ids.len(),
                "the server answered"
            );
            st.core.on_response(now, &ids, &grants(&resp, sent_at));
            for id in &ids {
                if let Some(res) = st.resources.get(id) {
                    res.set_note(note_for(note.as_deref(), id));
                }
            }
        }
        Err((e, delay)) => failed(&mut st.core, now, &e, (&ids, delay)),
    }
}

/// The answer to `req` and its note: on the lease stream if one is open
/// (pushes before the answer applied on the way), else by GetCapacity. A
/// redirect or a stream cut short is asked again by GetCapacity at once;
/// no answer in time, or a refusal, is the call's failure.
async fn call(
    shared: &ClientShared,
    conn: &mut Connector,
    streaming: &mut Streaming,
    req: pb::GetCapacityRequest,
) -> (Result<pb::GetCapacityResponse, CallError>, Option<String>) {
    let start = crate::clock::instant();
    let pushed = |m: &pb::GetCapacityResponse| crate::stream::apply_push(shared, m, true);
    if let Some(r) = streaming.call(conn, &req, pushed).await {
        if let Some(m) = &shared.metrics {
            let code = r.as_ref().err().map(CallError::code);
            let took = crate::clock::instant() - start;
            m.rpc("CapacityStream", took.as_secs_f64(), code);
        }
        let note = r.as_ref().ok().and_then(|resp| resp.note.clone());
        return (r, note);
    }
    let r = conn.get_capacity(req).await;
    let note = conn.last_note().map(str::to_string);
    (r, note)
}

/// The request for `ids` failed with `e`: a refusal names what it
/// refused; anything else is retried after `delay`.
fn failed(core: &mut ClientCore, now: Time, e: &CallError, (ids, delay): (&[String], Duration)) {
    match refused(e, ids) {
        Some((named, more)) => {
            let which: Vec<&String> = named.iter().map(|(id, _)| id).collect();
            tracing::warn!(error = %e, resources = ?which, "the server refused resources; asking again only after a while");
            core.on_refused(now, &named);
            let named: std::collections::HashSet<&String> = which.into_iter().collect();
            let rest: Vec<String> = ids.iter().filter(|i| !named.contains(i)).cloned().collect();
            // Ask for the others again at once, unless the server said
            // it refused more than it named: then back off.
            let retry = if more {
                Span::from_duration(delay)
            } else {
                Span::ZERO
            };
            core.on_failure(now, &rest, retry);
        }
        None => {
            tracing::warn!(error = %e, retry_in = ?delay, "GetCapacity failed");
            core.on_failure(now, ids, Span::from_duration(delay));
        }
    }
}

/// For a refusal that is not transient (PERMISSION_DENIED: the access
/// rules; INVALID_ARGUMENT: the request), each resource it concerns with
/// its reason, as the status details say (`doorman_net::refusal`; the
/// message is never read), and whether the server refused more than it
/// named. A problem of the request as a whole, or a refusal without
/// details (a server that sends none), concerns every resource. `None`
/// for any other failure (UNAUTHENTICATED included: a token one replica
/// has not reloaded yet must not cost the leases held).
fn refused(e: &CallError, ids: &[String]) -> Option<(Vec<(String, Refused)>, bool)> {
    let status = e.status()?;
    let denied = match status.code() {
        tonic::Code::PermissionDenied => true,
        tonic::Code::InvalidArgument => false,
        _ => return None,
    };
    let all = |why: Refused| ids.iter().map(|id| (id.clone(), why.clone())).collect();
    let Some(r) = refusal::from_status(&status, ids) else {
        let message = status.message().to_string();
        return Some((all(Refused::Unexplained { denied, message }), false));
    };
    if let Some(whole) = r.refusal.request {
        return Some((all(Refused::Reason(whole)), false));
    }
    let named = r.refusal.resources.into_iter();
    let named = named.map(|x| (x.resource_id, Refused::Reason(x.reason)));
    Some((named.collect(), r.unnamed > 0))
}

/// Runs `call` (an RPC, however long it hangs) while leases keep ending
/// on time: what applies now is published first (a lease that ended
/// while the process was stopped ends before the call, not when it
/// answers), and at each lease's end what the core says applies then (the
/// fallback), so a client behind a link that drops packets stops using a
/// lease when the server stops counting it, not when the RPC's deadline
/// passes.
async fn ending_leases_apply(shared: &ClientShared, call: impl std::future::Future<Output = ()>) {
    shared.publish(&shared.lock(), shared.now());
    tokio::pin!(call);
    loop {
        let now = shared.now();
        let next = shared.lock().core.next_expiry(now);
        let Some(at) = next else {
            return call.await;
        };
        tokio::select! {
            () = &mut call => return,
            () = tokio::time::sleep((at - now).to_duration()) => {
                let now = shared.now();
                shared.publish(&shared.lock(), now);
            }
        }
    }
}

/// Applies what the core says to the resources; returns how long to sleep.
fn publish_and_plan(shared: &ClientShared) -> Duration {
    let now = shared.now();
    let st = shared.lock();
    shared.publish(&st, now);
    let mut next = st.core.next_wakeup(now);
    let auto = st
        .resources
        .values()
        .any(|r| r.lock().fixed_wants.is_none());
    if auto {
        next = Some(next.map_or(now + AUTO_SAMPLE, |t| t.min(now + AUTO_SAMPLE)));
    }
    next.map(|t| (t - now).to_duration())
        .unwrap_or(Duration::from_secs(3600))
}

/// Runs until `stop` turns true, then releases everything still open.
pub(crate) async fn run(
    shared: Arc<ClientShared>,
    mut conn: Connector,
    mut backoff: Backoff,
    (mut streaming, mut stop): (Streaming, watch::Receiver<bool>),
) {
    while !*stop.borrow() {
        // Every wake-up first applies what holds now: the process may have
        // been stopped past a lease's end (SIGSTOP, a frozen VM).
        shared.publish(&shared.lock(), shared.now());
        let turn = next_turn(&shared);
        if !turn.release.is_empty() {
            let ids = turn.release.clone();
            let released = release(&mut conn, &turn.client_id, turn.release);
            tokio::select! {
                _ = ending_leases_apply(&shared, released) => {}
                _ = stop.changed() => {
                    // Cut short by close: the last release sends them.
                    shared.lock().to_release.extend(ids);
                    break;
                }
            }
        }
        if let Some(items) = &turn.request {
            for chunk in items.chunks(MAX_RESOURCES_PER_REQUEST) {
                let asked = (turn.client_id.as_str(), turn.at);
                let link = (&mut conn, &mut streaming);
                let call = refresh(&shared, link, &mut backoff, asked, chunk);
                tokio::select! {
                    _ = ending_leases_apply(&shared, call) => {}
                    _ = stop.changed() => break,
                }
            }
            if *stop.borrow() {
                break;
            }
        }
        let sleep = publish_and_plan(&shared);
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.wake.notified() => {}
            _ = stop.changed() => {}
            m = streaming.next_idle() => match m {
                Ok(Incoming::Pushed(m)) => crate::stream::apply_push(&shared, &m, false),
                Ok(Incoming::Answer(_)) => tracing::debug!("an answer with no request pending on the lease stream; ignored"),
                Err(e) => streaming.failed(&e),
            },
        }
    }
    release_all(&shared, &mut conn).await;
}

/// Shutting down: release everything still open, under the deadline.
async fn release_all(shared: &ClientShared, conn: &mut Connector) {
    let (ids, client_id) = {
        let st = shared.lock();
        let mut ids: Vec<String> = st.core.resource_ids().map(str::to_string).collect();
        ids.extend(st.to_release.iter().cloned());
        (ids, st.core.client_id().to_string())
    };
    if ids.is_empty() {
        return;
    }
    // All chunks within one RPC deadline: close never hangs.
    let deadline = crate::clock::instant() + conn.timeout();
    for req in release_requests(&client_id, &ids) {
        match tokio::time::timeout_at(deadline, conn.release_capacity(req)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "ReleaseCapacity at close failed"),
            Err(_) => {
                tracing::debug!("ReleaseCapacity at close timed out");
                return;
            }
        }
    }
}
