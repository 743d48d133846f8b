//! The tree under test: its layout (nodes of replicas electing through
//! etcd, clients of three kinds on the leaves), the config pushed to the
//! root, and the running world: every process on its own host.
//!
//! Default tree: a root pair, an intermediate ("mid") pair, two leaf pairs
//! with Rust and Python clients, and a one-replica leaf for the original Go
//! clients, which keep their last capacity when their server is gone (no
//! timer at a lease's end, no deadline on an RPC: see docs/operations.md,
//! "Faults we test"), so no fault is aimed at that leaf itself.
//!
//! Must not: inject faults (`faults.rs`) or judge (`audit.rs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::net::{Host, Net};
use crate::procs::{Proc, Sink, Spec};

/// The resource our clients (Rust, Python) use.
pub const RESOURCE: &str = "faults/db";
/// The resource the original Go clients use: their own, so what their
/// five-second refresh costs (below) does not blur what the tree does for
/// ours.
pub const LEGACY_RESOURCE: &str = "faults/legacy";
/// Its capacity (two Go clients want 60).
pub const LEGACY_CAPACITY: f64 = 50.0;
/// The config key in etcd.
pub const CONFIG_KEY: &str = "/faults/config";

/// Lease terms and sizes of the tree.
#[derive(Debug, Clone, Copy)]
pub struct Terms {
    /// Capacity of the resource.
    pub capacity: f64,
    /// Root lease length, s.
    pub lease: i64,
    /// Root refresh interval, s.
    pub refresh: i64,
    /// Election TTL, s.
    pub ttl: u64,
    /// What each client wants at start.
    pub wants: f64,
}

/// The default tree's terms: 14 s leases, refreshed every 2 s at the root
/// (1 s below), an election TTL of 3 s. They keep the margin rule for
/// failing over without a dip (docs/operations.md, "Lease and refresh
/// settings"): what a lease has left at the clients, at least the lease
/// less the refresh intervals above them (14 − 2 − 1 = 11 s), covers the
/// time a hung master's subtree needs to reach its successor (the TTL, a
/// keep-alive period, a request deadline: 3 + 1 + 1 = 5 s) and, for an
/// intermediate, the successor's hold (three of its requesters' refresh
/// intervals and a second: 4 s) and the renewal's way down to the
/// clients (a refresh interval per level below it: 2 s). With 10 s
/// leases (7 s left) the renewal after a lost intermediate master reached
/// the clients two levels below just after their leases ended, once in
/// about three runs (a 35 ms gap; measured); with a root refresh of 4 s a
/// paused master cost its subtree up to 11 s.
impl Default for Terms {
    fn default() -> Self {
        Terms {
            capacity: 100.0,
            lease: 14,
            refresh: 2,
            ttl: 3,
            wants: 30.0,
        }
    }
}

/// A node of the tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its name (`root`, `mid`, `leafA`, …), also its election key's tail.
    pub name: String,
    /// Index of its parent node (`None`: the root).
    pub parent: Option<usize>,
    /// How many replicas elect its master.
    pub replicas: usize,
    /// Faults may be aimed at it.
    pub faultable: bool,
}

/// What kind of client program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `doorman-faults client` (the Rust library).
    Rust,
    /// The Python package (`clients/faults/pyclient.py`).
    Python,
    /// The original Doorman's Go client library (`goclient`).
    Go,
}

/// A client of the tree.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Its name (process and log).
    pub name: String,
    /// Its client id.
    pub id: String,
    /// The host it runs on (clients naming the same host share it).
    pub host: String,
    /// What it wants at start.
    pub wants: f64,
    /// Its program.
    pub kind: Kind,
    /// The leaf node it asks.
    pub leaf: usize,
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `doorman` binary.
    pub doorman: PathBuf,
    /// This harness (its `client` subcommand).
    pub harness: PathBuf,
    /// etcd.
    pub etcd: PathBuf,
    /// A Python with the doorman_client package, if Python clients run.
    pub python: Option<PathBuf>,
    /// The Python client script.
    pub pyclient: PathBuf,
    /// The original's `goclient`, if Go clients run.
    pub goclient: Option<PathBuf>,
}

/// The tree's shape.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Its nodes, parents before children.
    pub nodes: Vec<Node>,
    /// Its clients.
    pub clients: Vec<ClientSpec>,
    /// Its terms.
    pub terms: Terms,
    /// The root's config at start (default: [`Layout::config`] at the
    /// terms' capacity).
    pub config: Option<String>,
    /// The resource the Rust and Python clients use.
    pub resource: String,
}

impl Layout {
    /// The default tree (see the module doc); Python and Go clients only
    /// where their programs are given.
    pub fn default_tree(p: &Programs, terms: Terms) -> Layout {
        let node = |name: &str, parent, replicas, faultable| Node {
            name: name.into(),
            parent,
            replicas,
            faultable,
        };
        let mut nodes = vec![
            node("root", None, 2, true),
            node("mid", Some(0), 2, true),
            node("leafA", Some(1), 2, true),
            node("leafB", Some(1), 2, true),
        ];
        let mut clients = Vec::new();
        let mut add = |name: String, kind, leaf| {
            clients.push(ClientSpec {
                id: name.clone(),
                host: name.clone(),
                name,
                wants: terms.wants,
                kind,
                leaf,
            })
        };
        for (leaf, tag) in [(2, "a"), (3, "b")] {
            for i in 0..3 {
                add(format!("rust-{tag}{i}"), Kind::Rust, leaf);
            }
            if p.python.is_some() {
                add(format!("py-{tag}0"), Kind::Python, leaf);
            }
        }
        if p.goclient.is_some() {
            nodes.push(node("leafG", Some(1), 1, false));
            for i in 0..2 {
                add(format!("go-{i}"), Kind::Go, 4);
            }
        }
        Layout {
            nodes,
            clients,
            terms,
            config: None,
            resource: RESOURCE.into(),
        }
    }

    /// The root's config: the resource under test, and a catch-all
    /// template it falls back to when its own is removed.
    pub fn config(&self, capacity: f64, kind: &str, with_own: bool) -> String {
        let t = self.terms;
        let own = format!(
            "[[resources]]\nidentifier_glob = \"{RESOURCE}\"\ncapacity = {capacity}\n\
             [resources.algorithm]\nkind = \"{kind}\"\nlease_length = {}\nrefresh_interval = {}\n\n",
            t.lease, t.refresh
        );
        let rest = format!(
            "[[resources]]\nidentifier_glob = \"*\"\ncapacity = {}\n\
             [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = {}\nrefresh_interval = {}\n",
            FALLBACK_SHARE * t.capacity,
            t.lease,
            t.refresh
        );
        let legacy = format!(
            "[[resources]]\nidentifier_glob = \"{LEGACY_RESOURCE}\"\ncapacity = {LEGACY_CAPACITY}\n\
             [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = {}\nrefresh_interval = {}\n\n",
            t.lease, t.refresh
        );
        if with_own {
            legacy + &own + &rest
        } else {
            legacy + &rest
        }
    }
}

/// The catch-all template's capacity, as a share of the resource's.
pub const FALLBACK_SHARE: f64 = 0.6;

/// One replica of a node.
#[derive(Debug)]
pub struct Server {
    /// Its node.
    pub node: usize,
    /// Its process.
    pub proc: Proc,
    /// Its gRPC address.
    pub addr: SocketAddr,
    /// Its HTTP address (status pages, metrics).
    pub http: SocketAddr,
}

/// One client.
#[derive(Debug)]
pub struct Client {
    /// What it is.
    pub spec: ClientSpec,
    /// Its process.
    pub proc: Proc,
}

/// The running tree.
#[derive(Debug)]
pub struct World {
    /// Its layout.
    pub layout: Layout,
    /// Where logs and data go.
    pub dir: PathBuf,
    /// etcd.
    pub etcd: Proc,
    /// etcd's address.
    pub etcd_addr: SocketAddr,
    /// Every replica of every node.
    pub servers: Vec<Server>,
    /// Every client.
    pub clients: Vec<Client>,
    /// What every process printed (clients' reports).
    pub sink: Sink,
    /// The programs.
    pub programs: Programs,
    /// The network (dropped last: processes first).
    pub net: Net,
}

const GRPC_PORT: u16 = 6000;
pub(crate) const HTTP_PORT: u16 = 8080;
pub(crate) const ETCD_PORT: u16 = 2379;

impl World {
    /// Starts etcd, pushes the config, starts every server and client.
    pub fn start(
        layout: Layout,
        programs: Programs,
        dir: &Path,
        tag: u32,
    ) -> anyhow::Result<World> {
        let mut net = Net::new(tag)?;
        let sink: Sink = Arc::new(Mutex::new(Vec::new()));
        let etcd_host = net.host("etcd")?;
        let etcd_addr = SocketAddr::new(etcd_host.ip.into(), ETCD_PORT);
        let etcd = Proc::start(
            programs.etcd_spec(&etcd_host, dir),
            dir,
            usize::MAX,
            sink.clone(),
        )?;
        let mut w = World {
            layout,
            dir: dir.to_path_buf(),
            etcd,
            etcd_addr,
            servers: Vec::new(),
            clients: Vec::new(),
            sink,
            programs,
            net,
        };
        w.wait_for_etcd()?;
        let t = w.layout.terms;
        let config = w.layout.config.clone();
        let config = config.unwrap_or_else(|| w.layout.config(t.capacity, "FAIR_SHARE", true));
        w.push_config(&config)?;
        w.start_servers()?;
        w.start_clients()?;
        Ok(w)
    }

    fn wait_for_etcd(&self) -> anyhow::Result<()> {
        for _ in 0..150 {
            if std::net::TcpStream::connect_timeout(&self.etcd_addr, Duration::from_millis(200))
                .is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("etcd did not listen on {} within 15 s", self.etcd_addr)
    }

    /// Writes `text` to the config key with `doorman config push`.
    pub fn push_config(&self, text: &str) -> anyhow::Result<()> {
        let file = self.dir.join("config.toml");
        std::fs::write(&file, text)?;
        let out = std::process::Command::new(&self.programs.doorman)
            .args([
                "config",
                "push",
                "--etcd",
                &self.etcd_addr.to_string(),
                "--key",
                CONFIG_KEY,
            ])
            .arg(&file)
            .output()
            .context("running doorman config push")?;
        if !out.status.success() {
            bail!("config push: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    fn start_servers(&mut self) -> anyhow::Result<()> {
        let mut addrs: Vec<Vec<SocketAddr>> = Vec::new();
        for (n, node) in self.layout.nodes.clone().iter().enumerate() {
            let mut mine = Vec::new();
            for r in 0..node.replicas {
                let name = replica_name(&node.name, r);
                let host = self.net.host(&name)?;
                let addr = SocketAddr::new(host.ip.into(), GRPC_PORT);
                let parent = node.parent.map(|p| join(&addrs[p]));
                let argv = self.server_argv(node, addr, parent);
                let spec = Spec {
                    name,
                    host,
                    argv,
                    faketime: true,
                    env: vec![("DOORMAN_LOG".into(), "info".into())],
                    stdin_closes: false,
                };
                let index = 1000 + self.servers.len();
                let proc = Proc::start(spec, &self.dir, index, self.sink.clone())?;
                let http = SocketAddr::new(addr.ip(), HTTP_PORT);
                self.servers.push(Server {
                    node: n,
                    proc,
                    addr,
                    http,
                });
                mine.push(addr);
            }
            addrs.push(mine);
        }
        Ok(())
    }

    fn start_clients(&mut self) -> anyhow::Result<()> {
        let mut hosts: std::collections::HashMap<String, Host> = Default::default();
        for (i, c) in self.layout.clients.clone().into_iter().enumerate() {
            let host = match hosts.get(&c.host) {
                Some(h) => h.clone(),
                None => self.net.host(&c.host)?,
            };
            hosts.insert(c.host.clone(), host.clone());
            let servers: Vec<SocketAddr> = self.replicas(c.leaf).map(|s| s.addr).collect();
            let argv = self.client_argv(&c, &servers)?;
            let spec = Spec {
                name: c.name.clone(),
                host,
                argv,
                faketime: c.kind != Kind::Go,
                env: Vec::new(),
                stdin_closes: c.kind != Kind::Go,
            };
            let proc = Proc::start(spec, &self.dir, i, self.sink.clone())?;
            self.clients.push(Client { spec: c, proc });
        }
        Ok(())
    }

    /// The replicas of node `n`.
    pub fn replicas(&self, n: usize) -> impl Iterator<Item = &Server> {
        self.servers.iter().filter(move |s| s.node == n)
    }

    /// Stops every process by its pid (clients first, then servers, then
    /// etcd); returns the names of servers that did not exit within 2 s of
    /// SIGTERM.
    pub fn stop(&mut self) -> Vec<String> {
        for c in &mut self.clients {
            c.proc.stop(Duration::from_secs(4));
        }
        let mut slow = Vec::new();
        for s in &mut self.servers {
            if !s.proc.stop(Duration::from_secs(2)) {
                slow.push(s.proc.spec.name.clone());
            }
        }
        self.etcd.stop(Duration::from_secs(3));
        slow
    }
}

/// Replica `r`'s name: the node's name and `r + 1` (`root1`), with a dash
/// when the name ends in a digit (`n1.2-1`).
fn replica_name(node: &str, r: usize) -> String {
    let dash = if node.ends_with(|c: char| c.is_ascii_digit()) {
        "-"
    } else {
        ""
    };
    format!("{node}{dash}{}", r + 1)
}

pub(crate) fn join(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
