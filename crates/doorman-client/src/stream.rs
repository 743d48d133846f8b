//! The client task's lease stream (`doorman_net::LeaseStream`): whether
//! one is open, when to try again after a failure or a server without one
//! (an original Doorman server, a proxy that cuts streams: the task polls
//! with GetCapacity meanwhile), and what a pushed grant does (the core's
//! `on_push`). Requests on the stream are the task's.
//!
//! Must not: decide what a grant means (the client core does), or keep
//! polling for good because a stream failed once (it is tried again).

use std::time::Duration;

use doorman_core::client::GrantItem;
use doorman_lease::Time;
use doorman_net::{CallError, Connector};
use doorman_net::{Incoming, LeaseStream};
use doorman_proto::doorman as pb;
use tokio::time::Instant;

use crate::registry::ClientShared;

/// After a stream failed (ended, cut, hung), the task polls this long
/// before it opens one again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// After the master said it offers no stream (UNIMPLEMENTED), the task
/// polls this long before it asks again (it may have been upgraded).
pub const RETRY_UNSUPPORTED: Duration = Duration::from_secs(300);

/// The task's stream, if it uses one.
#[derive(Debug)]
pub(crate) struct Streaming {
    enabled: bool,
    open: Option<LeaseStream>,
    /// Not before this is a new stream opened.
    retry_at: Option<Instant>,
}

impl Streaming {
    /// Streams when `enabled`, else always polls.
    pub fn new(enabled: bool) -> Self {
        Streaming {
            enabled,
            open: None,
            retry_at: None,
        }
    }

    /// The stream to send on, opened now if none is and it may be;
    /// `None`: poll.
    pub async fn ready(&mut self, conn: &mut Connector) -> Option<&mut LeaseStream> {
        let may = self.retry_at.is_none_or(|t| crate::clock::instant() >= t);
        if self.enabled && self.open.is_none() && may {
            match conn.open_stream().await {
                Ok(Some(s)) => {
                    tracing::debug!(server = s.addr(), "lease stream open");
                    self.open = Some(s);
                }
                Ok(None) => {
                    tracing::info!("the server offers no lease stream; polling");
                    self.retry_in(RETRY_UNSUPPORTED);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "the lease stream did not open; polling");
                    self.retry_in(RETRY_AFTER_FAILURE);
                }
            }
        }
        self.open.as_mut()
    }

    /// The stream failed: drop it, poll for a while.
    pub fn failed(&mut self, why: &CallError) {
        if self.open.take().is_some() {
            tracing::info!(error = %why, "lease stream lost; polling for now");
        }
        self.retry_in(RETRY_AFTER_FAILURE);
    }

    /// The stream ended with a redirect: open the next one at once.
    pub fn redirected(&mut self) {
        self.open = None;
        self.retry_at = None;
    }

    fn retry_in(&mut self, d: Duration) {
        self.retry_at = Some(crate::clock::instant() + d);
    }

    /// The next message while nothing is asked (pending for good without a
    /// stream).
    pub async fn next_idle(&mut self) -> Result<Incoming, CallError> {
        match self.open.as_mut() {
            Some(s) => s.next().await,
            None => std::future::pending().await,
        }
    }
}

/// Sends `req` on `stream` and waits until `deadline` for its answer,
/// applying the pushes that come before it.
pub(crate) async fn ask(
    shared: &ClientShared,
    stream: &mut LeaseStream,
    req: pb::GetCapacityRequest,
    deadline: Instant,
) -> Result<pb::GetCapacityResponse, CallError> {
    let addr = stream.addr().to_string();
    let rpc_error =
        |code, message: &str| CallError::from_status(&addr, &tonic::Status::new(code, message));
    if !stream.send(req).await {
        return Err(rpc_error(
            tonic::Code::Unavailable,
            "the lease stream ended",
        ));
    }
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        match next {
            Err(_) => {
                let why = "no answer on the lease stream in time";
                return Err(rpc_error(tonic::Code::DeadlineExceeded, why));
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Incoming::Pushed(m))) => apply_push(shared, &m, true),
            Ok(Ok(Incoming::Answer(m))) => return Ok(m),
        }
    }
}

/// Applies pushed grants (`asking`: a request's answer is still to come;
/// `ClientCore::on_push`); a lowered one wakes the task to acknowledge it.
pub(crate) fn apply_push(shared: &ClientShared, m: &pb::GetCapacityResponse, asking: bool) {
    let now = shared.now();
    let items = grants(m, now);
    let mut st = shared.lock();
    if st.core.on_push(now, &items, asking) {
        shared.wake.notify_one();
    }
    shared.publish(&st, now);
    if let Some(m) = &shared.metrics {
        m.pushed(items.len());
    }
}

/// The grants of an answer to a request sent at `sent_at`.
pub(crate) fn grants(resp: &pb::GetCapacityResponse, sent_at: Time) -> Vec<GrantItem> {
    resp.response
        .iter()
        .map(|r| GrantItem {
            resource_id: r.resource_id.clone(),
            lease: doorman_proto::lease_from_wire(&r.gets, sent_at),
            safe_capacity: r.safe_capacity,
        })
        .collect()
}
