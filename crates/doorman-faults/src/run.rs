//! `doorman-faults run`: start the tree, let it settle, run the schedule
//! slot by slot (apply, wait, mend, let it settle), stop everything by its
//! pid, then hand what happened to the report.
//!
//! Must not: judge (`report.rs` and `audit.rs` do).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;

use crate::clock::mono;
use crate::faults::{self, Applied};
use crate::leases;
use crate::report::{self, Happened, SlotRun};
use crate::schedule::{self, Slot};
use crate::tree::{Layout, Programs, Terms, World, LEGACY_RESOURCE, RESOURCE};

/// `run`'s options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Seed of the schedule (which order, which targets, which offsets).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run random faults for this many seconds instead of the short
    /// schedule (every kind once, about five minutes).
    #[arg(long)]
    pub duration: Option<f64>,
    /// No faults at all (for `--duration`: a quiet run, e.g. to count
    /// config-watch reconnects).
    #[arg(long)]
    pub quiet: bool,
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
    /// by `+`, e.g. `pause:root+capacity-down` (see `schedule::parse_slot`).
    #[arg(long)]
    pub slot: Vec<String>,
    /// Seconds the tree runs before the first fault.
    #[arg(long, default_value_t = 20.0)]
    pub warmup: f64,
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
    let programs = programs(&a.servers, a.python.clone(), a.goclient.clone())?;
    let layout = Layout::default_tree(&programs, Terms::default());
    let slots = match (a.quiet, a.duration) {
        _ if !a.slot.is_empty() => a
            .slot
            .iter()
            .map(|s| schedule::parse_slot(s, &layout))
            .collect::<anyhow::Result<Vec<_>>>()?,
        (true, d) => vec![quiet(d.unwrap_or(60.0))],
        (false, Some(d)) => schedule::long(&layout, a.seed, d),
        (false, None) => schedule::short(&layout, a.seed),
    };
    let out = match &a.out {
        Some(d) => d.clone(),
        None => tempfile::Builder::new()
            .prefix("doorman-faults-")
            .tempdir()?
            .keep(),
    };
    std::fs::create_dir_all(&out)?;
    eprintln!(
        "doorman-faults: seed {}, {} slots, logs in {}",
        a.seed,
        slots.len(),
        out.display()
    );
    let tag = std::process::id();
    let mut world = World::start(layout, programs, &out, tag)?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let readings = leases::Readings::default();
    let poller = tokio::spawn(leases::poll(
        leaves(&world),
        vec![RESOURCE.into(), LEGACY_RESOURCE.into()],
        readings.clone(),
        stopped,
    ));
    let happened = drive(&mut world, &slots, a.warmup).await;
    let _ = stop.send(true);
    let _ = poller.await;
    let restarts = watch_restarts(&world).await;
    let slow = world.stop();
    let mut happened = happened?;
    happened.readings = readings.lock().map(|r| r.clone()).unwrap_or_default();
    happened.watch_restarts = restarts;
    report::report(&world, happened, &slow, &out)
}

/// How often each root replica's config watch was lost
/// (`doorman_server_config_watch_restarts_total`), by replica.
async fn watch_restarts(w: &World) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for s in w.servers.iter().filter(|s| s.node == 0) {
        let text = leases::get(s.http, "/metrics").await.unwrap_or_default();
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("doorman_server_config_watch_restarts_total "))
            .and_then(|v| v.trim().parse().ok());
        out.push((s.proc.spec.name.clone(), n.unwrap_or(f64::NAN)));
    }
    out
}

/// The HTTP addresses of the replicas of the leaves clients ask.
fn leaves(w: &World) -> Vec<std::net::SocketAddr> {
    let leaves: Vec<usize> = w.clients.iter().map(|c| c.spec.leaf).collect();
    w.servers
        .iter()
        .filter(|s| leaves.contains(&s.node))
        .map(|s| s.http)
        .collect()
}

fn quiet(seconds: f64) -> Slot {
    Slot {
        faults: Vec::new(),
        duration: 0.0,
        length: seconds,
    }
}

/// The warmup and every slot; what was done when.
async fn drive(w: &mut World, slots: &[Slot], warmup: f64) -> anyhow::Result<Happened> {
    let start = mono();
    let mut h = Happened::new(w, start);
    tokio::time::sleep(Duration::from_secs_f64(warmup)).await;
    for (k, slot) in slots.iter().enumerate() {
        let names: Vec<String> = slot
            .faults
            .iter()
            .map(|f| schedule::name(f, &w.layout))
            .collect();
        eprintln!(
            "doorman-faults: slot {} at {:.0} s: {}",
            k + 1,
            mono() - start,
            names.join(" + ")
        );
        let at = mono();
        let mut applied = Vec::new();
        for f in &slot.faults {
            let a = faults::apply(w, f).await?;
            h.config_changed(w, f, mono(), false);
            applied.push((f.clone(), a));
        }
        tokio::time::sleep(Duration::from_secs_f64(slot.duration)).await;
        let mut notes = Vec::new();
        for (f, a) in &applied {
            let m = faults::heal(w, a).await?;
            h.config_changed(w, f, mono(), true);
            notes.extend(m.stale_claim);
            if let Applied::Nothing(why) = a {
                notes.push(format!(
                    "{}: not applied: {why}",
                    schedule::name(f, &w.layout)
                ));
            }
        }
        let left = slot.length - (mono() - at);
        tokio::time::sleep(Duration::from_secs_f64(left.max(0.0))).await;
        h.slots.push(SlotRun {
            names,
            faults: slot.faults.clone(),
            at,
            duration: slot.duration,
            until: mono(),
            notes,
        });
    }
    Ok(h)
}
