//! This host's name, as a client id or a server id names it.
//!
//! Must not: fail (a host without a name is `localhost`).

/// This machine's host name (`/proc/sys/kernel/hostname`, else
/// `$HOSTNAME`, else `localhost`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}
