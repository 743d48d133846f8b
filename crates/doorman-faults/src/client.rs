//! `doorman-faults client`: a real client process on the Rust client
//! library for the harness. It holds one rate resource per `Client` (one,
//! or `--count` of them with ids `ID-0`, `ID-1`, …, each its own
//! connection, as many hosts' worth of clients would be) and reports on
//! standard output, one JSON line each, every change of what a client
//! uses, and every second what it uses anyway (the auditor knows it is
//! alive): `{"t": <monotonic s: when the library applied it>, "i":
//! <client index>, "cap": <capacity>, "mode": "lease"|…, "expiry_ms":
//! <its lease's end on its lease clock, or null>, "wall_ms": <its wall
//! clock, on heartbeats>, "cont": <reported on SIGCONT>}`, or
//! `{"t", "i", "lost": <changes it fell too far behind to see>}`.
//! The wall clock is the one libfaketime sets for this process: the
//! auditor checks that the offsets it set took effect. On SIGCONT it
//! reports at once (a process resumed after a stop). It reads
//! `wants <n>` lines on standard input; end of input closes the clients
//! (their leases released) and the process exits. The library's warnings
//! go to standard error, stamped with the same monotonic seconds.
//!
//! `--ignore-lease-end` is the harness's self-test, never the library's:
//! the client goes on reporting (using) the capacity of its last lease
//! after that lease has ended, so the auditor must see it exceed the
//! capacity.
//!
//! Must not: decide anything (the library does) or report a capacity
//! later than it applies it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args as ClapArgs;
use doorman_client::{
    BearerToken, CapacityChanges, Client, ClientTls, Fallback, Mode, RateOptions, RateResource,
    Wants,
};
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::broadcast::error::RecvError;

use crate::clock::mono;

/// The client's options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The addresses of its leaf's replicas, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub server: Vec<String>,
    /// Its client id (with `--count`, the prefix of each client's).
    #[arg(long)]
    pub id: String,
    /// The resource.
    #[arg(long)]
    pub resource: String,
    /// What each client wants at start.
    #[arg(long)]
    pub wants: f64,
    /// How many clients this process runs.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Start (build the clients, whose first request goes at once) at
    /// this second of the machine's monotonic clock (`clock::mono`): a
    /// replayed plan's phase.
    #[arg(long)]
    pub start_at_mono: Option<f64>,
    /// The deadline of each RPC, ms (the library's `rpc_timeout`).
    #[arg(long, default_value_t = 2_000)]
    pub rpc_timeout_ms: u64,
    /// Self-test only: go on using a lease's capacity after it ends.
    #[arg(long)]
    pub ignore_lease_end: bool,
    /// Poll with GetCapacity instead of holding leases on the lease
    /// stream (where the server offers one).
    #[arg(long)]
    pub poll: bool,
    /// TLS: the CA to trust (connects over TLS when given).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// TLS: the client certificate to present.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: its key.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A file holding a bearer token to send.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// One client of the process, what it reports, and the capacity of its
/// last lease (the self-test's liar keeps using it).
struct One {
    index: usize,
    resource: RateResource,
    last_lease: std::sync::Mutex<f64>,
}

/// Runs the clients until standard input ends.
pub async fn run(a: Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_timer(MonoTimer)
        .try_init();
    if let Some(at) = a.start_at_mono {
        let wait = at - crate::clock::mono();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        } else {
            eprintln!(
                "doorman-faults client: started {:.3} s late for --start-at-mono",
                -wait
            );
        }
    }
    let mut clients = Vec::new();
    let mut ones = Vec::new();
    let mut watchers = Vec::new();
    for index in 0..a.count.max(1) {
        let id = if a.count > 1 {
            format!("{}-{index}", a.id)
        } else {
            a.id.clone()
        };
        let client = build(&a, id).await?;
        let resource = client.rate_resource(&a.resource, RateOptions::wants(a.wants))?;
        // From its creation on: the watcher is spawned once every client
        // of the process is built, and those built first may by then
        // have been granted and lowered.
        let changes = resource.capacity_changes();
        let one = Arc::new(One {
            index,
            resource,
            last_lease: std::sync::Mutex::new(0.0),
        });
        watchers.push((one.clone(), changes));
        ones.push(one);
        clients.push(client);
    }
    let liar = a.ignore_lease_end;
    for (one, changes) in watchers {
        tokio::spawn(watch(one, changes, liar));
    }
    tokio::spawn(beat(ones.clone(), liar));
    read_input(&ones).await;
    drop(ones);
    for c in clients {
        c.close().await;
    }
    Ok(())
}

async fn build(a: &Args, id: String) -> anyhow::Result<Client> {
    let mut b = Client::builder()
        .servers(a.server.clone())
        .client_id(id)
        .fallback(Fallback::Pessimistic)
        .rpc_timeout(Duration::from_millis(a.rpc_timeout_ms))
        .lease_stream(!a.poll);
    if let Some(ca) = &a.tls_ca {
        let tls = ClientTls::from_files(ca, a.tls_cert.as_deref(), a.tls_key.as_deref())?;
        b = b.tls(tls);
    }
    if let Some(f) = &a.token_file {
        b = b.bearer_token(BearerToken::from_file(f)?);
    }
    Ok(b.build().await?)
}

/// Reads `wants <n>` lines until the input ends.
async fn read_input(ones: &[Arc<One>]) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(l)) = lines.next_line().await {
        if let Some(w) = l.strip_prefix("wants ").and_then(|w| w.trim().parse().ok()) {
            for one in ones {
                one.resource.set_wants(Wants::Fixed(w));
            }
        }
    }
}

/// Reports every change of what client `one` uses, dated when the library
/// applied it, not when this task woke: from the library's feed of every
/// change since the resource was made (a watch would hand a late reader
/// only the latest, hiding a lowering followed by another). Changes it
/// fell too far behind to see are reported as lost (`{"t", "i", "lost":
/// n}`): the auditor fails the run, since it cannot know what the client
/// used meanwhile.
async fn watch(one: Arc<One>, mut changes: CapacityChanges, liar: bool) {
    loop {
        match changes.next().await {
            Ok(s) => {
                let at = mono() - s.since.elapsed().as_secs_f64();
                report(&one, (at, s.capacity, s.mode), s.lease_expiry, liar, None);
            }
            Err(RecvError::Lagged(n)) => {
                let line = serde_json::json!({"t": mono(), "i": one.index, "lost": n});
                println!("{line}");
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Every second, and at once on SIGCONT, what each client uses now.
async fn beat(ones: Vec<Arc<One>>, liar: bool) {
    let mut cont = signal(SignalKind::from_raw(rustix::process::Signal::CONT.as_raw())).ok();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let resumed = tokio::select! {
            _ = tick.tick() => false,
            Some(()) = async { cont.as_mut()?.recv().await } => true,
        };
        for one in &ones {
            let (cap, mode) = (one.resource.capacity(), one.resource.mode());
            report(one, (mono(), cap, mode), None, liar, Some(resumed));
        }
    }
}

/// Log lines stamped with the machine's monotonic seconds, as reports are.
struct MonoTimer;

impl tracing_subscriber::fmt::time::FormatTime for MonoTimer {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:.3}", mono())
    }
}

/// Prints what client `one` used from `t` (monotonic s) on. A heartbeat
/// (`beat`: whether on SIGCONT) is of now and carries the wall clock read
/// with it; a change is dated earlier, and a wall clock read now could be
/// from after a step of it.
fn report(
    one: &One,
    (t, cap, mode): (f64, f64, Mode),
    expiry: Option<std::time::SystemTime>,
    liar: bool,
    beat: Option<bool>,
) {
    let mut last = one.last_lease.lock().unwrap_or_else(|e| e.into_inner());
    if mode == Mode::Lease {
        *last = cap;
    }
    let used = if liar && mode != Mode::Lease {
        *last
    } else {
        cap
    };
    let ms = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64)
    };
    let wall = beat.and_then(|_| ms(std::time::SystemTime::now()));
    let line = serde_json::json!({
        "t": t,
        "i": one.index,
        "cap": used,
        "mode": mode.name(),
        "expiry_ms": expiry.and_then(ms),
        "wall_ms": wall,
        "cont": beat == Some(true),
    });
    println!("{line}");
}
