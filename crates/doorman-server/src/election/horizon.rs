//! The lease horizon record in etcd: key `<election key>.horizon`, value
//! the horizon in milliseconds since the Unix epoch, as decimal text. A
//! master writes it before it hands out any lease that could outlive the
//! value there, and only while it holds the election (a transaction on
//! its leader key), so a deposed master can never move it. A new master
//! reads it to learn how long its predecessors' leases can last (the rules
//! are in `doorman_core::server` `horizon.rs`).
//!
//! The key is outside the election's prefix (`<election key>/`), so it is
//! never taken for a candidate.
//!
//! Must not: write without the leader key's guard, or move the record
//! back.

use std::time::Duration;

use doorman_algorithms::Time;
use doorman_core::server::Predecessors;
use etcd_client::{Client, Compare, CompareOp, LeaderKey, Txn, TxnOp};
use tokio::time::timeout;

/// The record's key for election key `election`.
pub(super) fn key(election: &str) -> String {
    format!("{election}.horizon")
}

/// What a new master learns from the record: `Unknown` when there is none
/// (no master kept one before: a new node, or one upgraded from a version
/// without records) or it cannot be parsed.
pub(super) async fn read(
    client: &mut Client,
    key: &str,
    step: Duration,
) -> Result<(Predecessors, Option<Time>), String> {
    let resp = match timeout(step, client.get(key, None)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(format!("reading {key}: {e}")),
        Err(_) => return Err(format!("reading {key} timed out")),
    };
    let Some(kv) = resp.kvs().first() else {
        return Ok((Predecessors::Unknown, None));
    };
    let text = String::from_utf8_lossy(kv.value());
    match text.trim().parse::<i64>() {
        Ok(ms) => {
            let t = Time::from_millis(ms);
            Ok((Predecessors::LeasesEndBy(t), Some(t)))
        }
        Err(_) => {
            tracing::warn!(%key, value = %text, "the lease horizon record is not a number: learning lasts its full duration");
            Ok((Predecessors::Unknown, None))
        }
    }
}

/// Writes `at` if `leader` still holds the election: `Ok(false)` if it
/// does not.
pub(super) async fn write(
    client: &mut Client,
    key: &str,
    leader: &LeaderKey,
    at: Time,
    step: Duration,
) -> Result<bool, String> {
    let txn = Txn::new()
        .when([Compare::create_revision(
            leader.key(),
            CompareOp::Equal,
            leader.rev(),
        )])
        .and_then([TxnOp::put(key, at.as_millis().to_string(), None)]);
    match timeout(step, client.txn(txn)).await {
        Ok(Ok(r)) => Ok(r.succeeded()),
        Ok(Err(e)) => Err(format!("writing {key}: {e}")),
        Err(_) => Err(format!("writing {key} timed out")),
    }
}
