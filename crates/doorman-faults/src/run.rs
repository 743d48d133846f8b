//! `doorman-faults run`: start the tree, let it settle, run the schedule
//! slot by slot (apply and show, wait, mend and show, let it settle),
//! stop everything by its pid, then hand what happened to the report.
//! `doorman-faults selftest`: the same with one client that ignores its
//! lease's end, cut off from its leaf; it passes only if the audit sees
//! that client take the tree over the capacity (the auditor can see an
//! over-grant).
//!
//! Must not: judge (`report.rs`, `checks.rs` and `audit.rs` do).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;

use crate::clock::mono;
use crate::faults;
use crate::happened::{Happened, SlotRun};
use crate::leases::{self, Polled};
use crate::report;
use crate::schedule::{self, Slot};
use crate::tree::{Layout, Programs, Terms, LEGACY_RESOURCE, RESOURCE};
use crate::world::World;

/// `run`'s options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Seed of the schedule (which order, which targets, which offsets).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run random faults for this many seconds instead of the short
    /// schedule (every kind alone and in pairs, about twenty minutes).
    #[arg(long)]
    pub duration: Option<f64>,
    /// No faults at all (for `--duration`: a quiet run, e.g. to count
    /// config-watch reconnects).
    #[arg(long)]
    pub quiet: bool,
    /// Mutual TLS and tokens on every link, etcd over TLS with users
    /// (the production set-up of docs/security.md).
    #[arg(long)]
    pub secure: bool,
    /// The servers' programs.
    #[command(flatten)]
    pub servers: ServerPrograms,
    /// A Python with the doorman_client package: adds Python clients.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The original Doorman's `goclient`: adds Go clients on a leaf of
    /// their own.
    #[arg(long)]
    pub goclient: Option<PathBuf>,
    /// Where logs, the report and the time series go (default: a new
    /// directory under the system's temporary directory, kept).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run these slots instead of a schedule (repeatable): faults joined
    /// by `+`, e.g. `pause:root+capacity-down` (see `slot_spec::parse_slot`).
    #[arg(long)]
    pub slot: Vec<String>,
    /// Seconds the tree runs before the first fault.
    #[arg(long, default_value_t = 20.0)]
    pub warmup: f64,
    /// Self-test only: this client ignores its lease's end.
    #[arg(long, hide = true)]
    pub liar: Option<String>,
}

/// The programs every tree runs (options of `run` and `scenario`).
#[derive(Debug, Clone, ClapArgs)]
pub struct ServerPrograms {
    /// The `doorman` binary (default: beside this one).
    #[arg(long)]
    pub doorman: Option<PathBuf>,
    /// etcd (default: `ETCD_BIN`, else `etcd` on the PATH).
    #[arg(long)]
    pub etcd: Option<PathBuf>,
}

/// Where the programs are: the servers' (`doorman` by default beside this
/// binary, etcd from `ETCD_BIN` or the PATH), and the optional Python and
/// Go clients.
pub fn programs(
    servers: &ServerPrograms,
    python: Option<PathBuf>,
    goclient: Option<PathBuf>,
) -> anyhow::Result<Programs> {
    let harness = std::env::current_exe().context("where is this binary")?;
    let beside = |name: &str| harness.with_file_name(name);
    let etcd = servers
        .etcd
        .clone()
        .or_else(|| std::env::var_os("ETCD_BIN").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("etcd"));
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Ok(Programs {
        doorman: servers.doorman.clone().unwrap_or_else(|| beside("doorman")),
        harness,
        etcd,
        python,
        pyclient: repo.join("clients/pyclient.py"),
        goclient,
    })
}

/// Runs the tree and the schedule; `Ok(false)` when the audit failed.
pub async fn run(a: Args) -> anyhow::Result<bool> {
    Ok(run_and_report(a).await?.failures.is_empty())
}

/// The self-test: a run whose only slot cuts a client that ignores its
/// lease's end; passes when the audit fails on Σ over the capacity, and
/// on nothing else, and names that client.
pub async fn selftest(mut a: Args) -> anyhow::Result<bool> {
    let liar = "rust-a0";
    a.slot = vec![format!("cut-client:{liar}")];
    a.liar = Some(liar.into());
    a.secure = false;
    let r = run_and_report(a).await?;
    let over = r.failures.iter().all(|f| f.contains("over the capacity"));
    let named = r
        .why
        .iter()
        .any(|l| l.starts_with(&format!("{liar} used up to")));
    println!(
        "self-test: {}",
        if !r.failures.is_empty() && over && named {
            "the auditor saw the over-grant of the client that ignores its lease's end"
        } else {
            "FAILED: the auditor did not see (only) the over-grant it must see"
        }
    );
    Ok(!r.failures.is_empty() && over && named)
}

/// The slots to run: those named on the command line, a quiet run, the
/// long schedule for a duration, or the short one.
fn slots_of(a: &Args, layout: &Layout) -> anyhow::Result<Vec<Slot>> {
    Ok(match (a.quiet, a.duration) {
        _ if !a.slot.is_empty() => a
            .slot
            .iter()
            .map(|s| crate::slot_spec::parse_slot(s, layout))
            .collect::<anyhow::Result<Vec<_>>>()?,
        (true, d) => vec![quiet(d.unwrap_or(60.0))],
        (false, Some(d)) => schedule::long(layout, a.seed, d),
        (false, None) => schedule::short(layout, a.seed),
    })
}

/// The run's folder: `--out`, or a new one under the temporary directory.
fn out_dir(a: &Args) -> anyhow::Result<PathBuf> {
    let out = match &a.out {
        Some(d) => d.clone(),
        None => tempfile::Builder::new()
            .prefix("doorman-faults-")
            .tempdir()?
            .keep(),
    };
    std::fs::create_dir_all(&out)?;
    Ok(out)
}

async fn run_and_report(a: Args) -> anyhow::Result<report::Outcome> {
    let programs = programs(&a.servers, a.python.clone(), a.goclient.clone())?;
    let mut layout = Layout::default_tree(&programs, Terms::default(), a.seed);
    layout.secure = a.secure;
    layout.liar = a.liar.clone();
    let slots = slots_of(&a, &layout)?;
    let out = out_dir(&a)?;
    let planned: f64 = slots.iter().map(|s| s.length).sum();
    eprintln!(
        "doorman-faults: seed {}, {} slots ({planned:.0} s){}, logs in {}",
        a.seed,
        slots.len(),
        if a.secure { ", secure tree" } else { "" },
        out.display()
    );
    let start = mono();
    let wall_base = wall_now() - start;
    let mut world = World::start(layout, programs, &out, (std::process::id(), a.seed))?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let readings = leases::Readings::default();
    let walls = leases::Walls::default();
    let poller = tokio::spawn(leases::poll(
        world.http(),
        polled(&world),
        vec![RESOURCE.into(), LEGACY_RESOURCE.into()],
        (readings.clone(), walls.clone()),
        stopped,
    ));
    let mut h = Happened::new(&world, start, wall_base);
    // SIGTERM or SIGINT stops the schedule; the tree is still stopped and
    // its namespaces removed below, and the run fails.
    let driven = tokio::select! {
        r = drive(&mut world, &slots, a.warmup, &mut h) => r,
        s = terminated() => Err(anyhow::anyhow!("stopped by {s}")),
    };
    let _ = stop.send(true);
    let _ = poller.await;
    h.watch_restarts = watch_restarts(&world).await;
    h.exited.extend(exits(&mut world));
    let slow = world.stop();
    driven?;
    h.readings = readings.lock().map(|r| r.clone()).unwrap_or_default();
    h.walls = walls.lock().map(|r| r.clone()).unwrap_or_default();
    report::report(&world, h, &slow, &out)
}

/// Resolves on SIGTERM or SIGINT (never, if neither can be watched).
async fn terminated() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// The true wall clock, s (the harness's own clock is not faked).
fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// How often each root replica's config watch was lost
/// (`doorman_server_config_watch_restarts_total`), by replica.
async fn watch_restarts(w: &World) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for s in w.servers.iter().filter(|s| s.node == 0) {
        let text = w.http().get(s.http, "/metrics").await.unwrap_or_default();
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("doorman_server_config_watch_restarts_total "))
            .and_then(|v| v.trim().parse().ok());
        out.push((s.proc.spec.name.clone(), n.unwrap_or(f64::NAN)));
    }
    out
}

/// Every server's status page: a leaf's clients' leases every 250 ms, the
/// others' wall clocks every second.
fn polled(w: &World) -> Vec<Polled> {
    let leaves: Vec<usize> = w.clients.iter().map(|c| c.spec.leaf).collect();
    w.servers
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.http, leaves.contains(&s.node)))
        .collect()
}

fn quiet(seconds: f64) -> Slot {
    Slot {
        faults: Vec::new(),
        duration: 0.0,
        length: seconds,
    }
}

/// Processes that exited by themselves since the last look, with when.
fn exits(w: &mut World) -> Vec<(f64, String)> {
    let now = mono();
    w.exited().into_iter().map(|n| (now, n)).collect()
}

/// Sleeps `secs`, looking for processes that exited every half second.
async fn wait(w: &mut World, secs: f64, h: &mut Happened) {
    let until = mono() + secs;
    while mono() < until {
        let step = (until - mono()).clamp(0.0, 0.5);
        tokio::time::sleep(Duration::from_secs_f64(step)).await;
        h.exited.extend(exits(w));
    }
}

/// The warmup and every slot; what was done when.
async fn drive(w: &mut World, slots: &[Slot], warmup: f64, h: &mut Happened) -> anyhow::Result<()> {
    wait(w, warmup, h).await;
    h.first_slot = mono();
    for (k, slot) in slots.iter().enumerate() {
        let names: Vec<String> = slot
            .faults
            .iter()
            .map(|f| schedule::name(f, &w.layout))
            .collect();
        eprintln!(
            "doorman-faults: slot {} at {:.0} s: {}",
            k + 1,
            mono() - h.start,
            names.join(" + ")
        );
        let at = mono();
        let mut run = SlotRun {
            names,
            faults: slot.faults.clone(),
            at,
            duration: slot.duration,
            until: at,
            failures: Vec::new(),
            notes: Vec::new(),
        };
        let mut applied = Vec::new();
        for f in &slot.faults {
            let (a, found) = faults::apply(w, f).await?;
            h.config_changed(w, f, found.config_at.unwrap_or_else(mono), false);
            run.failures.extend(found.failures);
            run.notes.extend(found.notes);
            applied.push((f.clone(), a));
        }
        h.wants.extend(w.wants_sent());
        let left = slot.duration - (mono() - at);
        wait(w, left.max(0.0), h).await;
        for (f, a) in &applied {
            let (stale, found) = faults::heal(w, a).await?;
            h.config_changed(w, f, found.config_at.unwrap_or_else(mono), true);
            run.failures
                .extend(stale.map(|s| format!("stale mastership: {s}")));
            run.failures.extend(found.failures);
            run.notes.extend(found.notes);
        }
        h.wants.extend(w.wants_sent());
        let left = slot.length - (mono() - at);
        wait(w, left.max(0.0), h).await;
        run.until = mono();
        h.slots.push(run);
    }
    Ok(())
}
