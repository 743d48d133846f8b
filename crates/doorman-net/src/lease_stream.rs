//! The holder's end of the lease stream (`doorman.Capacity/
//! CapacityStream`): one bidirectional stream to the node's master on
//! which GetCapacity requests go and their answers, and grants the server
//! pushes, come back. Finding the master, TLS and the bearer token are the
//! [`Connector`]'s; what to do with each message is the caller's.
//!
//! Must not: decide what to ask or what a grant means, or wait without a
//! deadline to open.

use doorman_proto::doorman as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::connector::{CallError, Connector};

/// Requests queued on a stream before a send waits.
const QUEUE: usize = 16;

/// An open lease stream.
#[derive(Debug)]
pub struct LeaseStream {
    addr: String,
    requests: mpsc::Sender<pb::GetCapacityRequest>,
    answers: tonic::Streaming<pb::GetCapacityResponse>,
}

/// A message from the server on a lease stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to the oldest request not yet answered (with a
    /// mastership: a redirect, and the stream's last message).
    Answer(pb::GetCapacityResponse),
    /// Grants the server pushed without a request.
    Pushed(pb::GetCapacityResponse),
}

impl LeaseStream {
    /// The server at the other end.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `req`; false if the stream has ended.
    pub async fn send(&self, req: pb::GetCapacityRequest) -> bool {
        self.requests.send(req).await.is_ok()
    }

    /// The next message; an error when the stream ended (its status, or
    /// UNAVAILABLE when it closed without one).
    pub async fn next(&mut self) -> Result<Incoming, CallError> {
        match self.answers.message().await {
            Ok(Some(m)) if m.pushed == Some(true) => Ok(Incoming::Pushed(m)),
            Ok(Some(m)) => Ok(Incoming::Answer(m)),
            Ok(None) => {
                let ended = tonic::Status::unavailable("the lease stream ended");
                Err(CallError::from_status(&self.addr, &ended))
            }
            Err(s) => Err(CallError::from_status(&self.addr, &s)),
        }
    }
}

impl Connector {
    /// Opens a lease stream to the master, found first if not known, within
    /// the call deadline. `Ok(None)` when the master does not offer one
    /// (UNIMPLEMENTED: an original Doorman server): poll instead.
    pub async fn open_stream(&mut self) -> Result<Option<LeaseStream>, CallError> {
        let addr = match self.master() {
            Some(m) => m.to_string(),
            None => self.discover().await?,
        };
        let mut client = self.client(&addr)?;
        let (requests, queued) = mpsc::channel(QUEUE);
        let mut req = tonic::Request::new(ReceiverStream::new(queued));
        if let Some(t) = self.token() {
            t.attach(&mut req);
        }
        let opened = tokio::time::timeout(self.call_timeout(), client.capacity_stream(req)).await;
        let status = match opened {
            Ok(Ok(resp)) => {
                let answers = resp.into_inner();
                return Ok(Some(LeaseStream {
                    addr,
                    requests,
                    answers,
                }));
            }
            Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => return Ok(None),
            Ok(Err(s)) => s,
            Err(_) => tonic::Status::deadline_exceeded("the lease stream did not open in time"),
        };
        self.forget(&addr);
        Err(CallError::from_status(&addr, &status))
    }
}
