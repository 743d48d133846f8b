//! etcd faults on the three-member cluster: every member stopped, a
//! member that does not lead killed, the leader killed, quorum lost (two
//! of three), a member wiped and rejoined. Each shown: the member that
//! was to lead did (asked before), quorum was lost (no member says a
//! leader is known before the others come back), the cluster leads again
//! after mending, a wiped member serves again under its new id.
//!
//! Must not: touch the tree's keys.

use std::time::Duration;

use super::{Applied, Found};
use crate::etcd::MEMBERS;
use crate::schedule::Fault;
use crate::world::World;

/// Applies an etcd fault.
pub async fn apply(w: &mut World, f: &Fault, found: &mut Found) -> anyhow::Result<Applied> {
    let leader = w.etcd.leader().await;
    let Some(leader) = leader.or((*f == Fault::EtcdDown).then_some(0)) else {
        return Ok(Applied::Nothing("no etcd member says who leads".into()));
    };
    let other = (leader + 1) % MEMBERS;
    let victims = match f {
        Fault::EtcdDown => (0..MEMBERS).collect(),
        Fault::EtcdMemberDown => vec![other],
        Fault::EtcdLeaderDown => vec![leader],
        Fault::EtcdQuorumLost => vec![leader, other],
        _ => {
            w.etcd.replace_wiped(other).await?;
            found
                .notes
                .push(format!("etcd{} wiped and added back", other + 1));
            return Ok(Applied::EtcdKilled(Vec::new()));
        }
    };
    for &m in &victims {
        w.etcd.members[m].kill()?;
    }
    Ok(Applied::EtcdKilled(victims))
}

/// Before mending: a cluster that lost quorum must know no leader.
async fn show_quorum_lost(w: &World, killed: &[usize], found: &mut Found) {
    if killed.len() * 2 < MEMBERS || killed.len() == MEMBERS {
        return;
    }
    if let Some(l) = w.etcd.leader().await {
        found.fail(format!("etcd{} still leads without quorum", l + 1));
    }
}

/// Starts the killed members again; the cluster must lead again (and a
/// wiped member serve) within 15 s.
pub async fn restart(w: &mut World, killed: &[usize], found: &mut Found) -> anyhow::Result<()> {
    show_quorum_lost(w, killed, found).await;
    for &m in killed {
        w.etcd.members[m].restart(0)?;
    }
    for _ in 0..30 {
        if w.etcd.all_serve().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    found.fail("the etcd cluster did not lead with every member within 15 s of mending");
    Ok(())
}
