//! A holder's use of its lease stream, the same for the client library
//! and an intermediate server's parent link: whether a stream is open,
//! when to try again after a failure or a server without one (an original
//! Doorman server, a proxy that cuts streams: the holder polls with the
//! unary call meanwhile), and one request asked on it.
//!
//! Must not: decide what a grant means (the caller's core does), or keep
//! polling for good because a stream failed once (it is tried again).

use std::time::Duration;

use tokio::time::Instant;

use crate::clock::instant;
use crate::connector::{CallError, Connector};
use crate::lease_stream::{Incoming, LeaseStream, StreamRequest};
use crate::redirect::Redirect;

use doorman_core::schedule::{STREAM_RETRY_AFTER_FAILURE, STREAM_RETRY_UNSUPPORTED};

/// A holder's stream, if it uses one.
#[derive(Debug)]
pub struct StreamLink<Q: StreamRequest> {
    enabled: bool,
    open: Option<LeaseStream<Q>>,
    /// Not before this is a new stream opened.
    retry_at: Option<Instant>,
}

impl<Q: StreamRequest> StreamLink<Q> {
    /// Streams when `enabled`, else always polls.
    pub fn new(enabled: bool) -> Self {
        StreamLink {
            enabled,
            open: None,
            retry_at: None,
        }
    }

    /// True while a stream is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The stream to send on, opened now if none is and it may be;
    /// `None`: poll.
    pub async fn ready(&mut self, conn: &mut Connector) -> Option<&mut LeaseStream<Q>> {
        let may = self.retry_at.is_none_or(|t| instant() >= t);
        if self.enabled && self.open.is_none() && may {
            match Q::open(conn).await {
                Ok(Some(s)) => {
                    tracing::debug!(server = s.addr(), "lease stream open");
                    self.open = Some(s);
                }
                Ok(None) => {
                    tracing::info!("the server offers no lease stream; polling");
                    self.retry_in(STREAM_RETRY_UNSUPPORTED.to_duration());
                }
                Err(e) => {
                    tracing::debug!(error = %e, "the lease stream did not open; polling");
                    self.retry_in(STREAM_RETRY_AFTER_FAILURE.to_duration());
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
        self.retry_in(STREAM_RETRY_AFTER_FAILURE.to_duration());
    }

    /// The stream ended with a redirect: open the next one at once.
    pub fn redirected(&mut self) {
        self.open = None;
        self.retry_at = None;
    }

    fn retry_in(&mut self, d: Duration) {
        self.retry_at = Some(instant() + d);
    }

    /// The next message while nothing is asked (pending for good without a
    /// stream).
    pub async fn next_idle(&mut self) -> Result<Incoming<Q::Answer>, CallError> {
        match self.open.as_mut() {
            Some(s) => s.next().await,
            None => std::future::pending().await,
        }
    }

    /// `req` asked on the stream, if one is open or opens, within the
    /// connector's call deadline, with the pushes that come before its
    /// answer handed to `pushed`. `None`: ask by the unary call (no
    /// stream, a redirect, a stream cut short). No answer in time, or a
    /// refusal, is the request's failure.
    pub async fn call(
        &mut self,
        conn: &mut Connector,
        req: &Q,
        pushed: impl FnMut(&Q::Answer),
    ) -> Option<Result<Q::Answer, CallError>>
    where
        Q: Clone,
    {
        // Copied only for a stream: the unary path keeps `req` for itself.
        let stream = self.ready(conn).await?;
        let deadline = instant() + conn.call_timeout();
        match ask(stream, req.clone(), deadline, pushed).await {
            Ok(resp) => match resp.mastership() {
                None => return Some(Ok(resp)),
                Some(m) => {
                    conn.follow(m.master_address.clone());
                    self.redirected();
                }
            },
            Err(e) if e.code() == tonic::Code::DeadlineExceeded => {
                conn.follow(None);
                self.failed(&e);
                return Some(Err(e));
            }
            Err(e) if refusal(&e) => {
                self.redirected();
                return Some(Err(e));
            }
            Err(e) => self.failed(&e),
        }
        None
    }
}

/// A refusal of the request itself (the unary call would be refused too).
fn refusal(e: &CallError) -> bool {
    e.status().is_some_and(|s| {
        matches!(
            s.code(),
            tonic::Code::PermissionDenied | tonic::Code::InvalidArgument
        )
    })
}

/// Sends `req` on `stream` and waits until `deadline` for its answer,
/// handing the pushes that come before it to `pushed`.
async fn ask<Q: StreamRequest>(
    stream: &mut LeaseStream<Q>,
    req: Q,
    deadline: Instant,
    mut pushed: impl FnMut(&Q::Answer),
) -> Result<Q::Answer, CallError> {
    let addr = stream.addr().to_string();
    let rpc_error =
        |code, message: &str| CallError::from_status(&addr, &tonic::Status::new(code, message));
    if !stream.send(req).await {
        let why = "the lease stream ended";
        return Err(rpc_error(tonic::Code::Unavailable, why));
    }
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => {
                let why = "no answer on the lease stream in time";
                return Err(rpc_error(tonic::Code::DeadlineExceeded, why));
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Incoming::Pushed(m))) => pushed(&m),
            Ok(Ok(Incoming::Answer(m))) => return Ok(m),
        }
    }
}
