//! What a run did and whether it passed: the clients' reports and the
//! processes' lives read into the auditor's records (our clients', the
//! original Go clients', the mass clients'), one line per slot
//! (over-grant, lowest share, recovery), the checks (`checks.rs`), and the
//! files: `report.json`, `timeseries.csv` (Σ in use, the bound and the
//! goal, every 100 ms), `events.csv`, `leased.csv`; the servers' logs are
//! already in the output directory.
//!
//! Must not: run anything.

use std::path::Path;

use serde::Serialize;

use crate::audit::{self, FaultReport, Point, Record, Steps};
use crate::happened::Happened;
use crate::tree::{Kind, LEGACY_CAPACITY, MASS_CAPACITY};
use crate::world::{Client, World};

/// What one client process's clients used.
fn used_by(w: &World, c: &Client) -> Vec<Steps> {
    let reports = crate::record::reports(&w.sink.lines(c.proc.index), c.spec.kind);
    crate::record::used(&reports, &c.proc.life)
        .into_values()
        .collect()
}

/// The auditor's record of the tree's resource (our clients', or with
/// `legacy` the original Go clients' at their fixed capacity): one entry
/// per client of the layout (empty for the other kind).
fn record(w: &World, h: &Happened, legacy: bool) -> Record {
    let capacity = if legacy {
        let mut c = Steps::default();
        c.set(h.start - 60.0, LEGACY_CAPACITY);
        c
    } else {
        h.capacity.clone()
    };
    let mine = |c: &Client| (c.spec.kind == Kind::Go) == legacy;
    let n = w.clients.len();
    let mut rec = Record {
        used: vec![Steps::default(); n],
        believed: vec![None; n],
        wants: vec![Steps::default(); n],
        capacity,
        lease: w.layout.terms.lease as f64,
    };
    for (k, c) in w.clients.iter().enumerate().filter(|(_, c)| mine(c)) {
        rec.wants[k].set(h.start - 60.0, w.layout.terms.wants);
        rec.used[k] = used_by(w, c).into_iter().next().unwrap_or_default();
    }
    for &(t, k, wants) in &h.wants {
        if w.clients.get(k).is_some_and(&mine) {
            rec.wants[k].set(t, wants);
        }
    }
    rec
}

/// The mass clients' record: each wants 1 while it runs.
fn mass_record(w: &World, h: &Happened) -> Record {
    let mut capacity = Steps::default();
    capacity.set(h.start - 60.0, MASS_CAPACITY);
    let mut rec = Record {
        capacity,
        lease: w.layout.terms.lease as f64,
        ..Record::default()
    };
    for c in &w.mass {
        for used in used_by(w, c) {
            let mut wants = Steps::default();
            for &(t, l) in &c.proc.life {
                let running = matches!(l, crate::procs::Life::Started(_));
                wants.set(t, if running { 1.0 } else { 0.0 });
            }
            rec.used.push(used);
            rec.wants.push(wants);
            rec.believed.push(None);
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

/// What the report found: every failure (none: the run passed) and the
/// lines that explain a stretch over the capacity.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Each check that failed.
    pub failures: Vec<String>,
    /// The `why:` lines.
    pub why: Vec<String>,
}

/// Prints the report, writes its files, and says what failed.
pub fn report(w: &World, h: Happened, slow: &[String], out: &Path) -> anyhow::Result<Outcome> {
    let rec = record(w, &h, false);
    let mut legacy = record(w, &h, true);
    let (overrun_s, overrun_by) = within_leases(w, &h, &mut legacy);
    let mass = mass_record(w, &h);
    let end = h.end();
    let (rows, mut failures) = crate::checks::slots(w, &h, &rec);
    let whole = rec.sweep(h.start, end);
    let over_s = over_capacities(&h, &whole, [&legacy, &mass], &mut failures);
    let learning = crate::checks::learning(w);
    failures.extend(crate::checks::processes(w, &h, slow, &learning));
    print(&rows, &h, over_s, &failures, w);
    let why = crate::explain::lines(w, &rec, &h.readings, &whole, h.start);
    for line in &why {
        println!("why: {line}");
    }
    if overrun_s > 0.0 {
        println!(
            "the original Go clients used capacity past their leases for {overrun_s:.1} s (by up to {overrun_by:.1}); not counted above (their limitation: docs/faults.md)"
        );
    }
    write_csvs(w, &h, [&rec, &legacy, &mass], &whole, out)?;
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
    Ok(Outcome { failures, why })
}

/// How long the whole tree was over its capacity (a failure if at all),
/// and a failure for each time the original clients' leases or the mass
/// clients' resource went over theirs.
fn over_capacities(
    h: &Happened,
    whole: &[Point],
    [legacy, mass]: [&Record; 2],
    failures: &mut Vec<String>,
) -> f64 {
    let (over_s, over_by) = audit::over(whole);
    if over_s > 0.0 {
        failures.push(format!(
            "{over_s:.3} s over the capacity (by up to {over_by:.2})"
        ));
    }
    let others = [
        (
            legacy,
            format!("{LEGACY_CAPACITY} within the original clients' leases"),
        ),
        (
            mass,
            format!("{MASS_CAPACITY} of the mass clients' resource"),
        ),
    ];
    for (r, what) in others {
        let (s, by) = audit::over(&r.sweep(h.start, h.end()));
        if s > 0.0 {
            failures.push(format!("{s:.3} s over {what} (by up to {by:.2})"));
        }
    }
    over_s
}

/// The run's time series, events and lease readings as CSV files in `out`.
fn write_csvs(
    w: &World,
    h: &Happened,
    [rec, legacy, mass]: [&Record; 3],
    whole: &[Point],
    out: &Path,
) -> anyhow::Result<()> {
    write_series(whole, h.start, &out.join("timeseries.csv"))?;
    if !w.mass.is_empty() {
        let series = mass.sweep(h.start, h.end());
        write_series(&series, h.start, &out.join("mass-timeseries.csv"))?;
        write_mass_events(w, mass, h.start, &out.join("mass-events.csv"))?;
    }
    write_events(w, (rec, legacy), h.start, &out.join("events.csv"))?;
    write_readings(&h.readings, h.start, &out.join("leased.csv"))
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
            println!("note: {}: {n}", s.names.join(" + "));
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

fn write_series(points: &[Point], start: f64, path: &Path) -> anyhow::Result<()> {
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

/// Every change each mass client reported: `process,client,t,used`.
fn write_mass_events(w: &World, rec: &Record, start: f64, path: &Path) -> anyhow::Result<()> {
    let mut text = String::from("process,client,t,used\n");
    let mut k = 0;
    for c in &w.mass {
        for (i, _) in used_by(w, c).iter().enumerate() {
            for (t, v) in rec.used[k].points() {
                text += &format!("{},{i},{:.3},{v:.3}\n", c.proc.index, t - start);
            }
            k += 1;
        }
    }
    std::fs::write(path, text)?;
    Ok(())
}
