//! A connection that is closed when it makes no progress for a while: no
//! byte read and none written for the idle timeout. It frees the slot of a
//! peer that connects and never speaks, or that sends requests and never
//! reads the answers. HTTP/2 keep-alive pings count as progress, so a
//! healthy idle gRPC client is not affected.
//!
//! Progress only records the time it was made; the timer is moved when it
//! fires (to the last progress + the timeout), not on every read and write,
//! which would take the runtime's timer lock several times per request.
//!
//! Must not: look at what is read or written.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `io` with an idle deadline.
#[derive(Debug)]
pub struct Idle<T> {
    io: T,
    timeout: Duration,
    /// When the last byte was read or written.
    last: Instant,
    /// Fires at or before `last + timeout`.
    deadline: Pin<Box<Sleep>>,
}

impl<T> Idle<T> {
    /// Closes `io` after `timeout` without progress.
    pub fn new(io: T, timeout: Duration) -> Self {
        Idle {
            io,
            timeout,
            last: doorman_net::clock::instant(),
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// Progress was made.
    fn progressed(&mut self) {
        self.last = doorman_net::clock::instant();
    }

    /// Nothing is ready: an error once `timeout` has passed without
    /// progress. A timer that fires after later progress is moved on.
    fn expired<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let at = self.last + self.timeout;
            if at <= doorman_net::clock::instant() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for too long",
                )));
            }
            self.deadline.as_mut().reset(at);
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Idle<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                self.progressed();
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Idle<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.progressed();
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => self.expired(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                self.progressed();
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_times_out_and_a_talking_one_does_not() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut idle = Idle::new(a, Duration::from_secs(10));
        let mut buf = [0u8; 4];
        // Talking every 5 s keeps it open.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            b.write_all(b"ping").await.unwrap();
            idle.read_exact(&mut buf).await.unwrap();
        }
        // Then silence: the read fails after 10 s.
        let t = doorman_net::clock::instant();
        let e = idle.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(doorman_net::clock::since(t), Duration::from_secs(10));
    }
}
