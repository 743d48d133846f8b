//! The holder's end of a lease stream (`doorman.Capacity/
//! CapacityStream`, or `ServerCapacityStream` for an intermediate server):
//! one bidirectional stream to the node's master on which GetCapacity
//! (GetServerCapacity) requests go and their answers, and grants the
//! server pushes, come back. Finding the master, TLS and the bearer token are the
//! [`Connector`]'s; what to do with each message is the caller's.
//!
//! Must not: decide what to ask or what a grant means, or wait without a
//! deadline to open.

use std::future::Future;
use std::pin::Pin;

use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::connector::{CallError, Connector};
use crate::redirect::Redirect;

type Client = CapacityClient<Channel>;

/// Requests queued on a stream before a send waits.
const QUEUE: usize = 16;

/// An answer on a lease stream: it may be a redirect, or pushed.
pub trait StreamAnswer: Redirect + std::fmt::Debug + Send + 'static {
    /// True for grants the server pushed without a request.
    fn pushed(&self) -> bool;
}

impl StreamAnswer for pb::GetCapacityResponse {
    fn pushed(&self) -> bool {
        self.pushed == Some(true)
    }
}

impl StreamAnswer for pb::GetServerCapacityResponse {
    fn pushed(&self) -> bool {
        self.pushed == Some(true)
    }
}

/// A request sent on a lease stream, and how its stream opens.
pub trait StreamRequest: std::fmt::Debug + Send + 'static {
    /// Its answers.
    type Answer: StreamAnswer;
    /// Opens this kind of stream (see [`Connector::open_stream`]).
    fn open(conn: &mut Connector) -> Opening<'_, Self>
    where
        Self: Sized;
}

/// A stream being opened.
pub type Opening<'a, Q> =
    Pin<Box<dyn Future<Output = Result<Option<LeaseStream<Q>>, CallError>> + Send + 'a>>;

impl StreamRequest for pb::GetCapacityRequest {
    type Answer = pb::GetCapacityResponse;
    fn open(conn: &mut Connector) -> Opening<'_, Self> {
        Box::pin(conn.open_stream())
    }
}

impl StreamRequest for pb::GetServerCapacityRequest {
    type Answer = pb::GetServerCapacityResponse;
    fn open(conn: &mut Connector) -> Opening<'_, Self> {
        Box::pin(conn.open_server_stream())
    }
}

/// An open lease stream: an end client's by default.
#[derive(Debug)]
pub struct LeaseStream<Q: StreamRequest = pb::GetCapacityRequest> {
    addr: String,
    requests: mpsc::Sender<Q>,
    answers: tonic::Streaming<Q::Answer>,
}

/// An intermediate server's lease stream to its parent.
pub type ServerLeaseStream = LeaseStream<pb::GetServerCapacityRequest>;

/// A message from the server on a lease stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming<A = pb::GetCapacityResponse> {
    /// The answer to the oldest request not yet answered (with a
    /// mastership: a redirect, and the stream's last message).
    Answer(A),
    /// Grants the server pushed without a request.
    Pushed(A),
}

impl<Q: StreamRequest> LeaseStream<Q> {
    /// The server at the other end.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `req`; false if the stream has ended.
    pub async fn send(&self, req: Q) -> bool {
        self.requests.send(req).await.is_ok()
    }

    /// The next message; an error when the stream ended (its status, or
    /// UNAVAILABLE when it closed without one).
    pub async fn next(&mut self) -> Result<Incoming<Q::Answer>, CallError> {
        match self.answers.message().await {
            Ok(Some(m)) if m.pushed() => Ok(Incoming::Pushed(m)),
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
        self.open_with(|mut c, r| async move { c.capacity_stream(r).await })
            .await
    }

    /// [`Connector::open_stream`] for an intermediate server: its
    /// GetServerCapacity requests on `ServerCapacityStream`.
    pub async fn open_server_stream(&mut self) -> Result<Option<ServerLeaseStream>, CallError> {
        self.open_with(|mut c, r| async move { c.server_capacity_stream(r).await })
            .await
    }

    async fn open_with<Q: StreamRequest, F, Fut>(
        &mut self,
        open: F,
    ) -> Result<Option<LeaseStream<Q>>, CallError>
    where
        F: FnOnce(Client, tonic::Request<ReceiverStream<Q>>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<tonic::Streaming<Q::Answer>>, tonic::Status>>,
    {
        let addr = match self.master() {
            Some(m) => m.to_string(),
            None => self.discover().await?,
        };
        let client = self.client(&addr)?;
        let (requests, queued) = mpsc::channel(QUEUE);
        let mut req = tonic::Request::new(ReceiverStream::new(queued));
        if let Some(t) = self.token() {
            t.attach(&mut req);
        }
        let opened = tokio::time::timeout(self.call_timeout(), open(client, req)).await;
        let status = match opened {
            Ok(Ok(resp)) => {
                self.saw_level(resp.metadata());
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
