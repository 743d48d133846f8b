//! A throwaway etcd for tests and experiments: a real `etcd` process on free
//! loopback ports with a temporary data directory, fast election settings
//! (`--heartbeat-interval 10 --election-timeout 100`), stoppable and
//! restartable on the same ports and data.
//!
//! If no `etcd` binary is found, [`EtcdProcess::start`] fails with a message
//! saying how to install it (`apt-get install etcd-server`); tests that need
//! etcd therefore fail instead of silently passing.
//!
//! Must not: bind anything but 127.0.0.1 or outlive its test (stopped on drop).

use crate::free_port;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A running (or stopped) etcd.
#[derive(Debug)]
pub struct EtcdProcess {
    binary: PathBuf,
    client_port: u16,
    peer_port: u16,
    /// Plain-HTTP `/health` (also when clients use TLS).
    health_port: u16,
    data_dir: PathBuf,
    child: Option<Child>,
    tls: Option<EtcdTlsFiles>,
}

/// The files of an etcd serving clients over TLS and requiring client
/// certificates (`--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    /// CA that client certificates must chain to.
    pub ca: PathBuf,
    /// etcd's certificate (for 127.0.0.1).
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// Where the etcd binary is: `$ETCD_BIN`, then `PATH`, then /usr/bin.
pub fn find_etcd() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("ETCD_BIN") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        let candidate = dir.join("etcd");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(
        "etcd not found: these tests need a real etcd 3.4+. Install it with \
         `apt-get install -y etcd-server` (./scripts/test.sh does this), or set ETCD_BIN"
            .to_string(),
    )
}

impl EtcdProcess {
    /// Starts etcd and waits until it serves requests.
    pub fn start() -> Result<EtcdProcess, String> {
        EtcdProcess::start_with(None)
    }

    /// Starts etcd serving clients over TLS with client certificates
    /// required.
    pub fn start_tls(tls: EtcdTlsFiles) -> Result<EtcdProcess, String> {
        EtcdProcess::start_with(Some(tls))
    }

    fn start_with(tls: Option<EtcdTlsFiles>) -> Result<EtcdProcess, String> {
        let binary = find_etcd()?;
        let data_dir = std::env::temp_dir().join(format!(
            "doorman-etcd-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut e = EtcdProcess {
            binary,
            client_port: free_port()?,
            peer_port: free_port()?,
            health_port: free_port()?,
            data_dir,
            child: None,
            tls,
        };
        e.restart()?;
        Ok(e)
    }

    /// The client endpoint, `127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// The endpoints as a list.
    pub fn endpoints(&self) -> Vec<String> {
        vec![self.endpoint()]
    }

    /// Kills etcd (SIGKILL); the data directory is kept for a restart.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// (Re)starts etcd on the same ports and data directory and waits until
    /// it has a leader and serves reads (its `/health` says so; at most
    /// 30 s: a port that accepts connections is not enough on a slow disk,
    /// where the first requests then time out).
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut cmd = Command::new(&self.binary);
        if let Some(t) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&t.cert)
                .arg("--key-file")
                .arg(&t.key)
                .arg("--trusted-ca-file")
                .arg(&t.ca)
                .arg("--client-cert-auth");
        }
        let child = cmd
            .arg("--name")
            .arg("test")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("test={peer}")])
            .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
            .args([
                "--listen-metrics-urls",
                &format!("http://127.0.0.1:{}", self.health_port),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.healthy() {
            if Instant::now() > deadline {
                self.stop();
                return Err("etcd did not become healthy within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Whether etcd's `/health` answers `"health":"true"`.
    fn healthy(&self) -> bool {
        let ask = || -> std::io::Result<String> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", self.health_port))?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
            let mut answer = String::new();
            s.read_to_string(&mut answer)?;
            Ok(answer)
        };
        ask().is_ok_and(|a| a.contains("\"health\":\"true\""))
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
