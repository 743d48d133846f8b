//! What a run did and whether it passed: the clients' reports read into
//! the auditor's record, one line per slot (over-grant, lowest share,
//! recovery), the checks of the targets, and the files: the
//! servers' logs (already in the output directory), `report.json` and
//! `timeseries.csv` (Σ in use, the bound and the goal, every 100 ms).
//!
//! Checks, each failing the run: no second over the capacity; no paused
//! master claiming mastership on resuming while a successor held it;
//! after a killed or paused master alone, back within 5 % of the goal
//! within one refresh interval plus the election TTL; no new master
//! learning longer than a lease plus the horizon's lead and margin; every
//! server stopping within 2 s of SIGTERM.
//!
//! Must not: run anything.

use std::path::Path;

use serde::Serialize;

use crate::audit::{self, FaultReport, Record, Steps};
use crate::schedule::Fault;
use crate::tree::{Kind, World, LEGACY_CAPACITY};

/// One slot as run.
#[derive(Debug, Clone)]
pub struct SlotRun {
    /// Its faults' names.
    pub names: Vec<String>,
    /// Its faults.
    pub faults: Vec<Fault>,
    /// When it started (monotonic s).
    pub at: f64,
    /// How long its faults lasted.
    pub duration: f64,
    /// When it ended.
    pub until: f64,
    /// What mending found (stale mastership claims, faults not applied).
    pub notes: Vec<String>,
}

/// What the run did, besides what the clients reported.
#[derive(Debug, Clone)]
pub struct Happened {
    /// When it started.
    pub start: f64,
    /// The capacity in force.
    pub capacity: Steps,
    /// The slots.
    pub slots: Vec<SlotRun>,
    /// Every client's lease by its leaf's word.
    pub readings: Vec<crate::leases::Reading>,
    /// Each root replica's lost config watches at the end.
    pub watch_restarts: Vec<(String, f64)>,
}

impl Happened {
    /// The capacity in force from `start`.
    pub fn new(w: &World, start: f64) -> Self {
        let mut capacity = Steps::default();
        capacity.set(start - 60.0, w.layout.terms.capacity);
        Happened {
            start,
            capacity,
            slots: Vec::new(),
            readings: Vec::new(),
            watch_restarts: Vec::new(),
        }
    }

    /// A config fault was applied (or mended) at `t`.
    pub fn config_changed(&mut self, w: &World, f: &Fault, t: f64, mended: bool) {
        if let Some(c) = crate::faults::capacity_after(w, f, mended) {
            self.capacity.set(t, c);
        }
    }
}

/// The auditor's record of one resource (our clients', or the original
/// Go clients' with its fixed capacity) from what its clients printed.
fn record(w: &World, h: &Happened, legacy: bool) -> Record {
    let n = w.clients.len();
    let capacity = if legacy {
        let mut c = Steps::default();
        c.set(h.start - 60.0, LEGACY_CAPACITY);
        c
    } else {
        h.capacity.clone()
    };
    let mut rec = Record {
        used: vec![Steps::default(); n],
        believed: vec![None; n],
        wants: vec![Steps::default(); n],
        capacity,
        lease: w.layout.terms.lease as f64,
    };
    let mine = |c: &crate::tree::Client| (c.spec.kind == Kind::Go) == legacy;
    for (s, c) in rec.wants.iter_mut().zip(&w.clients) {
        if mine(c) {
            s.set(h.start - 60.0, w.layout.terms.wants);
        }
    }
    let lines = w.sink.lock().map(|v| v.clone()).unwrap_or_default();
    for (i, seen, line) in lines {
        let Some(c) = w.clients.get(i).filter(|c| mine(c)) else {
            continue;
        };
        let point = match c.spec.kind {
            Kind::Go => line
                .strip_prefix("capacity ")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|cap| (seen, cap)),
            _ => serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| Some((v.get("t")?.as_f64()?, v.get("cap")?.as_f64()?))),
        };
        if let Some((t, cap)) = point {
            rec.used[i].set(t, cap);
        }
    }
    rec
}

/// Counts each Go client for no more than the lease its leaf counts for
/// it; returns the seconds and the most any of them used beyond.
fn within_leases(w: &World, h: &Happened, rec: &mut Record) -> (f64, f64) {
    let (mut secs, mut most) = (0.0, 0.0f64);
    for (i, c) in w.clients.iter().enumerate() {
        if c.spec.kind != Kind::Go {
            continue;
        }
        let Some(leased) = crate::leases::leased(&h.readings, &c.spec.name) else {
            continue;
        };
        let believed = std::mem::take(&mut rec.used[i]);
        rec.believed[i] = Some(believed.clone());
        let mut times: Vec<f64> = believed
            .points()
            .iter()
            .chain(leased.points())
            .map(|p| p.0)
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        for (k, &t) in times.iter().enumerate() {
            let (b, l) = (believed.at(t), leased.at(t));
            rec.used[i].set(t, b.min(l));
            if b > l + 1e-9 {
                secs += times.get(k + 1).map_or(0.0, |n| n - t);
                most = most.max(b - l);
            }
        }
    }
    (secs, most)
}

#[derive(Debug, Serialize)]
struct Report {
    seed_faults: Vec<FaultReport>,
    over_s: f64,
    failures: Vec<String>,
    learning_s: Vec<(String, f64)>,
}

/// Prints the report, writes its files, and says whether every check
/// passed.
pub fn report(w: &World, h: Happened, slow: &[String], out: &Path) -> anyhow::Result<bool> {
    let rec = record(w, &h, false);
    let mut legacy = record(w, &h, true);
    let (overrun_s, overrun_by) = within_leases(w, &h, &mut legacy);
    let t = w.layout.terms;
    let end = h.slots.last().map_or(h.start, |s| s.until);
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for s in &h.slots {
        let mut f = audit::fault(&rec, &s.names.join(" + "), (s.at, s.duration, s.until));
        f.start -= h.start;
        let alone_master = s.faults.len() == 1
            && matches!(s.faults[0], Fault::KillMaster(_) | Fault::PauseMaster(_));
        let limit = (t.refresh + t.ttl as i64) as f64;
        if alone_master && f.recovery_s.is_none_or(|r| r > limit) {
            failures.push(format!(
                "{}: recovery {:?} s, more than {limit} s",
                f.fault, f.recovery_s
            ));
        }
        failures.extend(
            s.notes
                .iter()
                .filter(|n| n.contains("said it was master"))
                .cloned(),
        );
        rows.push(f);
    }
    let whole = rec.sweep(h.start + 5.0, end);
    let (over_s, over_by) = audit::over(&whole);
    if over_s > 0.0 {
        failures.push(format!(
            "{over_s:.3} s over the capacity (by up to {over_by:.2})"
        ));
    }
    let (legacy_over, legacy_by) = audit::over(&legacy.sweep(h.start + 5.0, end));
    if legacy_over > 0.0 {
        let why = "within the original clients' leases";
        failures.push(format!(
            "{legacy_over:.3} s over {LEGACY_CAPACITY} {why} (by up to {legacy_by:.2})"
        ));
    }
    let learning = learning(w);
    let most = (t.lease + 10 + 3) as f64;
    for (who, s) in &learning {
        if *s > most {
            failures.push(format!(
                "{who} learned for up to {s:.1} s (more than {most} s)"
            ));
        }
    }
    failures.extend(
        slow.iter()
            .map(|s| format!("{s} did not exit within 2 s of SIGTERM")),
    );
    // Without etcd faults nothing may drop a config watch (etcd closes a
    // connection that pings too often).
    let etcd_faults = h
        .slots
        .iter()
        .flat_map(|s| &s.faults)
        .any(|f| matches!(f, Fault::EtcdDown | Fault::EtcdCut(_)));
    for (who, n) in &h.watch_restarts {
        println!("{who}: config watch restarts {n}");
        if !etcd_faults && *n != 0.0 {
            failures.push(format!(
                "{who} lost its config watch {n} times without an etcd fault"
            ));
        }
    }
    print(&rows, &h, over_s, &failures, w);
    for line in crate::explain::lines(w, &rec, &h.readings, &whole, h.start) {
        println!("why: {line}");
    }
    if overrun_s > 0.0 {
        println!(
            "the original Go clients used capacity past their leases for {overrun_s:.1} s (by up to {overrun_by:.1}); not counted above (their limitation: docs/operations.md, \"Faults we test\")"
        );
    }
    write_series(&whole, h.start, &out.join("timeseries.csv"))?;
    write_events(w, (&rec, &legacy), h.start, &out.join("events.csv"))?;
    write_readings(&h.readings, h.start, &out.join("leased.csv"))?;
    let report = Report {
        seed_faults: rows,
        over_s,
        failures: failures.clone(),
        learning_s: learning,
    };
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(failures.is_empty())
}

/// Every "became master" a server logged with how long it could learn.
fn learning(w: &World) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for s in &w.servers {
        for line in s.proc.log_text().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(x) = v
                .pointer("/fields/learning_at_most_s")
                .and_then(|x| x.as_f64())
            {
                out.push((s.proc.spec.name.clone(), x));
            }
        }
    }
    out
}

fn print(rows: &[FaultReport], h: &Happened, over_s: f64, failures: &[String], w: &World) {
    println!(
        "{:>5}  {:<58} {:>7} {:>7} {:>9}",
        "at s", "fault", "over s", "lowest", "recovery"
    );
    for r in rows {
        let rec = r.recovery_s.map_or("never".into(), |x| format!("{x:.1} s"));
        println!(
            "{:>5.0}  {:<58} {:>7.3} {:>6.1}% {:>9}",
            r.start,
            r.fault,
            r.over_s,
            100.0 * r.lowest_share,
            rec
        );
    }
    for s in &h.slots {
        for n in &s.notes {
            println!("note: {n}");
        }
    }
    let kinds: Vec<String> = w.clients.iter().map(|c| c.spec.name.clone()).collect();
    println!("clients: {}", kinds.join(", "));
    println!("over the capacity in the whole run: {over_s:.3} s");
    match failures {
        [] => println!("PASS"),
        f => {
            for x in f {
                println!("FAIL: {x}");
            }
        }
    }
}

fn write_series(points: &[audit::Point], start: f64, path: &Path) -> anyhow::Result<()> {
    let mut text = String::from("t,used,bound,goal\n");
    for p in points {
        text += &format!(
            "{:.3},{:.3},{:.3},{:.3}\n",
            p.t - start,
            p.used,
            p.bound,
            p.goal
        );
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// Every lease read from a leaf's status: `t,client,has,left_s`.
fn write_readings(
    readings: &[crate::leases::Reading],
    start: f64,
    path: &Path,
) -> anyhow::Result<()> {
    let mut text = String::from("t,client,has,left_s\n");
    for (t, client, has, left) in readings {
        text += &format!("{:.3},{client},{has:.3},{left:.3}\n", t - start);
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// Every change each client reported: `client,t,used`.
fn write_events(
    w: &World,
    (rec, legacy): (&Record, &Record),
    start: f64,
    path: &Path,
) -> anyhow::Result<()> {
    let mut text = String::from("client,t,used\n");
    for (i, c) in w.clients.iter().enumerate() {
        let steps = if c.spec.kind == Kind::Go {
            &legacy.used[i]
        } else {
            &rec.used[i]
        };
        for (t, v) in steps.points() {
            text += &format!("{},{:.3},{v:.3}\n", c.spec.name, t - start);
        }
    }
    for (c, steps) in w.clients.iter().zip(&legacy.believed) {
        for (t, v) in steps.iter().flat_map(|s| s.points()) {
            text += &format!("{} (believed),{:.3},{v:.3}\n", c.spec.name, t - start);
        }
    }
    std::fs::write(path, text)?;
    Ok(())
}
