//! Config faults: a capacity lowered, a template removed, the algorithm
//! changed (each pushed with `doorman config push`, and back), and a config
//! that fails validation written to etcd around the push's own check. A
//! push counts once the root master runs it (`doorman_server_config_info`
//! names its SHA-256), which is also when the auditor's capacity changes;
//! an invalid config must be rejected (`doorman_server_config_reloads_total
//! {result="error"}` rises) with the running one kept.
//!
//! Must not: judge what the tree did with the capacity.

use std::time::Duration;

use super::{master, Applied, Found};
use crate::clock::mono;
use crate::schedule::Fault;
use crate::tree::{CONFIG_KEY, FALLBACK_SHARE, RESOURCE};
use crate::world::World;

/// Applies a config fault.
pub async fn apply(w: &mut World, f: &Fault, found: &mut Found) -> anyhow::Result<Applied> {
    let t = w.layout.terms;
    let text = match f {
        Fault::CapacityDown => w
            .layout
            .config(FALLBACK_SHARE * t.capacity, "FAIR_SHARE", true),
        Fault::RemoveTemplate => w.layout.config(t.capacity, "FAIR_SHARE", false),
        Fault::ChangeAlgorithm => w.layout.config(t.capacity, "PROPORTIONAL_SHARE", true),
        _ => return invalid(w, found).await,
    };
    let sha = w.push_config(&text)?;
    found.config_at = taken(w, &sha, found).await;
    Ok(Applied::Config)
}

/// Pushes the tree's own config again; it must be taken. It raises the
/// capacity (or keeps it), so it counts from the push: the root may run
/// it before the harness sees it does (a lowering counts from when the
/// harness saw it: its leases keep counting meanwhile either way).
pub async fn restore(w: &mut World, found: &mut Found) -> anyhow::Result<()> {
    let t = w.layout.terms;
    let pushed = mono();
    let sha = w.push_config(&w.layout.config(t.capacity, "FAIR_SHARE", true))?;
    found.config_at = taken(w, &sha, found).await.map(|_| pushed);
    Ok(())
}

/// The root master's running config (its SHA-256) and how many loads it
/// rejected, from its metrics.
async fn running(w: &World) -> Option<(String, f64)> {
    let i = master(w, 0).await?;
    let text = w.http().get(w.servers[i].http, "/metrics").await?;
    let sha = text.lines().find_map(|l| {
        let rest = l.strip_prefix("doorman_server_config_info{")?;
        let at = rest.find("sha256=\"")? + 8;
        Some(rest[at..].split('"').next()?.to_string())
    })?;
    let errors = text
        .lines()
        .find_map(|l| l.strip_prefix("doorman_server_config_reloads_total{result=\"error\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    Some((sha, errors))
}

/// When the root master first runs the config `sha` (within 10 s); a
/// failure if it never does.
async fn taken(w: &World, sha: &str, found: &mut Found) -> Option<f64> {
    for _ in 0..40 {
        if running(w).await.is_some_and(|r| r.0 == sha) {
            return Some(mono());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    found.fail(format!(
        "the root master did not run the pushed config {} within 10 s",
        &sha[..12.min(sha.len())]
    ));
    None
}

/// Writes an invalid config (a negative capacity) to the config key as
/// is; the root master must reject it within 10 s and keep its config.
async fn invalid(w: &mut World, found: &mut Found) -> anyhow::Result<Applied> {
    let Some((before, errors)) = running(w).await else {
        return Ok(Applied::Nothing(
            "the root master's metrics did not answer".into(),
        ));
    };
    let t = w.layout.terms;
    let good = w.layout.config(t.capacity, "FAIR_SHARE", true);
    let own = format!("\"{RESOURCE}\"\ncapacity = {}", t.capacity);
    let bad = good.replace(&own, &format!("\"{RESOURCE}\"\ncapacity = -{}", t.capacity));
    anyhow::ensure!(bad != good, "no capacity to make invalid in the config");
    w.etcd
        .put_raw(CONFIG_KEY, w.with_rules(&bad).as_bytes())
        .await?;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some((sha, _)) = running(w).await.filter(|r| r.1 > errors) {
            if sha != before {
                found.fail(format!(
                    "an invalid config replaced {before:.12} with {sha:.12}"
                ));
            }
            found
                .notes
                .push("the invalid config was rejected, the running one kept".into());
            return Ok(Applied::Config);
        }
    }
    found.fail("the root master did not reject the invalid config within 10 s");
    Ok(Applied::Config)
}

/// The capacity in force after a config fault is applied or mended.
pub fn capacity_after(w: &World, f: &Fault, mended: bool) -> Option<f64> {
    let full = w.layout.terms.capacity;
    match f {
        Fault::CapacityDown | Fault::RemoveTemplate if !mended => Some(FALLBACK_SHARE * full),
        Fault::CapacityDown | Fault::RemoveTemplate | Fault::ChangeAlgorithm => Some(full),
        _ => None,
    }
}
