//! The checks of a run besides Σ in use (`report.rs` sums): the tree at
//! its goal when the first fault begins; per slot,
//! what applying and mending its faults found (a fault that did not
//! happen, a cut a probe passed, a config not taken), a paused master
//! claiming mastership on resuming while a successor held it, and after a
//! killed or paused master alone, being back within 5 % of the goal within
//! one refresh interval plus the election TTL; per process, a new master
//! learning longer than a lease plus the horizon's lead and margin, a
//! server not stopping within 2 s of SIGTERM, a lost config watch without
//! an etcd fault, a process that exited by itself, a client silent while
//! it ran or that missed changes of its own, and a wall clock that did not
//! read back the offset set.
//!
//! Must not: run anything.

use crate::audit::{self, FaultReport, Record};
use crate::happened::Happened;
use crate::schedule::Fault;
use crate::tree::Kind;
use crate::world::World;

/// One row per slot, and the failures the slots show.
pub fn slots(w: &World, h: &Happened, rec: &Record) -> (Vec<FaultReport>, Vec<String>) {
    let t = w.layout.terms;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    // A tree that never worked (no config, no master) would pass every
    // other check: it must be at its goal when the first fault begins.
    if let Some(p) = rec.sweep(h.first_slot - 0.1, h.first_slot).last() {
        if p.used < 0.95 * p.goal {
            failures.push(format!(
                "Σ in use was {:.1} of a goal of {:.1} when the first fault began",
                p.used, p.goal
            ));
        }
    }
    for s in &h.slots {
        let name = s.names.join(" + ");
        let mut f = audit::fault(rec, &name, (s.at, s.duration, s.until));
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
        failures.extend(s.failures.iter().map(|x| format!("{name}: {x}")));
        rows.push(f);
    }
    (rows, failures)
}

/// Every "became master" a server logged with how long it could learn.
pub fn learning(w: &World) -> Vec<(String, f64)> {
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

/// What the processes did wrong.
pub fn processes(
    w: &World,
    h: &Happened,
    slow: &[String],
    learning: &[(String, f64)],
) -> Vec<String> {
    let t = w.layout.terms;
    let mut failures = Vec::new();
    let most = (t.lease + 10 + 3) as f64;
    for (who, s) in learning {
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
    failures.extend(watches(h));
    failures.extend(
        h.exited
            .iter()
            .map(|(at, who)| format!("{who} exited by itself at {:.1} s", at - h.start)),
    );
    failures.extend(silent(w, h));
    failures.extend(clocks(w, h));
    failures
}

/// Without etcd faults nothing may drop a config watch (etcd closes a
/// connection that pings too often).
fn watches(h: &Happened) -> Vec<String> {
    let etcd_faults = h.slots.iter().flat_map(|s| &s.faults).any(|f| {
        matches!(
            f,
            Fault::EtcdDown
                | Fault::EtcdCut(_)
                | Fault::EtcdLeaderDown
                | Fault::EtcdMemberDown
                | Fault::EtcdQuorumLost
                | Fault::EtcdWiped
        )
    });
    let mut out = Vec::new();
    for (who, n) in &h.watch_restarts {
        println!("{who}: config watch restarts {n}");
        if !etcd_faults && *n != 0.0 {
            out.push(format!(
                "{who} lost its config watch {n} times without an etcd fault"
            ));
        }
    }
    out
}

/// Clients of ours (and mass clients) that ran without reporting, or
/// missed changes of their own.
fn silent(w: &World, h: &Happened) -> Vec<String> {
    let mut out = Vec::new();
    for c in w.clients.iter().chain(&w.mass) {
        if c.spec.kind == Kind::Go {
            continue;
        }
        let mine = w.sink.lines(c.proc.index);
        let reports = crate::record::reports(&mine, c.spec.kind);
        let until = c.proc.life.last().map_or(h.end(), |l| l.0.max(h.end()));
        for (i, from, secs) in crate::record::silences(&c.proc, &reports, until)
            .into_iter()
            .take(3)
        {
            out.push(format!(
                "{} (client {i}) reported nothing for {secs:.1} s from {:.1} s while it ran",
                c.spec.name,
                from - h.start
            ));
        }
        for (i, at, n) in crate::record::lost(&mine).into_iter().take(3) {
            out.push(format!(
                "{} (client {i}) fell {n} changes behind at {:.1} s: what it used is unknown",
                c.spec.name,
                at - h.start
            ));
        }
    }
    out
}

/// Processes whose wall clocks did not read back the offsets set.
fn clocks(w: &World, h: &Happened) -> Vec<String> {
    let mut out = Vec::new();
    for c in w.clients.iter().filter(|c| c.spec.kind != Kind::Go) {
        let mine = w.sink.lines(c.proc.index);
        let readings: Vec<(f64, f64)> = crate::record::reports(&mine, c.spec.kind)
            .iter()
            .filter_map(|r| Some((r.t, r.wall_ms?)))
            .collect();
        out.extend(crate::clocks::check(
            &c.proc,
            &readings,
            h.wall_base,
            (h.start, h.end()),
        ));
    }
    for (k, s) in w.servers.iter().enumerate() {
        let readings: Vec<(f64, f64)> = h
            .walls
            .iter()
            .filter(|x| x.0 == k)
            .map(|x| (x.1, x.2))
            .collect();
        out.extend(crate::clocks::check(
            &s.proc,
            &readings,
            h.wall_base,
            (h.start, h.end()),
        ));
    }
    out
}
