//! A slot written on the command line (`--slot kill:mid+etcd-down`): each
//! fault by its short name, nodes and clients by the layout's names.
//!
//! Must not: draw anything (`schedule.rs` draws the seeded schedules).

use crate::schedule::{slot, Fault, Slot};
use crate::tree::Layout;

/// A slot from the command line: faults joined by `+`, each one of
/// `kill:NODE`, `pause:NODE`, `etcd-down`, `etcd-member`, `etcd-leader`,
/// `etcd-quorum`, `etcd-wipe`, `etcd-cut:NODE`, `cut-parent:NODE`,
/// `unreachable:NODE`, `lossy:NODE`, `cut-client:CLIENT`,
/// `answers-lost:CLIENT`, `requests-lost:CLIENT`, `lowering-lost:CLIENT`,
/// `delay:CLIENT`, `pause-client:CLIENT`, `kill-client:CLIENT`, `mass`,
/// `skew-client:CLIENT:SECS`, `skew-master:NODE:SECS`, `capacity-down`,
/// `remove-template`, `change-algorithm`, `invalid-config` (nodes and
/// clients by name: `root`, `mid`, `leafA`, `rust-a0`, …).
pub fn parse_slot(spec: &str, l: &Layout) -> anyhow::Result<Slot> {
    let faults = spec
        .split('+')
        .map(|f| parse_fault(f.trim(), l))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(slot(l, faults))
}

fn parse_fault(spec: &str, l: &Layout) -> anyhow::Result<Fault> {
    let parts: Vec<&str> = spec.split(':').collect();
    let node = |i: usize| {
        let name = parts.get(i).copied().unwrap_or("");
        l.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| anyhow::anyhow!("{spec}: no node {name:?}"))
    };
    let client = |i: usize| {
        let name = parts.get(i).copied().unwrap_or("");
        l.clients
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| anyhow::anyhow!("{spec}: no client {name:?}"))
    };
    let secs = |i: usize| -> anyhow::Result<i64> {
        let v = parts.get(i).copied().unwrap_or("");
        v.parse()
            .map_err(|_| anyhow::anyhow!("{spec}: {v:?} is not a number of seconds"))
    };
    Ok(match parts[0] {
        "kill" => Fault::KillMaster(node(1)?),
        "pause" => Fault::PauseMaster(node(1)?),
        "etcd-down" => Fault::EtcdDown,
        "etcd-member" => Fault::EtcdMemberDown,
        "etcd-leader" => Fault::EtcdLeaderDown,
        "etcd-quorum" => Fault::EtcdQuorumLost,
        "etcd-wipe" => Fault::EtcdWiped,
        "etcd-cut" => Fault::EtcdCut(node(1)?),
        "cut-parent" => Fault::CutFromParent(node(1)?),
        "unreachable" => Fault::Unreachable(node(1)?),
        "lossy" => Fault::Lossy(node(1)?),
        "cut-client" => Fault::CutClient(client(1)?),
        "answers-lost" => Fault::AnswersLost(client(1)?),
        "requests-lost" => Fault::RequestsLost(client(1)?),
        "lowering-lost" => Fault::LoweringLost(client(1)?),
        "delay" => Fault::Delay(client(1)?),
        "pause-client" => Fault::PauseClient(client(1)?),
        "kill-client" => Fault::KillClient(client(1)?),
        "mass" => Fault::MassReconnect,
        "skew-client" => Fault::SkewClient(client(1)?, secs(2)?),
        "skew-master" => Fault::SkewMaster(node(1)?, secs(2)?),
        "capacity-down" => Fault::CapacityDown,
        "remove-template" => Fault::RemoveTemplate,
        "change-algorithm" => Fault::ChangeAlgorithm,
        "invalid-config" => Fault::InvalidConfig,
        other => anyhow::bail!("unknown fault {other:?}"),
    })
}
