//! The lease horizon record in etcd: key `<election key>.horizon`, value
//! `<milliseconds since the Unix epoch, 20 digits> <writer's leader key>`.
//! A master writes it before it hands out any lease that could outlive the
//! time there, and only while it holds the election (a transaction on its
//! leader key's creation revision), so a deposed master can never move it.
//! A new master reads it to learn how long its predecessors' leases can
//! last (the rules are in `doorman_core::server` `horizon.rs`), and trusts
//! it only if its writer is the last leader it saw take the election: a
//! master that kept no record (an older version) may have served since.
//!
//! The key is outside the election's prefix (`<election key>/`), so it is
//! never taken for a candidate.
//!
//! Must not: write without the leader key's guard, or trust a record that
//! is implausible or written by anyone but the last leader seen.

use doorman_algorithms::Time;
use doorman_core::server::Predecessors;
use etcd_client::{Client, Compare, CompareOp, LeaderKey, Txn, TxnOp};
use tokio::time::{timeout_at, Instant};

/// Records before this (2020-01-01) are taken for garbage (a time in
/// seconds written by hand, say).
const PLAUSIBLE_FROM: Time = Time::from_millis(1_577_836_800_000);

/// Records more than this beyond a fresh one are taken for garbage.
const PLAUSIBLE_AHEAD: Time = Time::secs(3600);

/// The record's key for election key `election`.
pub(super) fn key(election: &str) -> String {
    format!("{election}.horizon")
}

/// A record as read.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    /// No lease of its writer's outlives this.
    pub until: Time,
    /// The writer's leader key.
    pub writer: Vec<u8>,
}

impl Record {
    fn parse(value: &[u8]) -> Option<Record> {
        let text = std::str::from_utf8(value).ok()?;
        let (ms, writer) = text.trim().split_once(' ')?;
        Some(Record {
            until: Time::from_millis(ms.parse().ok()?),
            writer: writer.as_bytes().to_vec(),
        })
    }

    fn value(until: Time, writer: &[u8]) -> Vec<u8> {
        let mut v = format!("{:020} ", until.as_millis().max(0)).into_bytes();
        v.extend_from_slice(writer);
        v
    }
}

/// What a new master may conclude from `record`: the predecessors' leases
/// end by its time if the record is plausible (not before 2020, not more
/// than an hour beyond `fresh`, the horizon this master would write now)
/// and its writer is `last_leader`, the last leader this server saw. Also
/// the horizon to write: never earlier than a plausible record.
pub(super) fn conclude(
    record: Option<&Record>,
    last_leader: Option<&[u8]>,
    fresh: Time,
) -> (Predecessors, Time, &'static str) {
    let Some(r) = record else {
        return (Predecessors::Unknown, fresh, "no lease horizon record yet");
    };
    if r.until < PLAUSIBLE_FROM || r.until > fresh + PLAUSIBLE_AHEAD {
        return (
            Predecessors::Unknown,
            fresh,
            "the lease horizon record is implausible",
        );
    }
    let bound = fresh.max(r.until);
    if last_leader != Some(r.writer.as_slice()) {
        let why = "the lease horizon record was not written by the last leader seen";
        return (Predecessors::Unknown, bound, why);
    }
    (
        Predecessors::LeasesEndBy(r.until),
        bound,
        "the lease horizon record",
    )
}

/// Reads the record; `None` if there is none or it cannot be parsed.
pub(super) async fn read(
    client: &mut Client,
    key: &str,
    limit: Instant,
) -> Result<Option<Record>, String> {
    let resp = match timeout_at(limit, client.get(key, None)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(format!("reading {key}: {e}")),
        Err(_) => return Err(format!("reading {key} timed out")),
    };
    Ok(resp.kvs().first().and_then(|kv| Record::parse(kv.value())))
}

/// Writes `until` if `leader` still holds the election: `Ok(false)` if it
/// does not.
pub(super) async fn write(
    client: &mut Client,
    key: &str,
    leader: &LeaderKey,
    until: Time,
    limit: Instant,
) -> Result<bool, String> {
    let txn = Txn::new()
        .when([Compare::create_revision(
            leader.key(),
            CompareOp::Equal,
            leader.rev(),
        )])
        .and_then([TxnOp::put(key, Record::value(until, leader.key()), None)]);
    match timeout_at(limit, client.txn(txn)).await {
        Ok(Ok(r)) => Ok(r.succeeded()),
        Ok(Err(e)) => Err(format!("writing {key}: {e}")),
        Err(_) => Err(format!("writing {key} timed out")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_trusted_only_when_plausible_and_written_by_the_last_leader() {
        let fresh = Time::from_secs(1_800_000_100);
        let r = Record::parse(&Record::value(Time::from_secs(1_800_000_000), b"/k/1")).unwrap();
        assert_eq!(r.until, Time::from_secs(1_800_000_000));
        let (p, bound, _) = conclude(Some(&r), Some(b"/k/1"), fresh);
        assert_eq!((p, bound), (Predecessors::LeasesEndBy(r.until), fresh));
        // Another writer (an older master kept no record since), or none seen.
        for seen in [Some(&b"/k/2"[..]), None] {
            assert_eq!(conclude(Some(&r), seen, fresh).0, Predecessors::Unknown);
        }
        // Seconds written by hand, or far in the future: garbage.
        for until in [Time::from_millis(1_800_000_000), fresh + Time::secs(7200)] {
            let r = Record {
                until,
                writer: b"/k/1".to_vec(),
            };
            assert_eq!(
                conclude(Some(&r), Some(b"/k/1"), fresh),
                (
                    Predecessors::Unknown,
                    fresh,
                    "the lease horizon record is implausible"
                )
            );
        }
        // A record beyond a fresh one is kept (it never moves back).
        let later = Record {
            until: fresh + Time::secs(60),
            writer: b"/k/1".to_vec(),
        };
        assert_eq!(conclude(Some(&later), Some(b"/k/1"), fresh).1, later.until);
        assert_eq!(conclude(None, None, fresh).0, Predecessors::Unknown);
        assert_eq!(
            Record::parse(b"12 /k"),
            Some(Record {
                until: Time::from_millis(12),
                writer: b"/k".to_vec()
            })
        );
        assert_eq!(Record::parse(b"junk"), None);
    }
}
