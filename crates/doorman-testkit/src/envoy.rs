//! A real Envoy process for tests, started from one of the configs in
//! `deploy/envoy/` with its placeholders filled in (`${LISTEN_PORT}`,
//! `${BACKEND_PORT}`, `${ADMIN_PORT}`, `${DOORMAN_PORT}`), checked with
//! `envoy --mode validate` first, bound to 127.0.0.1 and killed (by its
//! pid) when dropped; plus a paced HTTP load that counts what Envoy
//! admitted.
//!
//! The binary: `$ENVOY_BIN`, else the one `scripts/envoy-setup.sh` installs
//! under `target/venv-envoy`. Missing, it is an error, never a skip.
//!
//! Must not: be used by production code (it is a dev-dependency only).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::free_port;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `envoy --mode validate` on `cfg`, tried twice: CI once saw it fail
/// with nothing on stdout while the same file passed everywhere else, and
/// its reason (on stderr, with the exit status) was not kept then.
fn validate(bin: &Path, cfg: &Path, config: &str) -> Result<(), String> {
    let run = || {
        Command::new(bin)
            .args(["--mode", "validate", "--disable-hot-restart", "-c"])
            .arg(cfg)
            .output()
            .map_err(|e| format!("{bin:?}: {e}"))
    };
    let why = |out: &std::process::Output| {
        let tail = &out.stderr[out.stderr.len().saturating_sub(1500)..];
        let (out_text, tail) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(tail),
        );
        format!("{} {out_text}{tail}", out.status)
    };
    let first = run()?;
    if first.status.success() {
        return Ok(());
    }
    eprintln!(
        "envoy --mode validate {config} failed, trying again: {}",
        why(&first)
    );
    std::thread::sleep(Duration::from_secs(1));
    let second = run()?;
    if second.status.success() {
        return Ok(());
    }
    Err(format!(
        "envoy --mode validate rejected {config}: {}",
        why(&second)
    ))
}

/// Where the Envoy binary is: `$ENVOY_BIN`, else the venv of
/// `scripts/envoy-setup.sh`.
pub fn find_envoy() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("ENVOY_BIN") {
        return Ok(PathBuf::from(p));
    }
    let lib = repo().join("target/venv-envoy/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("site-packages/envoy/_bin/envoy"))
            .find(|p| p.is_file())
    });
    found.ok_or_else(|| {
        "envoy not found: these tests need a real Envoy 1.40. Run ./scripts/envoy-setup.sh \
         (./scripts/test.sh does), or set ENVOY_BIN"
            .to_string()
    })
}

/// A running Envoy.
#[derive(Debug)]
pub struct EnvoyProcess {
    child: Child,
    /// Where clients send requests.
    pub listen: SocketAddr,
    admin: SocketAddr,
    dir: tempfile::TempDir,
}

impl EnvoyProcess {
    /// Starts Envoy from `deploy/envoy/<config>` asking the Doorman server
    /// on `doorman_port`, and waits until it is ready.
    pub fn start(config: &str, doorman_port: u16) -> Result<EnvoyProcess, String> {
        Self::start_with(config, doorman_port, &[])
    }

    /// As [`EnvoyProcess::start`], with each `(from, to)` of `edits`
    /// replaced in the config first (each must occur: a setting the
    /// config's comments say how to change, `failure_mode_deny: false`
    /// say).
    pub fn start_with(
        config: &str,
        doorman_port: u16,
        edits: &[(&str, &str)],
    ) -> Result<EnvoyProcess, String> {
        let bin = find_envoy()?;
        let path = repo().join("deploy/envoy").join(config);
        let mut text = std::fs::read_to_string(&path).map_err(|e| format!("{path:?}: {e}"))?;
        for (from, to) in edits {
            if !text.contains(from) {
                return Err(format!("{config} has no {from:?} to replace"));
            }
            text = text.replace(from, to);
        }
        let (listen, backend, admin) = (free_port()?, free_port()?, free_port()?);
        let text = text
            .replace("${LISTEN_PORT}", &listen.to_string())
            .replace("${BACKEND_PORT}", &backend.to_string())
            .replace("${ADMIN_PORT}", &admin.to_string())
            .replace("${DOORMAN_PORT}", &doorman_port.to_string());
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let cfg = dir.path().join("envoy.yaml");
        std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
        validate(&bin, &cfg, config)?;
        let log = std::fs::File::create(dir.path().join("envoy.log")).map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&cfg)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "-l",
                "warning",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{bin:?}: {e}"))?;
        let mut envoy = EnvoyProcess {
            child,
            listen: SocketAddr::from(([127, 0, 0, 1], listen)),
            admin: SocketAddr::from(([127, 0, 0, 1], admin)),
            dir,
        };
        envoy.wait_ready()?;
        Ok(envoy)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("envoy exited ({status}): {}", self.log()));
            }
            if get(self.admin, "/ready")
                .is_ok_and(|(code, body)| code == 200 && body.contains("LIVE"))
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("envoy not ready after 20 s: {}", self.log()))
    }

    /// Envoy's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// A counter or gauge from the admin `/stats` (0 while Envoy has not
    /// created it yet, as it does on first use).
    pub fn stat(&self, name: &str) -> u64 {
        let Ok((_, body)) = get(self.admin, "/stats") else {
            return 0;
        };
        body.lines()
            .filter_map(|l| l.split_once(": "))
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for EnvoyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 GET with `headers` on a new connection: the status code
/// and the body (read up to its `content-length`, not until Envoy closes).
pub fn get_with(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String)> {
    get_full(addr, path, headers).map(|(code, _, body)| (code, body))
}

/// A response: status code, header lines (lowercase names), body.
pub type Answer = (u16, Vec<(String, String)>, String);

/// As [`get_with`], with the response's header lines too.
pub fn get_full(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk)?;
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok());
            if n == 0 || length.is_some_and(|l| body.len() >= l) {
                let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
                let code =
                    code.ok_or_else(|| std::io::Error::other(format!("not HTTP: {head:?}")))?;
                let fields = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    .collect();
                return Ok((code, fields, body.to_string()));
            }
        }
        if n == 0 {
            return Err(std::io::Error::other(
                "connection closed before the answer ended",
            ));
        }
    }
}

fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    get_with(addr, path, &[])
}

/// What a paced load got.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Counts {
    /// 200s.
    pub ok: u64,
    /// 429s (rate limited).
    pub limited: u64,
    /// Anything else, or no answer.
    pub other: u64,
    /// How long the load took, seconds (at least what was asked for).
    pub secs: f64,
}

impl Counts {
    /// Admitted requests per second over the load's real duration.
    pub fn ok_rate(&self) -> f64 {
        self.ok as f64 / self.secs
    }
}

/// Sends `rate` requests per second to `addr` for `secs` seconds, each on
/// its own connection from a small pool of threads, with `headers`, and
/// counts the answers.
pub fn offer(addr: SocketAddr, rate: f64, secs: f64, headers: &[(&str, &str)]) -> Counts {
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let total = (rate * secs).round() as u64;
    let start = Instant::now();
    let threads = 8u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let counts = counts.clone();
            let headers: Vec<(String, String)> = headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            std::thread::spawn(move || {
                let hs: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let mut i = t;
                while i < total {
                    let due = start + Duration::from_secs_f64(i as f64 / rate);
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    let slot = match get_with(addr, "/", &hs) {
                        Ok((200, _)) => 0,
                        Ok((429, _)) => 1,
                        _ => 2,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                    i += threads;
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    // The last request is due at (total - 1) / rate; the load spans secs.
    let late = start.elapsed().as_secs_f64() - (total.saturating_sub(1)) as f64 / rate;
    Counts {
        secs: secs + late.max(0.0),
        ok: counts[0].load(Ordering::Relaxed),
        limited: counts[1].load(Ordering::Relaxed),
        other: counts[2].load(Ordering::Relaxed),
    }
}
