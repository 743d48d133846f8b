//! The processes of one interop step, all on one host of the harness's
//! network (a namespace of its own: the original server binds every
//! interface): our servers, the original's server and intermediate
//! (`doorman_insecure_parent`), its Go clients, and the harness's Rust
//! client. Ports are counted from 16000 on that host, where nothing else
//! runs. Every process is stopped by its pid when the tree is dropped.
//!
//! Must not: judge what the servers granted (`sample.rs`, `steps.rs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::Args;
use crate::http::Http;
use crate::net::Host;
use crate::procs::{Proc, Sink, Spec};

/// Our root's config: one resource of 100, FAIR_SHARE, leases of 20 s
/// refreshed every 5 s, no learning mode.
const ROOT_TOML: &str = "[[resources]]\nidentifier_glob = \"res\"\ncapacity = 100\n\
[resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 20\nrefresh_interval = 5\n\
learning_mode_duration = 0\n";
/// The same for the original (which refuses a config without a `*` entry).
const ALGO: &str =
    "{kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}";

/// One step's processes.
pub struct Tree<'a> {
    args: &'a Args,
    host: Host,
    dir: PathBuf,
    sink: Sink,
    procs: Vec<Proc>,
    port: u16,
    /// How pages are read.
    pub http: Http,
}

impl<'a> Tree<'a> {
    /// A tree on `host`, writing logs and configs into `dir`.
    pub fn new(args: &'a Args, host: Host, dir: &Path) -> Tree<'a> {
        Tree {
            args,
            host,
            dir: dir.to_path_buf(),
            sink: Sink::default(),
            procs: Vec::new(),
            port: 16_000,
            http: Http::default(),
        }
    }

    fn next(&mut self) -> SocketAddr {
        self.port += 1;
        SocketAddr::from((self.host.ip, self.port))
    }

    fn file(&self, name: &str, text: &str) -> anyhow::Result<String> {
        let path = self.dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("{path:?}"))?;
        Ok(path.to_string_lossy().into_owned())
    }

    /// Starts a process; returns its index in the tree.
    pub fn start(&mut self, name: &str, argv: Vec<String>, client: bool) -> anyhow::Result<usize> {
        let spec = Spec {
            name: name.to_string(),
            host: self.host.clone(),
            argv,
            faketime: false,
            env: Vec::new(),
            stdin_closes: client,
            clock: 0,
        };
        let index = self.procs.len();
        let p = Proc::start(spec, &self.dir, index, self.sink.clone())?;
        self.procs.push(p);
        Ok(index)
    }

    /// The process at `index`.
    pub fn proc(&mut self, index: usize) -> &mut Proc {
        &mut self.procs[index]
    }

    /// Our server (a root with [`ROOT_TOML`], or below `parent`), once its
    /// health page answers: its gRPC and HTTP addresses.
    pub async fn ours(
        &mut self,
        name: &str,
        parent: Option<SocketAddr>,
    ) -> anyhow::Result<(SocketAddr, SocketAddr)> {
        let (grpc, page) = (self.next(), self.next());
        let mut argv = vec![self.args.doorman.clone(), "server".into()];
        argv.extend([
            "--listen".into(),
            grpc.to_string(),
            "--http".into(),
            page.to_string(),
        ]);
        match parent {
            Some(p) => argv.extend(["--parent".into(), p.to_string()]),
            None => argv.extend(["--config".into(), self.file("root.toml", ROOT_TOML)?]),
        }
        self.start(name, argv, false)?;
        self.answers(name, page, "/healthz").await?;
        Ok((grpc, page))
    }

    /// The original server (a root, or an intermediate below `parent`),
    /// once its debug page answers: its gRPC and debug addresses.
    pub async fn original(
        &mut self,
        name: &str,
        parent: Option<SocketAddr>,
    ) -> anyhow::Result<(SocketAddr, SocketAddr)> {
        let (grpc, debug) = (self.next(), self.next());
        let (binary, config) = match parent {
            None => ("doorman", format!("resources:\n  - identifier_glob: res\n    capacity: 100\n    algorithm: {ALGO}\n  - identifier_glob: \"*\"\n    capacity: 0\n    algorithm: {ALGO}\n")),
            Some(_) => ("doorman_insecure_parent", format!("resources:\n  - identifier_glob: \"*\"\n    capacity: 0\n    algorithm: {ALGO}\n")),
        };
        let config = self.file(&format!("{name}.yml"), &config)?;
        let mut argv = vec![
            self.original_bin(binary),
            format!("-config=file:{config}"),
            format!("-port={}", grpc.port()),
            format!("-debug_port={}", debug.port()),
            format!("-hostname={}", self.host.ip),
            "-logtostderr".into(),
        ];
        argv.extend(parent.map(|p| format!("-parent={p}")));
        self.start(name, argv, false)?;
        self.answers(name, debug, "/debug/resources").await?;
        Ok((grpc, debug))
    }

    /// The original's `goclient` wanting `wants` of `res` for `seconds`.
    pub fn goclient(
        &mut self,
        name: &str,
        server: SocketAddr,
        wants: f64,
        seconds: f64,
        extra: &[&str],
    ) -> anyhow::Result<usize> {
        let mut argv = vec![
            self.original_bin("goclient"),
            "-server".into(),
            server.to_string(),
        ];
        for (k, v) in [("-resource", "res".into()), ("-wants", wants.to_string())] {
            argv.extend([k.to_string(), v]);
        }
        argv.extend([
            "-client_id".into(),
            name.into(),
            "-duration".into(),
            seconds.to_string(),
        ]);
        argv.extend(extra.iter().map(|s| s.to_string()));
        self.start(name, argv, false)
    }

    /// The harness's Rust client wanting `wants` of `res` until its input
    /// ends (then it closes, releasing); `poll`: without the lease stream.
    pub fn rust_client(
        &mut self,
        name: &str,
        (server, poll): (SocketAddr, bool),
        wants: f64,
    ) -> anyhow::Result<usize> {
        let mut argv = vec![self.args.client.clone(), "client".into()];
        if poll {
            argv.push("--poll".into());
        }
        for (k, v) in [("--server", server.to_string()), ("--id", name.into())] {
            argv.extend([k.to_string(), v]);
        }
        argv.extend([
            "--resource".into(),
            "res".into(),
            "--wants".into(),
            wants.to_string(),
        ]);
        self.start(name, argv, true)
    }

    /// The original's program `name`.
    pub fn original_bin(&self, name: &str) -> String {
        Path::new(&self.args.original)
            .join(name)
            .to_string_lossy()
            .into_owned()
    }

    async fn answers(&self, name: &str, addr: SocketAddr, path: &str) -> anyhow::Result<()> {
        let page = async || self.http.get(addr, path).await.map(drop);
        match wait_for(15.0, page).await {
            Some(()) => Ok(()),
            None => anyhow::bail!("{name}: {path} did not answer within 15 s"),
        }
    }
}

/// Polls `probe` every 100 ms for up to `seconds`; its first `Some`.
pub async fn wait_for<T>(seconds: f64, mut probe: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let until = crate::clock::mono() + seconds;
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if crate::clock::mono() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Drop for Tree<'_> {
    fn drop(&mut self) {
        for p in &mut self.procs {
            p.stop(Duration::from_secs(5));
        }
    }
}
