//! The tree under test, as laid out before it runs: its nodes of replicas
//! electing through etcd, its clients of three kinds on the leaves, the
//! wall clock each process starts with, and the config pushed to the root.
//!
//! Default tree: a root pair, an intermediate ("mid") pair, two leaf pairs
//! with Rust and Python clients (one Rust client of leaf A behind a proxy
//! that can delay its packets), a leaf pair for a thousand clients that
//! run only while their fault does (`Mass`), and a one-replica leaf for
//! the original Go clients, which keep their last capacity when their
//! server is gone (no timer at a lease's end, no deadline on an RPC: see
//! docs/faults.md), so no fault is aimed at that
//! leaf itself. Processes of ours start with their wall clocks off by
//! ±30 s or ±1 h (drawn from the seed): leases must not depend on them.
//!
//! Must not: start anything (`world.rs`), inject faults (`faults/`) or
//! judge (`audit.rs`).

use std::path::PathBuf;

use crate::rng::Rng;

/// The resource our clients (Rust, Python) use.
pub const RESOURCE: &str = "faults/db";
/// The resource the original Go clients use: their own, so what their
/// five-second refresh costs (below) does not blur what the tree does for
/// ours.
pub const LEGACY_RESOURCE: &str = "faults/legacy";
/// Its capacity (two Go clients want 60).
pub const LEGACY_CAPACITY: f64 = 50.0;
/// The resource of the thousand clients of [`Mass`].
pub const MASS_RESOURCE: &str = "faults/mass";
/// Its capacity.
pub const MASS_CAPACITY: f64 = 100.0;
/// Its root refresh interval, s (2 s at its leaf, two levels down): a
/// thousand clients refreshing every 2 s keep a debug build of the leaf
/// busy without starving the rest of the tree on two cores.
pub const MASS_REFRESH: i64 = 8;
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
    /// The Rust clients' RPC deadline, ms (`ClientBuilder::rpc_timeout`;
    /// a request renewing a lease gets half its refresh interval when
    /// that is shorter).
    pub rpc_timeout_ms: u64,
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
            rpc_timeout_ms: 2_000,
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
    /// Its packets to the leaf go through a proxy that can delay them.
    pub proxied: bool,
}

/// The thousand clients of one leaf that reconnect at once when its
/// master fails: several processes, each with many `Client`s.
#[derive(Debug, Clone, Copy)]
pub struct Mass {
    /// Their leaf.
    pub leaf: usize,
    /// Processes.
    pub procs: usize,
    /// Clients per process.
    pub per_proc: usize,
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `doorman` binary.
    pub doorman: PathBuf,
    /// This harness (its `client`, `probe` and `proxy` subcommands).
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
    /// The mass clients' leaf, if the tree has one.
    pub mass: Option<Mass>,
    /// Wall clock offsets at start, s, by process name (others: 0).
    pub clocks: Vec<(String, i64)>,
    /// Mutual TLS and tokens on every link (`secure.rs`).
    pub secure: bool,
    /// The self-test's client that ignores its lease's end, by name.
    pub liar: Option<String>,
    /// Held back at start, each client to first ask this many seconds
    /// after a time given later (`World::start_clients_at`; a replayed
    /// plan's `start_ms`); `None`: every client starts with the servers.
    pub client_starts: Option<Vec<f64>>,
}

impl Layout {
    /// The default tree (see the module doc); Python and Go clients only
    /// where their programs are given; clocks drawn from `seed`.
    pub fn default_tree(p: &Programs, terms: Terms, seed: u64) -> Layout {
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
            node("leafC", Some(1), 2, false),
        ];
        let mut clients = Vec::new();
        let mut add = |name: String, kind, leaf| {
            clients.push(ClientSpec {
                id: name.clone(),
                host: name.clone(),
                proxied: name == "rust-a2",
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
            let g = nodes.len() - 1;
            for i in 0..2 {
                add(format!("go-{i}"), Kind::Go, g);
            }
        }
        Layout {
            clocks: start_clocks(seed, p.python.is_some()),
            nodes,
            clients,
            terms,
            config: None,
            resource: RESOURCE.into(),
            mass: Some(Mass {
                leaf: 4,
                procs: 4,
                per_proc: 250,
            }),
            secure: false,
            liar: None,
            client_starts: None,
        }
    }

    /// The wall clock offset process `name` starts with.
    pub fn clock(&self, name: &str) -> i64 {
        self.clocks.iter().find(|c| c.0 == name).map_or(0, |c| c.1)
    }

    /// The root's config: the resource under test, and a catch-all
    /// template it falls back to when its own is removed.
    pub fn config(&self, capacity: f64, kind: &str, with_own: bool) -> String {
        let t = self.terms;
        let template = |glob: &str, capacity: f64, kind: &str, refresh: i64| {
            format!(
                "[[resources]]\nidentifier_glob = \"{glob}\"\ncapacity = {capacity}\n\
                 [resources.algorithm]\nkind = \"{kind}\"\nlease_length = {}\nrefresh_interval = {refresh}\n\n",
                t.lease
            )
        };
        let mut text = template(LEGACY_RESOURCE, LEGACY_CAPACITY, "FAIR_SHARE", t.refresh);
        if self.mass.is_some() {
            text += &template(MASS_RESOURCE, MASS_CAPACITY, "FAIR_SHARE", MASS_REFRESH);
        }
        if with_own {
            text += &template(RESOURCE, capacity, kind, t.refresh);
        }
        text + &template("*", FALLBACK_SHARE * t.capacity, "FAIR_SHARE", t.refresh)
    }
}

/// The catch-all template's capacity, as a share of the resource's.
pub const FALLBACK_SHARE: f64 = 0.6;

/// Offsets that processes of ours start with: a replica of every node, a
/// client of each leaf and kind, each ±30 s or ±1 h (the original Go
/// clients' leaf and the Go clients compare absolute times by design, and
/// keep their true clock).
fn start_clocks(seed: u64, python: bool) -> Vec<(String, i64)> {
    let mut rng = Rng::new(seed ^ 0xC10C);
    let mut names = vec![
        "root2", "mid1", "leafA2", "leafB1", "leafC2", "rust-a0", "rust-b1",
    ];
    if python {
        names.push("py-b0");
    }
    names
        .into_iter()
        .map(|n| (n.to_string(), offset(&mut rng)))
        .collect()
}

/// A wall clock offset: ±30 s or ±1 h.
pub fn offset(rng: &mut Rng) -> i64 {
    let size = if rng.below(2) == 0 { 30 } else { 3600 };
    size * rng.sign()
}

/// Replica `r`'s name: the node's name and `r + 1` (`root1`), with a dash
/// when the name ends in a digit (`n1.2-1`).
pub fn replica_name(node: &str, r: usize) -> String {
    let dash = if node.ends_with(|c: char| c.is_ascii_digit()) {
        "-"
    } else {
        ""
    };
    format!("{node}{dash}{}", r + 1)
}

/// Addresses, comma-separated.
pub(crate) fn join<T: std::fmt::Display>(addrs: &[T]) -> String {
    addrs.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}
