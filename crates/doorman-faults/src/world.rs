//! The running tree: etcd's members, every replica and client on a host of
//! its own, the proxy in front of proxied clients, and the mass clients
//! while their fault runs; started from a [`Layout`], stopped by pid.
//!
//! Must not: inject faults (`faults/`) or judge (`audit.rs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::etcd::Etcd;
use crate::http::Http;
use crate::net::{Host, Net};
use crate::procs::{Proc, Sink, Spec};
use crate::rng::Rng;
use crate::secure::Secure;
use crate::tree::{join, replica_name, ClientSpec, Kind, Layout, Programs, CONFIG_KEY};

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

/// One client process.
#[derive(Debug)]
pub struct Client {
    /// What it is.
    pub spec: ClientSpec,
    /// Its process.
    pub proc: Proc,
}

/// The proxy in front of a proxied client.
#[derive(Debug)]
pub struct Proxy {
    /// The client, by index.
    pub client: usize,
    /// The proxy's process (`doorman-faults proxy`).
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
    pub etcd: Etcd,
    /// Every replica of every node.
    pub servers: Vec<Server>,
    /// Every client of the layout.
    pub clients: Vec<Client>,
    /// The mass clients' processes, while their fault runs.
    pub mass: Vec<Client>,
    /// The proxies.
    pub proxies: Vec<Proxy>,
    /// What every process printed (clients' reports).
    pub sink: Sink,
    /// The programs.
    pub programs: Programs,
    /// Draws the wall clocks of restarted processes.
    pub rng: Rng,
    /// Certificates, tokens and etcd users, on a secure tree.
    pub secure: Option<Secure>,
    /// How the harness reads the servers' pages and asks Discovery.
    http: Http,
    /// Replicas whose hosts exist but whose processes wait for
    /// [`World::start_held_servers`]: node, process, gRPC address.
    held: Vec<(usize, Spec, SocketAddr)>,
    /// What clients were told to want since [`World::wants_sent`] was
    /// last asked: when, which client, how much.
    wants: Vec<(f64, usize, f64)>,
    /// The network (dropped last: processes first).
    pub net: Net,
}

pub(crate) const GRPC_PORT: u16 = 6000;
pub(crate) const HTTP_PORT: u16 = 8080;
const PROXY_PORT: u16 = 7000;

impl World {
    /// Starts etcd, pushes the config, starts every server, proxy and
    /// client.
    pub fn start(
        layout: Layout,
        programs: Programs,
        dir: &Path,
        (tag, seed): (u32, u64),
    ) -> anyhow::Result<World> {
        let mut net = Net::new(tag)?;
        let sink = Sink::default();
        let secure = if layout.secure {
            Some(Secure::new(dir)?)
        } else {
            None
        };
        let etcd = Etcd::start(&mut net, &programs.etcd, dir, &sink, secure.as_ref())?;
        // The members listen before they have elected a leader.
        let rt = tokio::runtime::Handle::current();
        if !tokio::task::block_in_place(|| rt.block_on(etcd.ready(Duration::from_secs(20)))) {
            anyhow::bail!("the etcd cluster had no leader within 20 s of starting");
        }
        let http = Http::new(secure.as_ref())?;
        let mut w = World {
            http,
            wants: Vec::new(),
            layout,
            dir: dir.to_path_buf(),
            etcd,
            servers: Vec::new(),
            held: Vec::new(),
            clients: Vec::new(),
            mass: Vec::new(),
            proxies: Vec::new(),
            sink,
            programs,
            rng: Rng::new(seed ^ 0x5EED),
            secure,
            net,
        };
        w.secure_etcd(&rt)?;
        let t = w.layout.terms;
        let config = w.layout.config.clone();
        let config = config.unwrap_or_else(|| w.layout.config(t.capacity, "FAIR_SHARE", true));
        w.push_config(&config)?;
        let hold = w.layout.client_starts.is_some();
        w.start_servers(hold)?;
        if !hold {
            w.start_clients(None)?;
        }
        Ok(w)
    }

    /// On a secure tree: etcd's users and authentication, and every
    /// token before the servers start (their token file then holds them
    /// all).
    fn secure_etcd(&mut self, rt: &tokio::runtime::Handle) -> anyhow::Result<()> {
        let Some(s) = &self.secure else {
            return Ok(());
        };
        let etcd = &self.etcd;
        let users = async { s.etcd_users(etcd.admin(false).await?).await };
        tokio::task::block_in_place(|| rt.block_on(users))?;
        self.etcd.auth_on();
        for n in 0..self.layout.nodes.len() {
            let (serves, clients) = self.below(n);
            for id in serves.iter().chain(&clients) {
                s.token_file(id)?;
            }
        }
        Ok(())
    }

    /// Starts the clients held back (`Layout::client_starts`): each first
    /// asks at `t0` (the machine's monotonic clock, `clock::mono`) plus
    /// its offset; `t0` must leave time to start them all. The servers
    /// are started after (`World::start_held_servers`).
    pub fn start_clients_at(&mut self, t0: f64) -> anyhow::Result<()> {
        self.start_clients(Some(t0))
    }

    /// Starts the servers held back with the clients
    /// (`Layout::client_starts`), in the layout's order (roots first).
    pub fn start_held_servers(&mut self) -> anyhow::Result<()> {
        for (node, spec, addr) in std::mem::take(&mut self.held) {
            self.spawn_server(node, spec, addr)?;
        }
        Ok(())
    }

    /// How the harness reads the servers' pages and asks Discovery.
    pub fn http(&self) -> Http {
        self.http.clone()
    }

    /// Writes `text` (with the access rules of a secure tree) to the
    /// config key with `doorman config push`; returns the SHA-256 of what
    /// it wrote, as the servers name it.
    pub fn push_config(&self, text: &str) -> anyhow::Result<String> {
        let file = self.dir.join("config.toml");
        let bytes = self.with_rules(text);
        crate::no_shadow::refuse_shadow(&bytes)?;
        std::fs::write(&file, &bytes)?;
        let mut cmd = std::process::Command::new(&self.programs.doorman);
        cmd.args(["config", "push"])
            .args(self.etcd_args("pusher"))
            .args(["--key", CONFIG_KEY])
            .arg(&file);
        // etcd may be electing a leader (one killed in the same slot): a
        // push that fails is tried again for a few seconds.
        let mut tries = 0;
        loop {
            let out = cmd.output().context("running doorman config push")?;
            if out.status.success() {
                break;
            }
            tries += 1;
            if tries == 5 {
                bail!("config push: {}", String::from_utf8_lossy(&out.stderr));
            }
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        let d = ring::digest::digest(&ring::digest::SHA256, bytes.as_bytes());
        Ok(d.as_ref().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The root's config as pushed: `text`, and on a secure tree its
    /// access rules.
    pub fn with_rules(&self, text: &str) -> String {
        match &self.secure {
            Some(s) => format!("{text}\n{}", s.root_rules()),
            None => text.to_string(),
        }
    }

    /// `--etcd` and, on a secure tree, the TLS and user flags of `who`.
    pub fn etcd_args(&self, who: &str) -> Vec<String> {
        let mut args = vec!["--etcd".to_string(), self.etcd.endpoints()];
        if let Some(s) = &self.secure {
            args.extend(s.etcd_flags(who));
        }
        args
    }

    /// Makes every replica's host; starts its process unless `hold`.
    fn start_servers(&mut self, hold: bool) -> anyhow::Result<()> {
        let mut addrs: Vec<Vec<SocketAddr>> = Vec::new();
        for (n, node) in self.layout.nodes.clone().iter().enumerate() {
            let mut mine = Vec::new();
            for r in 0..node.replicas {
                let name = replica_name(&node.name, r);
                let host = self.net.host(&name)?;
                let addr = SocketAddr::new(host.ip.into(), GRPC_PORT);
                let parent = node.parent.map(|p| join(&addrs[p]));
                let argv = self.server_argv(n, &host, parent)?;
                let spec = Spec {
                    clock: self.layout.clock(&name),
                    name,
                    host,
                    argv,
                    faketime: true,
                    env: vec![(
                        "DOORMAN_LOG".into(),
                        "info,doorman_server::upstream=debug".into(),
                    )],
                    stdin_closes: false,
                };
                if hold {
                    self.held.push((n, spec, addr));
                } else {
                    self.spawn_server(n, spec, addr)?;
                }
                mine.push(addr);
            }
            addrs.push(mine);
        }
        Ok(())
    }

    fn spawn_server(&mut self, node: usize, spec: Spec, addr: SocketAddr) -> anyhow::Result<()> {
        let index = 1000 + self.servers.len();
        let proc = Proc::start(spec, &self.dir, index, self.sink.clone())?;
        let http = SocketAddr::new(addr.ip(), HTTP_PORT);
        self.servers.push(Server {
            node,
            proc,
            addr,
            http,
        });
        Ok(())
    }

    /// The gRPC addresses of node `n`'s replicas, started or held.
    fn addrs(&self, n: usize) -> Vec<SocketAddr> {
        let started = self.replicas(n).map(|s| s.addr);
        let held = self.held.iter().filter(|h| h.0 == n).map(|h| h.2);
        started.chain(held).collect()
    }

    fn start_clients(&mut self, t0: Option<f64>) -> anyhow::Result<()> {
        let mut hosts: std::collections::HashMap<String, Host> = Default::default();
        for (i, c) in self.layout.clients.clone().into_iter().enumerate() {
            let host = match hosts.get(&c.host) {
                Some(h) => h.clone(),
                None => self.net.host(&c.host)?,
            };
            hosts.insert(c.host.clone(), host.clone());
            let servers = self.addrs(c.leaf);
            if c.proxied {
                self.start_proxy(i, &host, &servers)?;
            }
            let mut argv = self.client_argv(&c, &servers, None)?;
            let offset = self.layout.client_starts.as_ref().and_then(|s| s.get(i));
            if let (Some(t0), Some(off)) = (t0, offset) {
                argv.extend(["--start-at-mono".into(), format!("{:.3}", t0 + off)]);
            }
            let spec = Spec {
                name: c.name.clone(),
                clock: if c.kind == Kind::Go {
                    0
                } else {
                    self.layout.clock(&c.name)
                },
                host,
                argv,
                faketime: c.kind != Kind::Go,
                env: answers_logged(t0.is_some() && c.kind == Kind::Rust),
                stdin_closes: c.kind != Kind::Go,
            };
            let proc = Proc::start(spec, &self.dir, i, self.sink.clone())?;
            self.clients.push(Client { spec: c, proc });
        }
        Ok(())
    }

    /// A proxy on a host of its own for client `i` on `host`, one port per
    /// replica of its leaf (`servers`), and the client's connections to
    /// those replicas sent to it.
    fn start_proxy(&mut self, i: usize, host: &Host, servers: &[SocketAddr]) -> anyhow::Result<()> {
        let px = self.net.host(&format!("px-{i}"))?;
        let routes: Vec<(SocketAddr, SocketAddr)> = servers
            .iter()
            .enumerate()
            .map(|(k, s)| (SocketAddr::new(px.ip.into(), PROXY_PORT + k as u16), *s))
            .collect();
        let mut argv = vec![
            self.programs.harness.to_string_lossy().to_string(),
            "proxy".into(),
        ];
        for (listen, target) in &routes {
            argv.extend(["--route".into(), format!("{listen}={target}")]);
        }
        let spec = Spec {
            name: format!("proxy-{i}"),
            host: px,
            argv,
            faketime: false,
            env: Vec::new(),
            stdin_closes: true,
            clock: 0,
        };
        let proc = Proc::start(spec, &self.dir, 3000 + i, self.sink.clone())?;
        let dnat: Vec<_> = routes.iter().map(|(l, t)| (*t, *l)).collect();
        self.net.dnat(host, &dnat)?;
        self.proxies.push(Proxy { client: i, proc });
        Ok(())
    }

    /// The hosts client `c`'s packets to its leaf go to first: its proxy's,
    /// or the leaf's replicas'.
    pub fn client_peers(&self, c: usize) -> Vec<Host> {
        if let Some(p) = self.proxies.iter().find(|p| p.client == c) {
            return vec![p.proc.spec.host.clone()];
        }
        let leaf = self.clients[c].spec.leaf;
        self.replicas(leaf)
            .map(|s| s.proc.spec.host.clone())
            .collect()
    }

    /// Starts the mass clients: `procs` processes of `per_proc` clients
    /// each on their leaf, each process on a host of its own.
    pub fn start_mass(&mut self) -> anyhow::Result<()> {
        let Some(m) = self.layout.mass else {
            bail!("this tree has no mass clients");
        };
        let servers: Vec<SocketAddr> = self.replicas(m.leaf).map(|s| s.addr).collect();
        // Each start's processes print under indexes of their own; those of
        // an earlier start stay (their reports and lives are audited).
        let round = self.mass.len() / m.procs.max(1);
        for p in 0..m.procs {
            let name = format!("mass{p}");
            let host = match self.mass.iter().find(|c| c.spec.name == name) {
                Some(c) => c.proc.spec.host.clone(),
                None => self.net.host(&name)?,
            };
            let spec = ClientSpec {
                name: name.clone(),
                id: name.clone(),
                host: name.clone(),
                wants: 1.0,
                kind: Kind::Rust,
                leaf: m.leaf,
                proxied: false,
            };
            let argv = self.client_argv(&spec, &servers, Some(m.per_proc))?;
            let proc_spec = Spec {
                name,
                host,
                argv,
                faketime: false,
                env: Vec::new(),
                stdin_closes: true,
                clock: 0,
            };
            let index = 2000 + 100 * round + p;
            let proc = Proc::start(proc_spec, &self.dir, index, self.sink.clone())?;
            self.mass.push(Client { spec, proc });
        }
        Ok(())
    }

    /// Stops the mass clients (their leases released).
    pub fn stop_mass(&mut self) {
        for c in self.mass.iter_mut().filter(|c| c.proc.pid().is_some()) {
            c.proc.stop(Duration::from_secs(10));
        }
    }

    /// Tells client `c` to want `wants` from now on.
    pub fn send_wants(&mut self, c: usize, wants: f64) -> anyhow::Result<()> {
        self.clients[c].proc.send(&format!("wants {wants}"))?;
        self.wants.push((crate::clock::mono(), c, wants));
        Ok(())
    }

    /// What clients were told to want since the last call.
    pub fn wants_sent(&mut self) -> Vec<(f64, usize, f64)> {
        std::mem::take(&mut self.wants)
    }

    /// The replicas of node `n`.
    pub fn replicas(&self, n: usize) -> impl Iterator<Item = &Server> {
        self.servers.iter().filter(move |s| s.node == n)
    }

    /// Processes of the tree that exited by themselves since the last look
    /// (a crash: the harness stops processes only by its faults and at
    /// the end), by name.
    pub fn exited(&mut self) -> Vec<String> {
        let servers = self.servers.iter_mut().map(|s| &mut s.proc);
        let clients = self
            .clients
            .iter_mut()
            .chain(&mut self.mass)
            .map(|c| &mut c.proc);
        let proxies = self.proxies.iter_mut().map(|p| &mut p.proc);
        let members = self.etcd.members.iter_mut();
        let all = servers.chain(clients).chain(proxies).chain(members);
        all.filter_map(|p| p.exited_by_itself().then(|| p.spec.name.clone()))
            .collect()
    }

    /// Stops every process by its pid (clients first, then proxies and
    /// servers, then etcd); returns the names of servers that did not exit
    /// within 2 s of SIGTERM.
    pub fn stop(&mut self) -> Vec<String> {
        for c in self.clients.iter_mut().chain(&mut self.mass) {
            c.proc.stop(Duration::from_secs(4));
        }
        for p in &mut self.proxies {
            p.proc.stop(Duration::from_secs(1));
        }
        let mut slow = Vec::new();
        for s in &mut self.servers {
            if !s.proc.stop(Duration::from_secs(2)) {
                slow.push(s.proc.spec.name.clone());
            }
        }
        self.etcd.stop();
        slow
    }
}

/// A replayed scenario's Rust clients log when each answered request was
/// sent (`doorman_client::task` at debug), which
/// `scripts/upstream-trace.py --asks` reads beside the servers' logs.
fn answers_logged(on: bool) -> Vec<(String, String)> {
    if !on {
        return Vec::new();
    }
    let filter = "warn,doorman_client::task=debug";
    vec![("RUST_LOG".into(), filter.into())]
}
