//! The lease streams (`doorman.Capacity/CapacityStream`, and
//! `ServerCapacityStream` for downstream servers): a holder's GetCapacity
//! (GetServerCapacity) requests on one bidirectional stream, each decided
//! and answered as the unary call would, in order, with the pusher's
//! grants between them ([`push`]). Who streams for what is the [`hub`]'s.
//!
//! A stream ends when its holder ends it, when the server stops
//! (UNAVAILABLE: the holder polls, or streams to the next master), after an
//! answer with a redirect (this server is not the master: the holder goes to the one
//! named), after a refusal (the status ends the stream as it would end a
//! call; the holder reads it as GetCapacity's), and when the holder does
//! not read its answers (its queue is full).
//!
//! Must not: decide anything (the core does), or answer out of order.

pub mod hub;
pub mod push;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use doorman_core::server::{Grant, NotMaster, Who};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::layers::Caller;
use crate::CapacityService;
use hub::{Outbox, Slot};

/// How a stream's requests are decided: the unary call's way.
pub(crate) type Decide<Q> =
    fn(&CapacityService, Option<&str>, &Q) -> Result<(Who, Result<Vec<Grant>, NotMaster>), Status>;

/// An answer queued to a stream, boxed: the queue allocates its slots 32
/// at a time, and a pointer each keeps that block at 512 bytes per stream,
/// not 2.5 KiB.
pub type Queued<A> = Result<Box<A>, Status>;

/// The answers tonic sends down a stream, out of its queue.
#[derive(Debug)]
pub struct Answers<A>(ReceiverStream<Queued<A>>);

impl<A> Stream for Answers<A> {
    type Item = Result<A, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = Pin::new(&mut self.0).poll_next(cx);
        next.map(|m| m.map(|r| r.map(|a| *a)))
    }
}

/// Accepts a stream from its caller: a task serves it (`serve`), its
/// answers queued through `outbox` (the kind of stream it is).
pub(crate) fn start<Q: Send + 'static, A: Send + 'static>(
    svc: &CapacityService,
    request: Request<Streaming<Q>>,
    decide: Decide<Q>,
    outbox: fn(mpsc::Sender<Queued<A>>) -> Outbox,
) -> Result<Response<Answers<A>>, Status> {
    let caller = Caller::of(&request)?;
    let (tx, answers) = mpsc::channel(hub::STREAM_QUEUE);
    let inbound = (request.into_inner(), decide);
    tokio::spawn(serve(svc.clone(), caller, inbound, outbox(tx)));
    Ok(Response::new(Answers(ReceiverStream::new(answers))))
}

/// Serves one stream until it ends.
async fn serve<Q>(
    svc: CapacityService,
    caller: Option<Arc<str>>,
    (mut inbound, decide): (Streaming<Q>, Decide<Q>),
    outbox: Outbox,
) {
    let (state, hub) = (svc.state().clone(), svc.hub().clone());
    let slot = hub.open(outbox.clone());
    state.moved.listen(true);
    state.metrics.streams(1);
    let mut stop = svc.stop.clone();
    loop {
        let msg = tokio::select! {
            m = inbound.message() => m,
            () = outbox.closed() => break,
            () = stopping(&mut stop) => {
                slot.fail(Status::unavailable("the server is shutting down"));
                break;
            }
        };
        let req = match msg {
            Ok(Some(req)) => req,
            Ok(None) => break,
            Err(status) => {
                tracing::debug!(error = %status, "lease stream ended by its holder");
                break;
            }
        };
        state.metrics.stream_request();
        if !answer(&svc, &slot, caller.as_deref(), (&req, decide)) {
            break;
        }
    }
    hub.close(slot.key());
    state.moved.listen(!hub.is_empty());
    state.metrics.streams(-1);
}

/// Resolves when the server stops (never without a stop signal).
async fn stopping(stop: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match stop {
        Some(rx) => {
            let _ = rx.wait_for(|s| *s).await;
        }
        None => std::future::pending().await,
    }
}

/// Decides one request of the stream and queues its answer, under the
/// stream's order lock; false when the stream is to end.
fn answer<Q>(
    svc: &CapacityService,
    slot: &Slot,
    caller: Option<&str>,
    (req, decide): (&Q, Decide<Q>),
) -> bool {
    let _order = slot.order();
    match decide(svc, caller, req) {
        Ok((who, grants)) => {
            let redirect = grants.is_err();
            if let Ok(g) = &grants {
                let ids = g.iter().map(|g| g.resource_id.as_str());
                svc.hub().hold(slot.key(), &who, ids);
            }
            slot.answer(grants) && !redirect
        }
        Err(status) => {
            slot.fail(status);
            false
        }
    }
}
