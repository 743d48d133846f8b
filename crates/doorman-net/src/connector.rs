//! Finding and talking to the master of a Doorman node: Discovery across
//! the configured addresses, following `mastership.master_address`
//! redirects in any response, a deadline on every RPC (the configured one,
//! or a shorter one for a request renewing leases:
//! [`Connector::deadline_for`]). Failures are returned to the caller,
//! which backs off (see `doorman_core::Backoff`) and tries again; the next
//! attempt starts with the address after the one that failed, so a dead or
//! hung server is never asked first again.
//!
//! Used by the client library and by intermediate servers asking their
//! parent for capacity.
//!
//! Must not: retry by itself or decide anything about leases.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use doorman_core::schedule::deadline_for;
use doorman_lease::Lease;
use doorman_lease::Span;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use tonic::transport::Channel;

use crate::bearer::{outgoing, BearerToken};
pub use crate::redirect::Redirect;
use crate::tls::{endpoint, ClientTls};

type Client = CapacityClient<Channel>;

/// A client that sends and reads messages up to the protocol's limit
/// (tonic's default of 4 MiB is smaller than a request at the limits).
fn capacity_client(ch: Channel) -> Client {
    CapacityClient::new(ch)
        .max_decoding_message_size(doorman_core::limits::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(doorman_core::limits::MAX_MESSAGE_BYTES)
}

/// Why a call did not produce an answer from a master.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// No configured server said it was the master or knew who is.
    #[error("no master found among {addrs:?}{}", last_error_suffix(.last_error))]
    NoMaster {
        /// The addresses tried.
        addrs: Vec<String>,
        /// Why the last one failed, if it failed (a refused connection, a
        /// TLS handshake, …) rather than not knowing the master.
        last_error: Option<String>,
    },
    /// The RPC failed (connection refused, deadline exceeded, …).
    #[error("{addr}: {code:?}: {message}")]
    Rpc {
        /// The server.
        addr: String,
        /// gRPC code.
        code: tonic::Code,
        /// Message.
        message: String,
        /// The status details (`grpc-status-details-bin`), if any.
        details: tonic::codegen::Bytes,
    },
    /// Redirects went round in circles.
    #[error("too many mastership redirects (last: {0})")]
    TooManyRedirects(String),
}

fn last_error_suffix(e: &Option<String>) -> String {
    e.as_deref()
        .map(|e| format!(" (last error: {e})"))
        .unwrap_or_default()
}

impl CallError {
    /// `addr` answered with `status` (its code, message and details).
    pub fn from_status(addr: &str, status: &tonic::Status) -> Self {
        CallError::Rpc {
            addr: addr.to_string(),
            code: status.code(),
            message: status.message().to_string(),
            details: tonic::codegen::Bytes::copy_from_slice(status.details()),
        }
    }

    /// The status the server answered with (`None` if it did not answer with one).
    pub fn status(&self) -> Option<tonic::Status> {
        let CallError::Rpc {
            code,
            message,
            details,
            ..
        } = self
        else {
            return None;
        };
        Some(tonic::Status::with_details(
            *code,
            message.clone(),
            details.clone(),
        ))
    }

    /// The gRPC code, for metrics.
    pub fn code(&self) -> tonic::Code {
        match self {
            CallError::NoMaster { .. } => tonic::Code::Unavailable,
            CallError::Rpc { code, .. } => *code,
            CallError::TooManyRedirects(_) => tonic::Code::Unavailable,
        }
    }
}

/// Called after every RPC with the method, its duration and the error
/// code if it failed (for metrics).
pub type RpcObserver =
    std::sync::Arc<dyn Fn(&'static str, Duration, Option<tonic::Code>) + Send + Sync>;

/// A connection manager for one Doorman node (a set of addresses).
pub struct Connector {
    addrs: Vec<String>,
    next: usize,
    master: Option<String>,
    channels: HashMap<String, Channel>,
    /// The configured deadline: the most any call waits.
    timeout: Duration,
    /// The deadline of the calls from now on (at most `timeout`).
    call_timeout: Duration,
    observer: Option<RpcObserver>,
    tls: Option<ClientTls>,
    token: Option<BearerToken>,
    /// The level in its tree the last answering server said it is at.
    server_level: Option<u32>,
    /// The last answer's `doorman-note` (why grants may be small).
    last_note: Option<String>,
    /// An address whose last call got no answer in time, and until when a
    /// redirect to it is not followed (see [`Connector::suspects`]).
    suspect: Option<(String, tokio::time::Instant)>,
}

pub use doorman_proto::{LEVEL_HEADER, NOTE_HEADER};

/// The note about `resource` in a `doorman-note` header's value.
pub fn note_for(header: Option<&str>, resource: &str) -> Option<String> {
    header?
        .split("; ")
        .find_map(|n| n.strip_prefix(resource)?.strip_prefix(": "))
        .map(str::to_string)
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("addrs", &self.addrs)
            .field("master", &self.master)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// A connector for `addrs` with `timeout` on every RPC.
    pub fn new(addrs: Vec<String>, timeout: Duration) -> Self {
        Connector {
            addrs,
            next: 0,
            master: None,
            channels: HashMap::new(),
            timeout,
            call_timeout: timeout,
            observer: None,
            tls: None,
            token: None,
            server_level: None,
            last_note: None,
            suspect: None,
        }
    }

    /// The `doorman-note` of the last answer, if it had one.
    pub fn last_note(&self) -> Option<&str> {
        self.last_note.as_deref()
    }

    /// The level in its tree the last server that answered said it is at
    /// (`doorman-level`; none from an original Doorman server).
    pub fn server_level(&self) -> Option<u32> {
        self.server_level
    }

    /// An answer's headers said this server's level (or did not).
    pub(crate) fn saw_level(&mut self, headers: &tonic::metadata::MetadataMap) {
        let level = headers.get(LEVEL_HEADER);
        let level = level.and_then(|v| v.to_str().ok()?.parse().ok());
        self.server_level = level.or(self.server_level);
    }

    /// Connects over TLS with `tls`.
    pub fn with_tls(mut self, tls: Option<ClientTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Sends `token` as `authorization: Bearer …` on every RPC.
    pub fn with_token(mut self, token: Option<BearerToken>) -> Self {
        self.token = token;
        self
    }

    /// Reports every RPC to `observer`.
    pub fn with_observer(mut self, observer: RpcObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The master currently believed in.
    pub fn master(&self) -> Option<&str> {
        self.master.as_deref()
    }

    /// The configured deadline of each RPC.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The deadline of the calls from now on ([`Connector::deadline_for`]).
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// The bearer token sent, if any.
    pub(crate) fn token(&self) -> Option<&BearerToken> {
        self.token.as_ref()
    }

    /// The master a lease stream's redirect named (`None`, a suspect: discover).
    pub fn follow(&mut self, master: Option<String>) {
        self.master = master.filter(|m| !m.is_empty() && !self.suspects(m));
    }

    /// Gives the calls from now on (Discovery included) the deadline of a
    /// request renewing `leases`: half their shortest refresh interval, at
    /// least 1 s, at most the configured deadline
    /// (`doorman_core::schedule::deadline_for`).
    pub fn deadline_for<'a>(&mut self, leases: impl IntoIterator<Item = &'a Lease>) {
        let d = deadline_for(leases, Span::from_duration(self.timeout));
        self.call_timeout = d.to_duration().min(self.timeout);
    }

    pub(crate) fn client(&mut self, addr: &str) -> Result<CapacityClient<Channel>, CallError> {
        if let Some(ch) = self.channels.get(addr) {
            return Ok(capacity_client(ch.clone()));
        }
        let ep = endpoint(addr, self.tls.as_ref()).map_err(|e| CallError::Rpc {
            addr: addr.to_string(),
            code: tonic::Code::InvalidArgument,
            message: e.to_string(),
            details: Default::default(),
        })?;
        let ch = ep
            .connect_timeout(self.timeout)
            .timeout(self.timeout)
            .connect_lazy();
        self.channels.insert(addr.to_string(), ch.clone());
        Ok(capacity_client(ch))
    }

    /// A call to `addr` failed: drop its channel and, if it was the master,
    /// forget it; the next discovery starts after it (a master that hangs
    /// is asked again only once the others have been).
    pub(crate) fn forget(&mut self, addr: &str) {
        self.channels.remove(addr);
        if self.master.as_deref() == Some(addr) {
            self.master = None;
        }
        if let Some(i) = self.addrs.iter().position(|a| a == addr) {
            if i == self.next {
                self.next = (i + 1) % self.addrs.len();
            }
        }
    }

    async fn rpc<T, F, Fut>(
        &mut self,
        method: &'static str,
        addr: &str,
        f: F,
    ) -> Result<T, CallError>
    where
        F: FnOnce(CapacityClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let client = self.client(addr)?;
        let start = crate::clock::instant();
        let result = tokio::time::timeout(self.call_timeout, f(client)).await;
        if let Some(obs) = &self.observer {
            let code = match &result {
                Ok(Ok(_)) => None,
                Ok(Err(s)) => Some(s.code()),
                Err(_) => Some(tonic::Code::DeadlineExceeded),
            };
            obs(method, crate::clock::instant() - start, code);
        }
        let r = match result {
            Ok(Ok(resp)) => {
                self.saw_level(resp.metadata());
                let note = resp.metadata().get(NOTE_HEADER);
                self.last_note = note.and_then(|v| v.to_str().ok()).map(str::to_string);
                return Ok(resp.into_inner());
            }
            Ok(Err(status)) => CallError::from_status(addr, &status),
            Err(_) => {
                let why = format!("no answer within {:?}", self.call_timeout);
                CallError::from_status(addr, &tonic::Status::deadline_exceeded(why))
            }
        };
        if !matches!(r.code(), tonic::Code::InvalidArgument) {
            self.forget(addr);
        }
        // No answer in time: our deadline, or the gRPC deadline the
        // channel enforces ("Timeout expired").
        let hung = r.code() == tonic::Code::DeadlineExceeded
            || (r.code() == tonic::Code::Cancelled && r.to_string().contains("Timeout expired"));
        if hung {
            let until = crate::clock::instant() + 2 * self.call_timeout;
            self.suspect = Some((addr.to_string(), until));
        }
        Err(r)
    }

    /// True while `addr` is suspected of hanging: its last call got no
    /// answer in time, a moment ago. A standby still names such a master
    /// until its election lease runs out (a successor is elected a TTL
    /// later): following that redirect would wait a whole deadline again,
    /// so it is not followed, and the next discovery goes on to the other
    /// addresses, where the successor will answer.
    fn suspects(&self, addr: &str) -> bool {
        self.suspect
            .as_ref()
            .is_some_and(|(a, until)| a == addr && crate::clock::instant() < *until)
    }

    /// `addr` answered as master: no longer suspected of hanging.
    fn answered(&mut self, addr: &str) {
        if self.suspects(addr) {
            self.suspect = None;
        }
    }

    /// Finds the master with the Discovery RPC, starting at the next
    /// address in rotation.
    pub async fn discover(&mut self) -> Result<String, CallError> {
        let n = self.addrs.len();
        let start = self.next;
        let mut last_error = None;
        for i in 0..n {
            let addr = self.addrs[(start + i) % n].clone();
            let req = outgoing(
                &pb::DiscoveryRequest {},
                self.call_timeout,
                self.token.as_ref(),
            );
            let r = self
                .rpc(
                    "Discovery",
                    &addr,
                    |mut c| async move { c.discovery(req).await },
                )
                .await;
            match r {
                Ok(d) if d.is_master => {
                    self.answered(&addr);
                    self.next = (start + i) % n;
                    self.master = Some(addr.clone());
                    return Ok(addr);
                }
                Ok(d) => {
                    let named = d.mastership.master_address.filter(|m| !m.is_empty());
                    if let Some(m) = named.filter(|m| !self.suspects(m)) {
                        self.next = (start + i + 1) % n;
                        self.master = Some(m.clone());
                        return Ok(m);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "discovery failed");
                    last_error = Some(e.to_string());
                }
            }
        }
        self.next = (start + 1) % n.max(1);
        Err(CallError::NoMaster {
            addrs: self.addrs.clone(),
            last_error,
        })
    }

    /// Calls the master with `f`, discovering it first if needed and
    /// following redirects (at most a few hops). On failure the believed
    /// master is forgotten so the next call rediscovers.
    pub async fn call<T, F, Fut>(&mut self, method: &'static str, f: F) -> Result<T, CallError>
    where
        T: Redirect,
        F: Fn(CapacityClient<Channel>, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let max_hops = self.addrs.len() + 3;
        for _ in 0..max_hops {
            let target = match self.master.clone() {
                Some(m) => m,
                None => self.discover().await?,
            };
            let timeout = self.call_timeout;
            let resp = self.rpc(method, &target, |c| f(c, timeout)).await?;
            match resp.mastership() {
                None => {
                    self.answered(&target);
                    return Ok(resp);
                }
                Some(m) => match m
                    .master_address
                    .clone()
                    .filter(|a| !a.is_empty() && !self.suspects(a))
                {
                    Some(next) if next != target => {
                        tracing::debug!(from = %target, to = %next, "following mastership redirect");
                        self.master = Some(next);
                    }
                    _ => {
                        self.master = None;
                        return Err(CallError::NoMaster {
                            addrs: self.addrs.clone(),
                            last_error: None,
                        });
                    }
                },
            }
        }
        Err(CallError::TooManyRedirects(
            self.master.clone().unwrap_or_default(),
        ))
    }

    /// GetCapacity on the master.
    pub async fn get_capacity(
        &mut self,
        req: pb::GetCapacityRequest,
    ) -> Result<pb::GetCapacityResponse, CallError> {
        let call = |mut c: Client, r| async move { c.get_capacity(r).await };
        let token = self.token.clone();
        self.call("GetCapacity", |c, t| {
            call(c, outgoing(&req, t, token.as_ref()))
        })
        .await
    }

    /// GetServerCapacity on the master.
    pub async fn get_server_capacity(
        &mut self,
        req: pb::GetServerCapacityRequest,
    ) -> Result<pb::GetServerCapacityResponse, CallError> {
        let call = |mut c: Client, r| async move { c.get_server_capacity(r).await };
        let token = self.token.clone();
        self.call("GetServerCapacity", |c, t| {
            call(c, outgoing(&req, t, token.as_ref()))
        })
        .await
    }

    /// ReleaseCapacity on the master.
    pub async fn release_capacity(
        &mut self,
        req: pb::ReleaseCapacityRequest,
    ) -> Result<pb::ReleaseCapacityResponse, CallError> {
        let call = |mut c: Client, r| async move { c.release_capacity(r).await };
        let token = self.token.clone();
        self.call("ReleaseCapacity", |c, t| {
            call(c, outgoing(&req, t, token.as_ref()))
        })
        .await
    }
}
