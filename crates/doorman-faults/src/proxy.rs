//! `doorman-faults proxy`: a TCP proxy that delays what it forwards, with
//! jitter (this machine's kernel has no netem). It runs on a host of its
//! own; a client's host sends its connections to the leaf's replicas here
//! (DNAT in the client's namespace, so a redirect to any replica still
//! passes through), one listening port per replica. Each chunk read is
//! written on after the delay plus a random part of the jitter, never
//! before the chunk read before it (a stream keeps its order). Standard
//! input sets it (`delay MS JITTER_MS`; `0 0` forwards at once); `stats`
//! prints what it forwarded and how much it delayed, as a JSON line, so
//! the harness can show the fault happened.
//!
//! Must not: change or reorder a byte, or drop one but as told.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args as ClapArgs;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::rng::Rng;

/// The proxy's options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// `LISTEN=TARGET` (repeatable): accept on LISTEN, forward to TARGET.
    #[arg(long, value_parser = route)]
    pub route: Vec<(SocketAddr, SocketAddr)>,
}

fn route(s: &str) -> Result<(SocketAddr, SocketAddr), String> {
    let (a, b) = s.split_once('=').ok_or("LISTEN=TARGET")?;
    Ok((
        a.parse().map_err(|e| format!("{a}: {e}"))?,
        b.parse().map_err(|e| format!("{b}: {e}"))?,
    ))
}

/// The delay in force, whether answers are swallowed, and what was
/// forwarded.
#[derive(Debug, Default)]
struct Knobs {
    delay_ms: AtomicU64,
    jitter_ms: AtomicU64,
    /// Non-zero: what the target sends back is read and dropped (a
    /// middlebox that loses answers while requests pass).
    swallow: AtomicU64,
    swallowed: AtomicU64,
    chunks: AtomicU64,
    delayed_chunks: AtomicU64,
    delayed_ms: AtomicU64,
}

/// Runs until standard input ends.
pub async fn run(a: Args) -> anyhow::Result<()> {
    let knobs = Arc::new(Knobs::default());
    for (listen, target) in a.route {
        let l = TcpListener::bind(listen).await?;
        tokio::spawn(accept(l, target, knobs.clone()));
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["delay", d, j] => {
                knobs.delay_ms.store(d.parse()?, Ordering::Relaxed);
                knobs.jitter_ms.store(j.parse()?, Ordering::Relaxed);
            }
            ["answers", on] => {
                let swallow = u64::from(*on == "drop");
                knobs.swallow.store(swallow, Ordering::Relaxed);
            }
            ["stats"] => {
                let k = &knobs;
                let line = serde_json::json!({
                    "chunks": k.chunks.swap(0, Ordering::Relaxed),
                    "delayed_chunks": k.delayed_chunks.swap(0, Ordering::Relaxed),
                    "delayed_ms": k.delayed_ms.swap(0, Ordering::Relaxed),
                    "swallowed": k.swallowed.swap(0, Ordering::Relaxed),
                });
                println!("{line}");
            }
            _ => eprintln!("proxy: unknown command {line:?}"),
        }
    }
    Ok(())
}

async fn accept(l: TcpListener, target: SocketAddr, knobs: Arc<Knobs>) {
    let mut seed = std::process::id() as u64;
    while let Ok((inbound, _)) = l.accept().await {
        seed = seed.wrapping_add(1);
        let knobs = knobs.clone();
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(target).await else {
                return;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            let up = pump(ri, wo, (knobs.clone(), false), Rng::new(seed));
            let down = pump(ro, wi, (knobs, true), Rng::new(seed ^ 0xA5A5));
            let _ = tokio::join!(up, down);
        });
    }
}

/// Copies `r` to `w`, each chunk after its delay (reading goes on
/// meanwhile, as on a slow link), in order; answers (`down`) are dropped
/// while the knobs say so.
async fn pump(
    mut r: impl AsyncReadExt + Unpin,
    mut w: impl AsyncWriteExt + Unpin + Send + 'static,
    (knobs, down): (Arc<Knobs>, bool),
    mut rng: Rng,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if w.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = w.shutdown().await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut last = Instant::now();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if down && knobs.swallow.load(Ordering::Relaxed) != 0 {
            knobs.swallowed.fetch_add(n as u64, Ordering::Relaxed);
            continue;
        }
        let delay = knobs.delay_ms.load(Ordering::Relaxed);
        let jitter = knobs.jitter_ms.load(Ordering::Relaxed);
        let extra = if jitter > 0 {
            rng.next() % (jitter + 1)
        } else {
            0
        };
        let now = Instant::now();
        let at = (now + Duration::from_millis(delay + extra)).max(last);
        last = at;
        knobs.chunks.fetch_add(1, Ordering::Relaxed);
        let waited = at.saturating_duration_since(now).as_millis() as u64;
        if waited > 0 {
            knobs.delayed_chunks.fetch_add(1, Ordering::Relaxed);
            knobs.delayed_ms.fetch_add(waited, Ordering::Relaxed);
        }
        if tx.send((at, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}
