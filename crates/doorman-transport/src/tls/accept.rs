//! Connections after the TLS handshake, as the gRPC and HTTP servers see
//! them: [`Peer`] is either the plain connection or its TLS stream, with
//! what is known of the other end ([`PeerInfo`]: address and, with a
//! client certificate, its identity). Handshakes run in their own tasks
//! under a deadline, so a slow or silent peer delays nobody; a failed one
//! (a plaintext client, no or a bad client certificate) is logged and
//! counted by reason, and the connection closed.
//!
//! Must not: decide what an identity may do.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, watch};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;

use super::{identity_of, Port, ServerTls, TlsEvents};
use crate::listener::{Connection, Incoming};

/// Time a peer has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What is known of the other end of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerInfo {
    /// Its address.
    pub remote: Option<SocketAddr>,
    /// The identity its client certificate names (see [`identity_of`]).
    pub identity: Option<Arc<str>>,
}

/// A connection ready for HTTP: plain, or after a TLS handshake.
#[derive(Debug)]
pub enum Peer {
    /// No TLS.
    Plain(Connection, PeerInfo),
    /// TLS established.
    Tls(Box<TlsStream<Connection>>, PeerInfo),
}

impl Peer {
    /// What is known of the other end.
    pub fn info(&self) -> &PeerInfo {
        match self {
            Peer::Plain(_, i) | Peer::Tls(_, i) => i,
        }
    }

    /// `conn` as is without `tls`, else after a handshake; `None` (logged
    /// and counted) if the handshake failed.
    pub async fn handshake(
        conn: Connection,
        tls: Option<&ServerTls>,
        port: Port,
        events: &dyn TlsEvents,
    ) -> Option<Peer> {
        let remote = conn.connect_info().remote_addr();
        let Some(tls) = tls else {
            let info = PeerInfo {
                remote,
                identity: None,
            };
            return Some(Peer::Plain(conn, info));
        };
        let accept = tls.acceptor(port).accept(conn);
        let err = match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
            Ok(Ok(stream)) => {
                let identity = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| identity_of(c))
                    .map(Arc::from);
                return Some(Peer::Tls(Box::new(stream), PeerInfo { remote, identity }));
            }
            Ok(Err(e)) => e,
            Err(_) => io::Error::new(io::ErrorKind::TimedOut, "handshake deadline passed"),
        };
        let reason = failure_reason(&err);
        events.handshake_failed(port, reason);
        tracing::info!(peer = ?remote, port = port.name(), reason, error = %err, "TLS handshake failed");
        None
    }
}

/// The counter label of a failed handshake.
fn failure_reason(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::TimedOut {
        return "timeout";
    }
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => "closed",
            _ => "other",
        };
    };
    match tls {
        rustls::Error::NoCertificatesPresented => "no_client_certificate",
        rustls::Error::InvalidCertificate(_) => "bad_client_certificate",
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => "not_tls",
        rustls::Error::AlertReceived(_) => "client_rejected_server",
        rustls::Error::NoApplicationProtocol => "no_common_protocol",
        _ => "other",
    }
}

/// The connections of `incoming`, each through [`Peer::handshake`] in its
/// own task, until `stop`.
pub fn secure(
    mut incoming: Incoming,
    tls: Option<Arc<ServerTls>>,
    port: Port,
    events: Arc<dyn TlsEvents>,
    mut stop: watch::Receiver<bool>,
) -> impl Stream<Item = io::Result<Peer>> {
    let (tx, rx) = mpsc::channel::<Peer>(64);
    tokio::spawn(async move {
        while let Some(conn) = incoming.accept(&mut stop).await {
            let (tx, tls, events) = (tx.clone(), tls.clone(), events.clone());
            tokio::spawn(async move {
                let peer = Peer::handshake(conn, tls.as_deref(), port, &*events).await;
                if let Some(peer) = peer {
                    let _ = tx.send(peer).await;
                }
            });
        }
    });
    ReceiverStream::new(rx).map(Ok)
}

impl Connected for Peer {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.info().clone()
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Peer::Plain($s, _) => $e,
            Peer::Tls($s, _) => $e,
        }
    };
}

impl AsyncRead for Peer {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Peer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Peer::Plain(s, _) => s.is_write_vectored(),
            Peer::Tls(s, _) => s.is_write_vectored(),
        }
    }
}
