//! A TCP proxy on 127.0.0.1 that can cut the link it carries, the way
//! etcd's functional tester cuts links between its members: pass traffic,
//! drop it silently (nothing forwarded, nothing refused: the peer sees a
//! hung connection until its own deadline, as behind a firewall that
//! drops packets), or reset it (connections closed, new ones refused at
//! once). Tests put one between a client and its server, or a server and
//! its parent or etcd, and switch the mode while they run.
//!
//! Must not: look at or change the bytes it forwards.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// Forward everything.
    Pass,
    /// Forward nothing and refuse nothing: bytes wait in the kernel's
    /// buffers (and flow once the link passes again); a new connection is
    /// accepted but not carried on until then.
    Drop,
    /// Close every connection and close new ones at once (the peer sees
    /// the connection end, as when a host is down and refuses).
    Reset,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    mode: watch::Sender<LinkMode>,
    accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a free port of 127.0.0.1 to `target`, passing traffic.
    /// Needs a tokio runtime.
    pub async fn start(target: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (mode, rx) = watch::channel(LinkMode::Pass);
        let accepted = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(accept(listener, target, rx, accepted.clone()));
        Ok(FaultProxy {
            addr,
            mode,
            accepted,
            task,
        })
    }

    /// Where to connect instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the link to `mode`.
    pub fn set(&self, mode: LinkMode) {
        self.mode.send_replace(mode);
    }

    /// The mode now.
    pub fn mode(&self) -> LinkMode {
        *self.mode.borrow()
    }

    /// Connections accepted so far (refused ones included).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    target: SocketAddr,
    mode: watch::Receiver<LinkMode>,
    accepted: Arc<AtomicU64>,
) {
    let mut conns = tokio::task::JoinSet::new();
    while let Ok((inbound, _)) = listener.accept().await {
        accepted.fetch_add(1, Ordering::Relaxed);
        if *mode.borrow() == LinkMode::Reset {
            drop(inbound);
            continue;
        }
        conns.spawn(carry(inbound, target, mode.clone()));
        while conns.try_join_next().is_some() {}
    }
}

/// Carries one connection until either side closes or the link resets.
async fn carry(inbound: TcpStream, target: SocketAddr, mut mode: watch::Receiver<LinkMode>) {
    // A new connection behind a dropping link waits, as a SYN would.
    if wait_while_dropping(&mut mode).await == LinkMode::Reset {
        return;
    }
    let Ok(outbound) = TcpStream::connect(target).await else {
        return;
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (ri, wi) = inbound.into_split();
    let (ro, wo) = outbound.into_split();
    let up = pump(ri, wo, mode.clone());
    let down = pump(ro, wi, mode.clone());
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = until(&mut mode, LinkMode::Reset) => {}
    }
}

/// Waits until the link no longer drops; returns the mode then.
async fn wait_while_dropping(mode: &mut watch::Receiver<LinkMode>) -> LinkMode {
    loop {
        let m = *mode.borrow_and_update();
        if m != LinkMode::Drop {
            return m;
        }
        if mode.changed().await.is_err() {
            return LinkMode::Reset;
        }
    }
}

async fn until(mode: &mut watch::Receiver<LinkMode>, wanted: LinkMode) {
    loop {
        if *mode.borrow_and_update() == wanted {
            return;
        }
        if mode.changed().await.is_err() {
            return;
        }
    }
}

/// Copies one direction, reading nothing while the link drops (so the
/// sender's bytes wait in the kernel's buffers, unacknowledged by the
/// application, as behind a dropping firewall).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<LinkMode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if wait_while_dropping(&mut mode).await == LinkMode::Reset {
            return;
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            // Stop reading as soon as the link starts dropping.
            _ = mode.changed() => continue,
        };
        // Bytes read just before a drop began are held until it ends.
        if wait_while_dropping(&mut mode).await == LinkMode::Reset {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn ask(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut b = [0u8; 4];
        match tokio::time::timeout(within, s.read_exact(&mut b)).await {
            Ok(Ok(_)) => Some(b.to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn passes_drops_silently_then_delivers_and_resets() {
        let p = FaultProxy::start(echo_server().await).await.unwrap();
        let mut s = TcpStream::connect(p.addr()).await.unwrap();
        let short = Duration::from_millis(300);
        assert_eq!(ask(&mut s, short).await.as_deref(), Some(&b"ping"[..]));
        p.set(LinkMode::Drop);
        assert_eq!(ask(&mut s, short).await, None, "dropped: no answer");
        // A connection made while dropping hangs rather than failing.
        let mut late = TcpStream::connect(p.addr()).await.unwrap();
        assert_eq!(ask(&mut late, short).await, None);
        p.set(LinkMode::Pass);
        let mut b = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&b, b"ping", "the held bytes flow once the link passes");
        p.set(LinkMode::Reset);
        let mut b = [0u8; 8];
        let r = tokio::time::timeout(Duration::from_secs(2), s.read(&mut b)).await;
        assert!(matches!(r, Ok(Ok(0)) | Ok(Err(_))), "reset closes: {r:?}");
        assert_eq!(p.accepted(), 2);
    }
}
