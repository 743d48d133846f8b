//! The accept loop both ports use (gRPC and HTTP): `TCP_NODELAY` on every
//! connection, at most a configured number of connections open at once
//! (one more is closed at once, so a flood of idle connections cannot take
//! every file descriptor), each closed after a while without any traffic
//! (a peer that connects and never speaks gives its slot back), and a
//! pause instead of a spin when accepting fails (out of file descriptors):
//! the open connections keep being served. Also the stop signal every
//! listener watches.
//!
//! Must not: read from a connection (tonic and hyper do).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_stream::Stream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::idle::Idle;

/// How long to wait after a failed accept before the next one.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The accepted connections of a listener, capped.
#[derive(Debug)]
pub struct Incoming {
    listener: TcpListener,
    name: &'static str,
    permits: Arc<Semaphore>,
    max: usize,
    idle: Duration,
    pause: Option<Pin<Box<Sleep>>>,
}

impl Incoming {
    /// At most `max` connections of `listener` (named `name` in logs) open
    /// at once, each closed after `idle` without a byte read or written
    /// (HTTP/2 keep-alive pings count).
    pub fn new(listener: TcpListener, name: &'static str, max: usize, idle: Duration) -> Self {
        let max = max.max(1);
        Incoming {
            listener,
            name,
            permits: Arc::new(Semaphore::new(max)),
            max,
            idle,
            pause: None,
        }
    }
}

impl Stream for Incoming {
    type Item = io::Result<Connection>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(pause) = self.pause.as_mut() {
                ready!(pause.as_mut().poll(cx));
                self.pause = None;
            }
            match ready!(self.listener.poll_accept(cx)) {
                Ok((stream, _)) => {
                    let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                        let (max, name) = (self.max, self.name);
                        tracing::warn!(
                            max,
                            "{name} connection cap reached; closing a new connection"
                        );
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    return Poll::Ready(Some(Ok(Connection {
                        stream: Idle::new(stream, self.idle),
                        _permit: permit,
                    })));
                }
                Err(e) => {
                    let name = self.name;
                    tracing::warn!(error = %e, "{name} accept failed; retrying in 100 ms");
                    self.pause = Some(Box::pin(tokio::time::sleep(ACCEPT_PAUSE)));
                }
            }
        }
    }
}

impl Incoming {
    /// The next connection, or `None` once `stop` turns true (accept
    /// errors pause the stream; it never ends by itself).
    pub async fn accept(&mut self, stop: &mut watch::Receiver<bool>) -> Option<Connection> {
        use tokio_stream::StreamExt;
        tokio::select! {
            c = self.next() => c.and_then(Result::ok),
            _ = stopped(stop) => None,
        }
    }
}

/// Resolves when the server is told to stop (or dropped).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// An accepted connection; its slot under the cap is freed when it closes.
#[derive(Debug)]
pub struct Connection {
    stream: Idle<TcpStream>,
    _permit: OwnedSemaphorePermit,
}

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.get_ref().connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
