//! What the leaves count for each client: its lease, read from the status
//! API of every leaf replica (every 250 ms while the tree runs). The
//! original Go client keeps its last capacity until an answer changes it,
//! even past its lease's end (it has no timer at a lease's end and no
//! deadline on an RPC), so the auditor counts it for no more than the
//! lease the server counts, and reports the rest as the original client's
//! own overrun. For our clients the same readings tell, when Σ passes the
//! capacity, which side was wrong: a client using a lease past the end
//! its leaf stated, or a leaf handing out what it still had leased.
//!
//! Must not: change anything on the servers it reads.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::audit::Steps;
use crate::clock::mono;
use crate::http::Http;

/// One reading: when, whose lease, how much, and how long it had left.
pub type Reading = (f64, String, f64, f64);

/// Readings, shared with the poller.
pub type Readings = Arc<Mutex<Vec<Reading>>>;

/// Servers' wall clocks as their status pages said them: (server index,
/// monotonic s, ms since the epoch).
pub type Walls = Arc<Mutex<Vec<(usize, f64, f64)>>>;

/// A server to read: its index, its HTTP address, and whether its clients'
/// leases are read (a leaf's, every 250 ms; the others' pages every
/// second, for their wall clocks).
pub type Polled = (usize, SocketAddr, bool);

/// Polls the status API of `servers` until `stop`, recording every client
/// lease on `resources` and every server's wall clock.
pub async fn poll(
    http: Http,
    servers: Vec<Polled>,
    resources: Vec<String>,
    (out, walls): (Readings, Walls),
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    for round in 0u64.. {
        for &(i, addr, leaf) in &servers {
            if !leaf && round % 4 != 0 {
                continue;
            }
            if let Some(body) = http.get(addr, "/api/v1/status").await {
                record(&body, &resources, &out);
                wall(&body, i, &walls);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The server's wall clock from its status page.
fn wall(body: &str, i: usize, walls: &Walls) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return;
    };
    if let Some(ms) = v["wall_clock_ms"].as_f64() {
        let mut w = walls.lock().unwrap_or_else(|e| e.into_inner());
        w.push((i, mono(), ms));
    }
}

fn record(body: &str, resources: &[String], out: &Readings) {
    let t = mono();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return;
    };
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    let statuses = resources.iter().filter_map(|r| resource_status(&v, r));
    let leases = statuses.flat_map(|r| r["leases"].as_array().into_iter().flatten());
    for l in leases {
        if l["kind"] != "client" {
            continue;
        }
        let (Some(id), Some(has), Some(left)) = (
            l["id"].as_str(),
            l["has"].as_f64(),
            l["expires_in"].as_f64(),
        ) else {
            continue;
        };
        // An id owned by an identity (a secure tree) shows as `id (owner)`.
        let id = id.split_once(" (").map_or(id, |(id, _)| id);
        out.push((t, id.to_string(), has, left));
    }
}

/// The status of `resource` in a server's status page (`/api/v1/status`),
/// if it has state for it.
pub fn resource_status<'a>(
    status: &'a serde_json::Value,
    resource: &str,
) -> Option<&'a serde_json::Value> {
    let mut resources = status["resources"].as_array().into_iter().flatten();
    resources.find(|r| r["id"] == resource)
}

/// The lease `client` held by the server's word, from `readings` (each
/// lasting until its end or the next reading); `None` before the first.
pub fn leased(readings: &[Reading], client: &str) -> Option<Steps> {
    let mine: Vec<&Reading> = readings.iter().filter(|r| r.1 == client).collect();
    let first = mine.first()?;
    let mut s = Steps::default();
    s.set(first.0 - 1e6, f64::INFINITY);
    for (i, r) in mine.iter().enumerate() {
        s.set(r.0, if r.3 > 0.0 { r.2 } else { 0.0 });
        let end = r.0 + r.3.max(0.0);
        if mine.get(i + 1).is_none_or(|n| n.0 > end) {
            s.set(end, 0.0);
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_lasts_until_its_end_or_the_next_reading() {
        let r = |t: f64, has: f64, left: f64| (t, "go-0".to_string(), has, left);
        let readings = [r(10.0, 12.5, 3.0), r(10.25, 12.5, 2.75), r(20.0, 5.0, 8.0)];
        let s = leased(&readings, "go-0").unwrap();
        assert!(s.at(5.0).is_infinite(), "unknown before the first reading");
        assert_eq!((s.at(10.1), s.at(12.9), s.at(13.1)), (12.5, 12.5, 0.0));
        assert_eq!((s.at(20.0), s.at(27.9), s.at(28.1)), (5.0, 5.0, 0.0));
        assert!(leased(&readings, "go-1").is_none());
    }
}
