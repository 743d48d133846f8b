//! Audited config changes in etcd: `doorman config push` and `rollback`
//! write the config key and a record of the change in one etcd
//! transaction, so every version a server can apply has a record saying
//! who pushed it, when, and which version it replaced. The version of a
//! config is the etcd revision that wrote it (unique, never reused, even
//! after the key is deleted); its record lives under `KEY.history/` and is
//! written by the same transaction, so it carries the same revision.
//!
//! A push is refused when someone else changed the key since it was read
//! (compare-and-swap), so no change is lost without its author noticing.
//!
//! Must not: write a config that did not validate (callers check first),
//! or trust a record for anything but the audit trail.

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use tokio::time::timeout;

use crate::{connect, EtcdError, EtcdOptions};
use doorman_core::config::sha256_hex;

const STEP: std::time::Duration = std::time::Duration::from_secs(3);

/// One config version and who made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The etcd revision that wrote it (not stored: the record's own
    /// modification revision).
    #[serde(skip)]
    pub version: i64,
    /// The version it replaced (0: the key was absent).
    pub previous: i64,
    /// Who pushed it, as the pushing client authenticated to etcd.
    pub pusher: String,
    /// When, seconds since the Unix epoch.
    pub pushed_at: u64,
    /// `push`, or `rollback to N`.
    pub action: String,
    /// SHA-256 of the config text, hex.
    pub sha256: String,
    /// The config text.
    pub config: String,
}

/// Where the records of `key` live.
pub fn history_prefix(key: &str) -> String {
    format!("{key}.history/")
}

/// Now, for the record: the wall clock (a push runs outside any server).
fn now_secs() -> u64 {
    u64::try_from(crate::clock::wall_clock().whole_secs()).unwrap_or(0)
}

/// Writes `text` to `key` with its record in one transaction, if the key
/// is still at the revision read first. Returns the record (with its
/// version).
pub async fn push(
    etcd: &EtcdOptions,
    key: &str,
    text: &str,
    pusher: &str,
    action: &str,
) -> Result<Record, EtcdError> {
    let mut client = connect(etcd, STEP).await?;
    let read = timeout(STEP, client.get(key, None))
        .await
        .map_err(EtcdError::timed_out(format!("reading {key} from etcd")))?
        .map_err(EtcdError::failed(format!("reading {key} from etcd")))?;
    let previous = read.kvs().first().map(|kv| kv.mod_revision()).unwrap_or(0);
    let seen = read.header().map(|h| h.revision()).unwrap_or(0);
    // Unique among successful pushes: each one raises the store revision.
    let record_key = format!("{}{seen:020}", history_prefix(key));
    let mut record = Record {
        version: 0,
        previous,
        pusher: pusher.to_string(),
        pushed_at: now_secs(),
        action: action.to_string(),
        sha256: sha256_hex(text.as_bytes()),
        config: text.to_string(),
    };
    let json = serde_json::to_vec(&record).map_err(|e| EtcdError::Malformed {
        what: format!("the record of {key}"),
        why: e.to_string(),
    })?;
    let txn = Txn::new()
        .when([
            Compare::mod_revision(key, CompareOp::Equal, previous),
            Compare::create_revision(record_key.as_str(), CompareOp::Equal, 0),
        ])
        .and_then([
            TxnOp::put(key, text, None),
            TxnOp::put(record_key.as_str(), json, None),
        ]);
    let resp = timeout(STEP, client.txn(txn))
        .await
        .map_err(EtcdError::timed_out(format!("writing {key} to etcd")))?
        .map_err(EtcdError::failed(format!("writing {key} to etcd")))?;
    if !resp.succeeded() {
        return Err(EtcdError::Conflict {
            what: format!(
                "{key} changed while pushing (someone else pushed): nothing written; read it again and retry"
            ),
        });
    }
    record.version = resp.header().map(|h| h.revision()).unwrap_or(0);
    Ok(record)
}

/// Every recorded version of `key`, oldest first.
pub async fn history(etcd: &EtcdOptions, key: &str) -> Result<Vec<Record>, EtcdError> {
    records(etcd, key, GetOptions::new().with_prefix()).await
}

/// The record of version `version` of `key`, if it has one (a value
/// written by other means than `doorman config` has none).
pub async fn record_of(
    etcd: &EtcdOptions,
    key: &str,
    version: i64,
) -> Result<Option<Record>, EtcdError> {
    let opts = GetOptions::new()
        .with_prefix()
        .with_min_mod_revision(version)
        .with_max_mod_revision(version);
    Ok(records(etcd, key, opts).await?.pop())
}

async fn records(
    etcd: &EtcdOptions,
    key: &str,
    opts: GetOptions,
) -> Result<Vec<Record>, EtcdError> {
    let prefix = history_prefix(key);
    let mut client = connect(etcd, STEP).await?;
    let resp = timeout(STEP, client.get(prefix.as_str(), Some(opts)))
        .await
        .map_err(EtcdError::timed_out(format!("reading {prefix} from etcd")))?
        .map_err(EtcdError::failed(format!("reading {prefix} from etcd")))?;
    let mut out = Vec::new();
    for kv in resp.kvs() {
        match serde_json::from_slice::<Record>(kv.value()) {
            Ok(mut r) => {
                r.version = kv.mod_revision();
                out.push(r);
            }
            Err(e) => {
                tracing::warn!(key = %String::from_utf8_lossy(kv.key()), "unreadable config record: {e}")
            }
        }
    }
    out.sort_by_key(|r| r.version);
    Ok(out)
}

/// What changed between two config texts, by lines: `+A -R lines`.
pub fn diff_summary(old: &str, new: &str) -> String {
    let mut counts = std::collections::HashMap::<&str, i64>::new();
    for l in new.lines() {
        *counts.entry(l).or_default() += 1;
    }
    for l in old.lines() {
        *counts.entry(l).or_default() -= 1;
    }
    let added: i64 = counts.values().filter(|&&c| c > 0).sum();
    let removed: i64 = -counts.values().filter(|&&c| c < 0).sum::<i64>();
    format!("+{added} -{removed} lines")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_counts_changed_lines() {
        assert_eq!(diff_summary("a\nb\nc\n", "a\nc\nd\ne\n"), "+2 -1 lines");
        assert_eq!(diff_summary("", "a\n"), "+1 -0 lines");
        assert_eq!(diff_summary("a\n", "a\n"), "+0 -0 lines");
    }
}
