//! Replaying a simulator's plan on the real tree, in real time from `t0`:
//! every change of a client's wants is written to that client's input; a
//! lost master is a kill -9 of the node's master, started again (as a
//! standby) at the mark's end; an unreachable node is every replica of it
//! cut off from its parent's replicas and from its requesters until the
//! mark's end (`Fault::Unreachable`); a spike is its clients' new wants.
//!
//! Must not: read the tree's state (`sample.rs` does) or judge.

use std::collections::HashMap;
use std::time::Duration;

use doorman_sim::plan::{Plan, PlanKind};

use super::sample::NOT_APPLIED;
use crate::clock::mono;
use crate::faults::{self, Applied};
use crate::schedule::Fault;
use crate::world::World;

/// One step of the replay.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Client `0` wants `1`.
    Wants(usize, f64),
    /// Mark `0` starts.
    Start(usize),
    /// Mark `0` ends.
    End(usize),
}

/// What was done when: seconds since `t0`, and what.
pub type Done = Vec<(f64, String)>;

/// The plan's steps in time order (a mark's end before what starts at
/// the same time).
fn steps(plan: &Plan) -> Vec<(f64, Step)> {
    let mut out: Vec<(f64, Step)> = plan
        .demand
        .iter()
        .filter(|d| d.0 > 0.0)
        .map(|&(t, c, w)| (t, Step::Wants(c, w)))
        .collect();
    for (i, m) in plan.marks.iter().enumerate() {
        if matches!(m.kind, PlanKind::MasterLost | PlanKind::CutOff) {
            out.push((m.end, Step::End(i)));
            out.push((m.t, Step::Start(i)));
        }
    }
    let rank = |s: &Step| match s {
        Step::End(_) => 0,
        Step::Start(_) => 1,
        Step::Wants(..) => 2,
    };
    out.sort_by(|a, b| a.0.total_cmp(&b.0).then(rank(&a.1).cmp(&rank(&b.1))));
    out
}

/// Runs the plan's steps on `w`; returns what was done when.
pub async fn replay(w: &mut World, plan: &Plan, t0: f64) -> anyhow::Result<Done> {
    let mut done = Done::new();
    let mut applied: HashMap<usize, Applied> = HashMap::new();
    for (t, step) in steps(plan) {
        let wait = t0 + t - mono();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
        let at = mono() - t0;
        match step {
            Step::Wants(c, wants) => {
                if let Some(client) = w.clients.get_mut(c) {
                    client.proc.send(&format!("wants {wants}"))?;
                }
            }
            Step::Start(i) => {
                let (what, a) = start(w, plan, i).await?;
                done.push((at, what));
                applied.insert(i, a);
            }
            Step::End(i) => {
                if let Some(a) = applied.remove(&i) {
                    faults::heal(w, &a).await?;
                    done.push((at, format!("{}: mended", plan.marks[i].what)));
                }
            }
        }
    }
    let end = t0 + plan.duration as f64 - mono();
    if end > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(end)).await;
    }
    Ok(done)
}

/// Starts mark `i`: the fault that stands for it on real processes.
async fn start(w: &mut World, plan: &Plan, i: usize) -> anyhow::Result<(String, Applied)> {
    let m = &plan.marks[i];
    let node = m.node.as_deref().unwrap_or("");
    let n = w.layout.nodes.iter().position(|x| x.name == node);
    let Some(n) = n else {
        anyhow::bail!("plan: mark {:?} names no node of the tree", m.what);
    };
    let fault = match m.kind {
        PlanKind::MasterLost => Fault::KillMaster(n),
        _ => Fault::Unreachable(n),
    };
    let (a, found) = faults::apply(w, &fault).await?;
    let mut how = match &a {
        Applied::Killed(s) => format!("kill -9 {}", w.servers[*s].proc.spec.name),
        Applied::Links(links) => format!("{} links cut", links.len() / 2),
        Applied::Nothing(why) => format!("{NOT_APPLIED}{why}"),
        other => format!("{other:?}"),
    };
    for f in &found.failures {
        how += &format!("; {f}");
    }
    Ok((format!("{} ({how})", m.what), a))
}
