//! How fast capacity moves on lease streams (issue "Capacity that moves
//! in one round trip"): a root (FAIR_SHARE, capacity 1000, refresh 8 s,
//! the default 1 s minimum interval) with N holders of the client library
//! on one resource, each wanting 1 % over its share of 1500 (they open
//! with room for all, then the capacity is set to 1000). Each trial a
//! newcomer wanting all of it opens
//! the resource, and the bench times, from its open, (1) until the
//! newcomer holds its fair share (99 % of 1000 / (N + 1)) and (2) until the
//! server counts no holder at a lowered grant's old amount (every lowering
//! acknowledged); then the newcomer closes, and a config change raises
//! the capacity to 1500 (as a push through etcd or a file installs it:
//! the config replaced, every resource moved), and it times (3) until
//! every holder holds its share of 1500; then the capacity goes back to
//! 1000 for the next trial. Prints each figure's p50, p99 and max over the
//! trials. Where a trial pushes more than the server's push budget holds
//! (`PUSH_BUDGET`, 20 000, refilled at 5 000 a second: over 5 000
//! holders), each timed event starts once the budget has had the time to
//! refill what the two moves before it spent (4 s at 10 000 holders), so
//! each is measured as one event, not as the tail of a burst ("a mass
//! arrival" in BENCHMARKS.md measures bursts).
//!
//! `cargo bench -p doorman-e2e --bench push_latency -- HOLDERS TRIALS`
//! (default 100 30). Every holder is a client with its own connection and
//! lease stream. The holders run in a child process (this bench again,
//! with `holders ADDR N WANTS`), which tells the parent over a pipe when they
//! all hold at least (or at most) an amount: the server and the holders
//! then each need one file per connection, so 10 000 holders fit in a
//! 20 000-file limit.

// Times itself: the clock rule of clippy.toml is for the libraries.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use doorman_client::{Client, Mode, RateOptions, RateResource};
use doorman_core::server::Sharded;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::IsolatedServer;

const CAPACITY: f64 = 1000.0;
const RAISED: f64 = 1500.0;

/// Installs a config of `capacity` as a config push does.
fn set_capacity(s: &IsolatedServer, capacity: f64) {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", capacity).lease(60).refresh(8))
        .parse();
    drop(s.state.core().replace_config(cfg));
    s.state.moved.note_all();
}

fn held(r: &RateResource) -> f64 {
    if r.mode() == Mode::Lease {
        r.capacity()
    } else {
        0.0
    }
}

/// Holders the server counts above their grant (a lowering not yet
/// acknowledged).
fn lowered(s: &IsolatedServer) -> usize {
    let st = s
        .state
        .core()
        .status(doorman_server::lease_clock(), usize::MAX);
    let leases = st.resources.iter().flat_map(|r| &r.leases);
    leases.filter(|l| l.lowered_from.is_some()).count()
}

/// Waits (checking every `step`) until `done`, at most `limit`; how long.
async fn until_within(limit: Duration, step: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "no end in {limit:?}");
        tokio::time::sleep(step).await;
    }
    start.elapsed()
}

/// Waits (checking every `step`) until `done`, at most 10 s after `start`
/// (`stuck` says what was seen instead); how long since `start`.
async fn until_from(
    start: Instant,
    step: Duration,
    mut done: impl FnMut() -> bool,
    stuck: impl Fn() -> String,
) -> Duration {
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "{}", stuck());
        tokio::time::sleep(step).await;
    }
    start.elapsed()
}

/// [`until_within`] 10 s.
async fn until(step: Duration, done: impl FnMut() -> bool) -> Duration {
    until_within(Duration::from_secs(10), step, done).await
}

async fn client(addr: &str, id: String) -> Client {
    Client::builder()
        .servers([addr])
        .client_id(id)
        .build()
        .await
        .expect("client builds")
}

fn percentiles(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name:<44} p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(at(1.0))
    );
}

/// The child: `n` holders of "r" at `addr`, each wanting `wants`; for
/// each line `atleast X` (`atmost X`) on stdin, waits until every one holds
/// at least (at most) X, and answers `ok` on stdout.
async fn holders_child(addr: &str, n: usize, wants: f64) {
    let mut clients = Vec::with_capacity(n);
    let mut holders = Vec::with_capacity(n);
    for i in 0..n {
        let c = client(addr, format!("holder-{i}")).await;
        holders.push(c.rate_resource("r", RateOptions::wants(wants)).unwrap());
        clients.push(c);
    }
    let step = Duration::from_micros(if n > 1000 { 5_000 } else { 500 });
    let limit = Duration::from_secs(600);
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    while let Ok(Some(line)) = lines.next_line().await {
        let mut words = line.split_whitespace();
        let (what, x) = (
            words.next(),
            words.next().and_then(|x| x.parse::<f64>().ok()),
        );
        let Some(x) = x else { break };
        match what {
            Some("atleast") => {
                until_within(limit, step, || holders.iter().all(|h| held(h) >= x)).await
            }
            _ => until_within(limit, step, || holders.iter().all(|h| held(h) <= x)).await,
        };
        println!("ok");
    }
    for c in clients {
        c.close().await;
    }
}

/// The parent's end of the holders' process.
struct Holders {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Holders {
    fn start(addr: &str, n: usize, wants: f64) -> Holders {
        let exe = std::env::current_exe().expect("own path");
        let mut child = Command::new(exe)
            .args(["holders", addr, &n.to_string(), &wants.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("holders' process starts");
        let to = child.stdin.take().expect("piped");
        let from = BufReader::new(child.stdout.take().expect("piped"));
        Holders { child, to, from }
    }

    /// Blocks until every holder holds at least (`at_least`) or at most
    /// `x`; how long from `start`.
    fn wait(&mut self, at_least: bool, x: f64, start: Instant) -> Duration {
        let what = if at_least { "atleast" } else { "atmost" };
        writeln!(self.to, "{what} {x}").expect("holders' process listens");
        let mut line = String::new();
        self.from
            .read_line(&mut line)
            .expect("holders' process answers");
        assert_eq!(line.trim(), "ok", "the holders' process ended");
        start.elapsed()
    }
}

impl Drop for Holders {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::main]
async fn main() {
    if let Ok(f) = std::env::var("RUST_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(f)
            .with_writer(std::io::stderr)
            .init();
    }
    let argv: Vec<String> = std::env::args().collect();
    if let Some(i) = argv.iter().position(|a| a == "holders") {
        let n = argv[i + 2].parse().expect("holders ADDR N WANTS");
        let wants = argv[i + 3].parse().expect("holders ADDR N WANTS");
        return holders_child(&argv[i + 1], n, wants).await;
    }
    let args: Vec<usize> = argv.iter().filter_map(|a| a.parse().ok()).collect();
    let (n, trials) = (
        args.first().copied().unwrap_or(100),
        args.get(1).copied().unwrap_or(30),
    );
    // The holders want a little over their share of the raised capacity,
    // and open with room for all of them: opening at CAPACITY, each
    // arrival would lower every holder before it (n² / 2 pushes).
    let wants = RAISED / n as f64 * 1.01;
    let cfg = TestConfig::new()
        .resource(
            Resource::fair("*", wants * n as f64 * 1.1)
                .lease(60)
                .refresh(8),
        )
        .parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    // One connection per holder, and the newcomer's.
    o.grpc_max_connections = o.grpc_max_connections.max(n + 16);
    let s = IsolatedServer::start(o).expect("server starts");
    let opened = Instant::now();
    let mut holders = tokio::task::block_in_place(|| Holders::start(&s.addr(), n, wants));
    let took = tokio::task::block_in_place(|| holders.wait(true, wants * 0.99, opened));
    println!("{n} holders hold what they want {took:?} after the process started");
    let start = Instant::now();
    set_capacity(&s, CAPACITY);
    let share_n = CAPACITY / n as f64;
    tokio::task::block_in_place(|| holders.wait(false, share_n + 1e-6, start));
    until_within(Duration::from_secs(600), Duration::from_millis(5), || {
        lowered(&s) == 0
    })
    .await;
    println!(
        "... and their shares of {CAPACITY} {:?} after it was set",
        start.elapsed()
    );
    run_trials(&s, &mut holders, (n, trials)).await;
}

async fn run_trials(s: &IsolatedServer, holders: &mut Holders, (n, trials): (usize, usize)) {
    let step = Duration::from_micros(500);
    // A trial's moves push to every holder about four times: where that
    // is more than the budget holds, each timed event waits for it to
    // refill what the two moves before it spent.
    let budget = doorman_core::server::PUSH_BUDGET;
    let spends = 4.0 * n as f64;
    let refill = if spends > budget.burst {
        Duration::from_secs_f64((2.0 * n as f64).min(budget.burst) / budget.per_second)
    } else {
        Duration::ZERO
    };
    let (mut share, mut acked, mut raised) = (vec![], vec![], vec![]);
    let mut first = vec![];
    for t in 0..trials {
        tokio::time::sleep(refill).await;
        let c = client(&s.addr(), format!("newcomer-{t}")).await;
        let start = Instant::now();
        let r = c.rate_resource("r", RateOptions::wants(CAPACITY)).unwrap();
        let share_n1 = CAPACITY / (n + 1) as f64 * 0.99;
        let stuck = |what: &str| {
            let st = s
                .state
                .core()
                .status(doorman_server::lease_clock(), usize::MAX);
            let mine = st
                .resources
                .iter()
                .flat_map(|r| &r.leases)
                .find(|l| l.id.starts_with("newcomer"));
            let streams = s
                .state
                .metrics_text()
                .lines()
                .filter(|l| {
                    l.starts_with("doorman_server_lease_streams")
                        || l.starts_with("doorman_server_stream_requests")
                        || l.starts_with("doorman_server_pushed")
                })
                .collect::<Vec<_>>()
                .join("; ");
            format!("{what}: newcomer holds {} ({:?}), lease {:?}, connection {:?}; the server: {mine:?}; {streams}", r.capacity(), r.mode(), c.lease("r"), c.connection())
        };
        let leased = || r.mode() == Mode::Lease;
        first.push(until_from(start, step, leased, || stuck("no lease in 10 s")).await);
        let served = || held(&r) >= share_n1;
        share.push(until_from(start, step, served, || stuck("no share in 10 s")).await);
        until(step, || lowered(s) == 0).await;
        acked.push(start.elapsed());
        drop(r);
        c.close().await;
        until(step, || lowered(s) == 0).await;
        tokio::time::sleep(refill).await;
        let start = Instant::now();
        set_capacity(s, RAISED);
        let raised_n = RAISED / n as f64 * 0.99;
        raised.push(tokio::task::block_in_place(|| {
            holders.wait(true, raised_n, start)
        }));
        set_capacity(s, CAPACITY);
        let back = CAPACITY / n as f64 + 1e-6;
        tokio::task::block_in_place(|| holders.wait(false, back, Instant::now()));
        until(step, || lowered(s) == 0).await;
    }
    println!("{n} holders, {trials} trials (loopback; machine in BENCHMARKS.md)");
    percentiles("newcomer's first answer (connect, Discovery, open)", first);
    percentiles("newcomer holds its fair share", share);
    percentiles("every lowering acknowledged", acked);
    percentiles("capacity raised: every holder holds its share", raised);
}
