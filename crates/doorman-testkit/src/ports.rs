//! Ports for processes a test starts (etcd, Envoy, a server given a fixed
//! address): one allocator for every test, Rust or Python, that cannot
//! race. A port is taken from below the kernel's ephemeral range, where no
//! socket bound to port 0 can land, and claimed with an exclusive `flock`
//! on `<dir>/<port>.lock` that this process keeps until it exits, so no
//! other test process (cargo's parallel test binaries, pytest, the check
//! scripts: `scripts/checklib/ports.py` follows the same rules) hands the
//! same port out meanwhile, even after the first one's child has exited.
//!
//! The directory is `$DOORMAN_TEST_PORTS` or `/tmp/doorman-test-ports`
//! (made writable by every user, so a run as root and one as a user
//! share it); the range is 20000 up to the kernel's ephemeral range
//! (32000 at most).
//!
//! Must not: release a claim before the process ends (a port handed out
//! once stays this process's), or hand out a port something listens on.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The first port handed out.
pub const FIRST: u16 = 20_000;
/// One past the last port handed out, when the ephemeral range starts
/// higher.
pub const END: u16 = 32_000;

/// The claims this process holds: their files keep the locks.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A port on 127.0.0.1 that nothing listens on now and that no other test
/// process will be given while this one runs.
pub fn free_port() -> Result<u16, String> {
    let dir = lock_dir();
    make_shared(&dir)?;
    let end = END.min(ephemeral_start().unwrap_or(END));
    if end <= FIRST {
        return Err(format!(
            "no test ports: the ephemeral range starts at {end}, below {FIRST}"
        ));
    }
    let span = u32::from(end - FIRST);
    let start = FIRST + (seed() % span) as u16;
    (start..end)
        .chain(FIRST..start)
        .find_map(|p| claim(&dir, p))
        .ok_or_else(|| format!("no free port in {FIRST}..{end} (claims in {dir:?})"))
}

/// Claims `port` if no other process holds it and nothing listens on it.
fn claim(dir: &std::path::Path, port: u16) -> Option<u16> {
    let path = dir.join(format!("{port}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        // Another user's file: flock needs no write access.
        .or_else(|_| File::open(&path))
        .ok()?;
    file.try_lock().ok()?;
    TcpListener::bind(("127.0.0.1", port)).ok()?;
    HELD.lock().unwrap_or_else(|e| e.into_inner()).push(file);
    Some(port)
}

/// Creates the claims' directory, writable by every user (sticky, as
/// /tmp): a run as root and one as a user share it.
fn make_shared(dir: &Path) -> Result<(), String> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
    let shared = std::fs::Permissions::from_mode(0o1777);
    let _ = std::fs::set_permissions(dir, shared);
    Ok(())
}

fn lock_dir() -> PathBuf {
    std::env::var_os("DOORMAN_TEST_PORTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/doorman-test-ports"))
}

/// The kernel's first ephemeral port (Linux), if it can be read.
fn ephemeral_start() -> Option<u16> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Where this process starts looking: spreads parallel processes apart.
fn seed() -> u32 {
    let nanos = std::time::SystemTime::UNIX_EPOCH
        .elapsed()
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::process::id().wrapping_mul(7919) ^ nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_handed_out_once_and_is_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        let end = END.min(ephemeral_start().unwrap_or(END));
        assert!(ports.iter().all(|p| (FIRST..end).contains(p)), "{ports:?}");
    }

    #[test]
    fn a_claimed_port_cannot_be_locked_by_another_open_file() {
        let port = free_port().unwrap();
        let other = File::open(lock_dir().join(format!("{port}.lock"))).unwrap();
        assert!(other.try_lock().is_err(), "port {port}'s claim is not held");
    }
}
