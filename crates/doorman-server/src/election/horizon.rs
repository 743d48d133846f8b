//! The lease horizon record in etcd: key `<election key>.horizon`, value
//! `lease <etcd lease id, hex> <writer's leader key>`. The etcd lease was
//! granted with a TTL reaching past the time the writer's leases may last
//! to: no lease of the writer's outlives it. etcd measures that TTL on its
//! own clock and never shortens it (a restarted etcd or a new etcd leader
//! starts it again in full), so a reader on another host learns how long
//! its predecessors' leases can last without comparing wall clocks: what
//! etcd says is left of it (a lease etcd no longer knows has ended). A
//! master writes the record before it hands out any lease that could
//! outlive it, and only while it holds the election (a transaction on its
//! leader key's creation revision), so a deposed master can never move it.
//! A new master reads it (the rules are in `doorman_core::server`
//! `horizon.rs`) and trusts it only if its writer is the last leader it
//! saw take the election: a master that kept no record (an older version)
//! may have served since.
//!
//! The key is outside the election's prefix (`<election key>/`), so it is
//! never taken for a candidate. A record in the format of older versions
//! (`<milliseconds since the epoch> <writer>`, a wall-clock time) is not
//! trusted: that master learns for its full learning period once.
//!
//! Must not: write without the leader key's guard, or trust a record that
//! is implausible, in the old format, or written by anyone but the last
//! leader seen.

use std::time::Duration;

use doorman_algorithms::Time;
use doorman_core::server::Predecessors;
use etcd_client::{Client, Compare, CompareOp, LeaderKey, Txn, TxnOp};
use tokio::time::{timeout_at, Instant};

/// Records more than this beyond a fresh one are taken for garbage.
const PLAUSIBLE_AHEAD: Time = Time::secs(3600);

/// The record's key for election key `election`.
pub(super) fn key(election: &str) -> String {
    format!("{election}.horizon")
}

/// A record as read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Record {
    /// No lease of its writer's outlives this long from the read (`None`:
    /// the etcd lease has ended, and so have they all).
    Within {
        /// What is left, by etcd's word (plus its rounding).
        left: Option<Time>,
        /// The writer's leader key.
        writer: Vec<u8>,
    },
    /// A record of an older version (a wall-clock time) or not a record.
    Unreadable,
}

/// The value of a record of etcd lease `lease` written by `writer`.
fn value(lease: i64, writer: &[u8]) -> Vec<u8> {
    let mut v = format!("lease {lease:x} ").into_bytes();
    v.extend_from_slice(writer);
    v
}

/// The etcd lease and writer of a record's value.
fn parse(value: &[u8]) -> Option<(i64, Vec<u8>)> {
    let text = std::str::from_utf8(value).ok()?;
    let rest = text.trim().strip_prefix("lease ")?;
    let (id, writer) = rest.split_once(' ')?;
    Some((
        i64::from_str_radix(id, 16).ok()?,
        writer.as_bytes().to_vec(),
    ))
}

/// The TTL to grant for a record that must last until `until`, at `now`:
/// whole seconds, rounded up (etcd's lease starts after `now`, so it
/// ends no earlier than `until`).
fn ttl_for(until: Time, now: Time) -> i64 {
    let ms = (until - now).as_millis().max(0);
    (ms + 999) / 1000 + 1
}

/// What a new master may conclude at `now` from `record`: the
/// predecessors' leases end by its time if the record is plausible (not
/// more than an hour beyond `fresh`, the horizon this master would write
/// now) and its writer is `last_leader`, the last leader this server saw.
/// Also the horizon to write: never earlier than a plausible record.
pub(super) fn conclude(
    record: Option<&Record>,
    last_leader: Option<&[u8]>,
    fresh: Time,
    now: Time,
) -> (Predecessors, Time, &'static str) {
    let (left, writer) = match record {
        None => return (Predecessors::Unknown, fresh, "no lease horizon record yet"),
        Some(Record::Unreadable) => {
            let why = "the lease horizon record is in an older format or unreadable";
            return (Predecessors::Unknown, fresh, why);
        }
        Some(Record::Within { left, writer }) => (left, writer),
    };
    // Ended: every lease of the writer's has (long ago, as far as the
    // learning clock's margin is concerned).
    let until = left.map_or(Time::ZERO, |l| now + l);
    if until > fresh + PLAUSIBLE_AHEAD {
        let why = "the lease horizon record is implausible";
        return (Predecessors::Unknown, fresh, why);
    }
    let bound = fresh.max(until);
    if last_leader != Some(writer.as_slice()) {
        let why = "the lease horizon record was not written by the last leader seen";
        return (Predecessors::Unknown, bound, why);
    }
    (
        Predecessors::LeasesEndBy(until),
        bound,
        "the lease horizon record",
    )
}

fn timed_out<T>(what: String) -> impl FnOnce(tokio::time::error::Elapsed) -> Result<T, String> {
    move |_| Err(format!("{what} timed out"))
}

/// Reads the record and asks etcd what is left of its lease; `None` if
/// there is none.
pub(super) async fn read(
    client: &mut Client,
    key: &str,
    limit: Instant,
) -> Result<Option<Record>, String> {
    let resp = timeout_at(limit, client.get(key, None))
        .await
        .or_else(timed_out(format!("reading {key}")))?
        .map_err(|e| format!("reading {key}: {e}"))?;
    let Some(kv) = resp.kvs().first() else {
        return Ok(None);
    };
    let Some((lease, writer)) = parse(kv.value()) else {
        return Ok(Some(Record::Unreadable));
    };
    let ttl = timeout_at(limit, client.lease_time_to_live(lease, None))
        .await
        .or_else(timed_out(format!("the lease of {key}")))?
        .map_err(|e| format!("the lease of {key}: {e}"))?
        .ttl();
    // etcd says -1 once the lease has ended (or if it never knew it), and
    // rounds what is left down to whole seconds.
    let left = (ttl >= 0).then(|| Time::secs(ttl + 1));
    Ok(Some(Record::Within { left, writer }))
}

/// Writes a record lasting until `until` (at `now`) if `leader` still holds
/// the election: `Ok(Some(lease))` with the etcd lease that carries it,
/// `Ok(None)` if `leader` no longer holds it.
pub(super) async fn write(
    client: &mut Client,
    key: &str,
    leader: &LeaderKey,
    (until, now): (Time, Time),
    limit: Instant,
) -> Result<Option<i64>, String> {
    let lease = timeout_at(limit, client.lease_grant(ttl_for(until, now), None))
        .await
        .or_else(timed_out(format!("a lease for {key}")))?
        .map_err(|e| format!("a lease for {key}: {e}"))?
        .id();
    let txn = Txn::new()
        .when([Compare::create_revision(
            leader.key(),
            CompareOp::Equal,
            leader.rev(),
        )])
        .and_then([TxnOp::put(key, value(lease, leader.key()), None)]);
    let written = match timeout_at(limit, client.txn(txn)).await {
        Ok(Ok(r)) => r.succeeded(),
        Ok(Err(e)) => return Err(format!("writing {key}: {e}")),
        Err(_) => return Err(format!("writing {key} timed out")),
    };
    if !written {
        revoke(client, lease).await;
        return Ok(None);
    }
    Ok(Some(lease))
}

/// Revokes the etcd lease of a record no longer in the key (best effort:
/// it runs out by itself).
pub(super) async fn revoke(client: &mut Client, lease: i64) {
    let _ = tokio::time::timeout(Duration::from_secs(1), client.lease_revoke(lease)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(left: Option<i64>, writer: &[u8]) -> Record {
        Record::Within {
            left: left.map(Time::secs),
            writer: writer.to_vec(),
        }
    }

    #[test]
    fn a_record_is_trusted_only_when_plausible_and_written_by_the_last_leader() {
        let now = Time::from_secs(1_800_000_000);
        let fresh = now + Time::secs(20);
        let r = within(Some(15), b"/k/1");
        let (p, bound, _) = conclude(Some(&r), Some(b"/k/1"), fresh, now);
        assert_eq!(
            (p, bound),
            (Predecessors::LeasesEndBy(now + Time::secs(15)), fresh)
        );
        // The etcd lease has ended: every lease of the writer's has.
        let r = within(None, b"/k/1");
        assert_eq!(
            conclude(Some(&r), Some(b"/k/1"), fresh, now).0,
            Predecessors::LeasesEndBy(Time::ZERO)
        );
        // Another writer (an older master kept no record since), or none seen.
        for seen in [Some(&b"/k/2"[..]), None] {
            assert_eq!(
                conclude(Some(&r), seen, fresh, now).0,
                Predecessors::Unknown
            );
        }
        // Far in the future, an old format: not trusted.
        let far = within(Some(7200), b"/k/1");
        for r in [far, Record::Unreadable] {
            let (p, bound, _) = conclude(Some(&r), Some(b"/k/1"), fresh, now);
            assert_eq!((p, bound), (Predecessors::Unknown, fresh));
        }
        // A record beyond a fresh one is kept (it never moves back).
        let later = within(Some(80), b"/k/1");
        assert_eq!(
            conclude(Some(&later), Some(b"/k/1"), fresh, now).1,
            now + Time::secs(80)
        );
        assert_eq!(conclude(None, None, fresh, now).0, Predecessors::Unknown);
    }

    #[test]
    fn values_and_ttls() {
        assert_eq!(parse(&value(0x1f, b"/k/1")), Some((0x1f, b"/k/1".to_vec())));
        assert_eq!(parse(b"01800000000000 /k/1"), None, "the older format");
        assert_eq!(parse(b"junk"), None);
        let now = Time::from_secs(100);
        // Rounded up, plus a second for etcd's own rounding.
        assert_eq!(ttl_for(now + Time::from_millis(10_001), now), 12);
        assert_eq!(ttl_for(now, now), 1);
        assert_eq!(ttl_for(Time::ZERO, now), 1);
    }
}
