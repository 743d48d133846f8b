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
//! A new master reads it and concludes what it may with
//! `doorman_core::server::take_office` (the rules are there: trusted only
//! if plausible and written by the last leader it saw take the election,
//! since a master that kept no record, an older version, may have served
//! since).
//!
//! The key is outside the election's prefix (`<election key>/`), so it is
//! never taken for a candidate. A record in the format of older versions
//! (`<milliseconds since the epoch> <writer>`, a wall-clock time) is not
//! trusted: that master learns for its full learning period once.
//!
//! Must not: write without the leader key's guard, or decide what a
//! record means (the core does).

use std::time::Duration;

use doorman_core::server::HorizonRecord;
use doorman_lease::{Span, Time};
use etcd_client::{Client, Compare, CompareOp, LeaderKey, Txn, TxnOp};
use tokio::time::{timeout_at, Instant};

use crate::EtcdError;

/// The record's key for election key `election`.
pub(super) fn key(election: &str) -> String {
    format!("{election}.horizon")
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

/// Reads the record and asks etcd what is left of its lease; `None` if
/// there is none.
pub(super) async fn read(
    client: &mut Client,
    key: &str,
    limit: Instant,
) -> Result<Option<HorizonRecord>, EtcdError> {
    let resp = timeout_at(limit, client.get(key, None))
        .await
        .map_err(EtcdError::timed_out(format!("reading {key}")))?
        .map_err(EtcdError::failed(format!("reading {key}")))?;
    let Some(kv) = resp.kvs().first() else {
        return Ok(None);
    };
    let Some((lease, writer)) = parse(kv.value()) else {
        return Ok(Some(HorizonRecord::Unreadable));
    };
    let ttl = timeout_at(limit, client.lease_time_to_live(lease, None))
        .await
        .map_err(EtcdError::timed_out(format!("the lease of {key}")))?
        .map_err(EtcdError::failed(format!("the lease of {key}")))?
        .ttl();
    // etcd says -1 once the lease has ended (or if it never knew it), and
    // rounds what is left down to whole seconds.
    let left = (ttl >= 0).then(|| Span::secs(ttl + 1));
    Ok(Some(HorizonRecord::Within { left, writer }))
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
) -> Result<Option<i64>, EtcdError> {
    let lease = timeout_at(limit, client.lease_grant(ttl_for(until, now), None))
        .await
        .map_err(EtcdError::timed_out(format!("a lease for {key}")))?
        .map_err(EtcdError::failed(format!("a lease for {key}")))?
        .id();
    let txn = Txn::new()
        .when([Compare::create_revision(
            leader.key(),
            CompareOp::Equal,
            leader.rev(),
        )])
        .and_then([TxnOp::put(key, value(lease, leader.key()), None)]);
    let written = timeout_at(limit, client.txn(txn))
        .await
        .map_err(EtcdError::timed_out(format!("writing {key}")))?
        .map_err(EtcdError::failed(format!("writing {key}")))?
        .succeeded();
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

    #[test]
    fn values_and_ttls() {
        assert_eq!(parse(&value(0x1f, b"/k/1")), Some((0x1f, b"/k/1".to_vec())));
        assert_eq!(parse(b"01800000000000 /k/1"), None, "the older format");
        assert_eq!(parse(b"junk"), None);
        let now = Time::from_secs(100);
        // Rounded up, plus a second for etcd's own rounding.
        assert_eq!(ttl_for(now + Span::from_millis(10_001), now), 12);
        assert_eq!(ttl_for(now, now), 1);
        assert_eq!(ttl_for(Time::ZERO, now), 1);
    }
}
