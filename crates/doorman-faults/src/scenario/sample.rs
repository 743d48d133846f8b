//! The real run's samples in the simulator's formats. Once a second every
//! node's master is read through its status API (capacity, Σ wants of
//! its requesters, Σ has handed out: what the simulator reads from its
//! masters' cores); the clients' Σ wants is what the plan set, and their
//! Σ has what they reported holding under a lease at that second (a
//! client in fallback counts 0, as in the simulator). `real.json` adds
//! the auditor's count of time over the capacity at every change and
//! every 100 ms (`audit.rs`), finer than one sample a second.
//!
//! Must not: change the tree.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use doorman_sim::plan::Plan;

use crate::audit::{self, Record, Steps};
use crate::clock::mono;
use crate::http::Http;
use crate::leases::resource_status;
use crate::world::World;

/// A node master's view: capacity, Σ wants, Σ has.
pub type View = (f64, f64, f64);

/// Every node's view at each second since `t0` (`0..=duration`).
pub async fn poll(
    nodes: Vec<Vec<SocketAddr>>,
    resource: String,
    t0: f64,
    duration: u64,
) -> Vec<Vec<View>> {
    let mut out = Vec::new();
    for k in 0..=duration {
        let wait = t0 + k as f64 - mono();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
        let asks: Vec<_> = nodes
            .iter()
            .map(|r| tokio::spawn(master_view(r.clone(), resource.clone())))
            .collect();
        let mut views = Vec::new();
        for a in asks {
            views.push(a.await.unwrap_or_default());
        }
        out.push(views);
    }
    out
}

/// The view of whichever replica says it is the master (zeros if none).
async fn master_view(replicas: Vec<SocketAddr>, resource: String) -> View {
    for http in replicas {
        let Some(body) = Http::default().get(http, "/api/v1/status?leases=0").await else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) else {
            continue;
        };
        if v["is_master"] != serde_json::Value::Bool(true) {
            continue;
        }
        let Some(r) = resource_status(&v, &resource) else {
            return View::default();
        };
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        return (f("capacity"), f("wants"), f("has"));
    }
    View::default()
}

/// What each client held under a lease and wanted, as steps on the
/// monotonic clock.
fn clients(w: &World, plan: &Plan, t0: f64) -> (Vec<Steps>, Vec<Steps>) {
    let n = w.clients.len();
    let (mut has, mut wants) = (vec![Steps::default(); n], vec![Steps::default(); n]);
    for &(t, c, x) in &plan.demand {
        if let Some(s) = wants.get_mut(c) {
            s.set(t0 + t, x);
        }
    }
    for r in reports(w) {
        if let Some(s) = has.get_mut(r.client) {
            s.set(r.t, if r.leased { r.cap } else { 0.0 });
        }
    }
    (has, wants)
}

/// One report a client printed: when (monotonic clock), its capacity and
/// whether it held it under a lease (else it was in fallback).
struct Report {
    client: usize,
    t: f64,
    cap: f64,
    leased: bool,
}

/// Every client's reports, client by client, in the order printed.
fn reports(w: &World) -> Vec<Report> {
    let mut out = Vec::new();
    for (client, c) in w.clients.iter().enumerate() {
        for (_, line) in w.sink.lines(c.proc.index) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let (Some(t), Some(cap)) = (v["t"].as_f64(), v["cap"].as_f64()) else {
                continue;
            };
            let leased = v["mode"] == "lease";
            out.push(Report {
                client,
                t,
                cap,
                leased,
            });
        }
    }
    out
}

/// `clients.csv`: every client report, seconds since `t0` (for tracing
/// a dip to the client that made it; the simulator has no such file).
fn reports_csv(w: &World, t0: f64) -> String {
    let mut csv = String::from("t,client,capacity,leased\n");
    for r in reports(w) {
        let name = &w.clients[r.client].spec.name;
        let _ = writeln!(csv, "{:.3},{name},{:.3},{}", r.t - t0, r.cap, r.leased);
    }
    csv
}

/// How `replay.rs` marks a step it could not apply (`real.json` lists
/// them as `unapplied`, with any changes a client missed; `doorman-sim
/// compare` fails on each).
pub const NOT_APPLIED: &str = "not applied: ";

/// Writes `timeseries.csv`, `nodes.csv`, `clients.csv`, `events.csv` and
/// `real.json`.
pub fn write(
    dir: &Path,
    plan: &Plan,
    w: &World,
    (t0, views): (f64, &[Vec<View>]),
    done: &[(f64, String)],
) -> anyhow::Result<()> {
    let (has, wants) = clients(w, plan, t0);
    let depth = plan.nodes.iter().map(|n| n.depth).max().unwrap_or(0);
    let mut ts = String::from("t");
    for d in 0..=depth {
        let _ = write!(ts, ",level{d}_capacity,level{d}_wants,level{d}_has");
    }
    ts.push_str(",clients_wants,clients_has\n");
    let mut nodes = String::from("t,node,capacity,wants,has\n");
    for (k, row) in views.iter().enumerate() {
        let mut levels = vec![(0.0, 0.0, 0.0); depth + 1];
        for (n, &(c, wa, h)) in plan.nodes.iter().zip(row) {
            let l = &mut levels[n.depth];
            (l.0, l.1, l.2) = (l.0 + c, l.1 + wa, l.2 + h);
            let _ = writeln!(nodes, "{k},{},{c:.3},{wa:.3},{h:.3}", n.name);
        }
        let _ = write!(ts, "{k}");
        for (c, wa, h) in levels {
            let _ = write!(ts, ",{c:.3},{wa:.3},{h:.3}");
        }
        let at = t0 + k as f64;
        let sum = |v: &[Steps]| v.iter().map(|s| s.at(at)).sum::<f64>();
        let _ = writeln!(ts, ",{:.3},{:.3}", sum(&wants), sum(&has));
    }
    std::fs::write(dir.join("timeseries.csv"), ts)?;
    std::fs::write(dir.join("nodes.csv"), nodes)?;
    std::fs::write(dir.join("clients.csv"), reports_csv(w, t0))?;
    let mut ev = String::from("t,event\n");
    for (t, what) in done {
        let _ = writeln!(ev, "{t:.3},\"{}\"", what.replace('"', "\"\""));
    }
    std::fs::write(dir.join("events.csv"), ev)?;
    let (over_s, over_by) = over(plan, (has, wants), t0);
    let mut unapplied: Vec<String> = done
        .iter()
        .filter(|d| d.1.contains(NOT_APPLIED))
        .map(|d| d.1.clone())
        .collect();
    unapplied.extend(unseen(w, t0));
    let real = serde_json::json!({
        "t0_unix_s": crate::clock::wall() - (mono() - t0),
        "t0_mono_s": t0,
        "over_capacity_s": over_s,
        "over_capacity_by": over_by,
        "audited": "every change and every 100 ms, from each client's reports",
        "unapplied": unapplied,
    });
    std::fs::write(
        dir.join("real.json"),
        serde_json::to_string_pretty(&real)? + "\n",
    )?;
    Ok(())
}

/// Changes a client fell too far behind to report (`record::lost`): what
/// it held then is unknown, so each is listed with the marks not applied
/// and fails the comparison.
fn unseen(w: &World, t0: f64) -> Vec<String> {
    let mut out = Vec::new();
    for c in &w.clients {
        for (i, t, n) in crate::record::lost(&w.sink.lines(c.proc.index)) {
            out.push(format!(
                "not seen: {} (client {i}) missed {n} changes at {:.1} s",
                c.spec.name,
                t - t0
            ));
        }
    }
    out
}

/// The auditor's seconds over the capacity and the worst excess.
fn over(plan: &Plan, (used, wants): (Vec<Steps>, Vec<Steps>), t0: f64) -> (f64, f64) {
    let mut capacity = Steps::default();
    capacity.set(t0 - 1.0, plan.capacity);
    let rec = Record {
        believed: vec![None; used.len()],
        used,
        wants,
        capacity,
        lease: 0.0,
    };
    audit::over(&rec.sweep(t0, t0 + plan.duration as f64))
}
