//! The faults and when they happen: a seeded schedule of slots, each with
//! one fault or two at once, every kind at least once in the short
//! schedule (`--short`), drawn at random for as long as asked otherwise.
//!
//! Must not: touch a process (`faults.rs` does).

use crate::tree::{Kind, Layout};

/// One fault, aimed at a node (by index), a client (by index) or the
/// whole tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// kill -9 of the node's master; it is started again when the fault
    /// ends (as a standby).
    KillMaster(usize),
    /// SIGSTOP of the node's master past its election TTL, then SIGCONT.
    PauseMaster(usize),
    /// etcd stopped (SIGKILL), then started again on its data.
    EtcdDown,
    /// The node's master cut off from etcd (others still reach it).
    EtcdCut(usize),
    /// Every replica of the node cut off from every replica of its parent
    /// (its clients still reach it).
    CutFromParent(usize),
    /// The client cut off from its leaf, for longer than a lease.
    CutClient(usize),
    /// Every replica of the node cut off from its parent's and from its
    /// requesters (the replicas of the nodes below, or the clients on it);
    /// it still reaches etcd (the simulator's unreachable node).
    Unreachable(usize),
    /// The client's wall clock stepped this many seconds off, and back.
    SkewClient(usize, i64),
    /// The node master's wall clock stepped this many seconds off, and back.
    SkewMaster(usize, i64),
    /// The capacity pushed down to 60 %, and back.
    CapacityDown,
    /// The resource's template removed (it falls to the catch-all), and
    /// restored.
    RemoveTemplate,
    /// The algorithm changed to PROPORTIONAL_SHARE, and back.
    ChangeAlgorithm,
}

/// A slot: faults that start together, how long they last, and how long
/// the slot runs (they and the settling after them).
#[derive(Debug, Clone)]
pub struct Slot {
    /// The faults.
    pub faults: Vec<Fault>,
    /// How long each lasts, s.
    pub duration: f64,
    /// How long the slot runs, s.
    pub length: f64,
}

/// How long a fault lasts with leases of `lease` s and an election TTL of
/// `ttl` s: past the TTL for a pause, past a lease for a cut client or
/// subtree.
pub fn duration(f: &Fault, lease: f64, ttl: f64) -> f64 {
    match f {
        Fault::PauseMaster(_) => (2.5 * ttl).max(ttl + 4.0),
        Fault::CutFromParent(_) | Fault::CutClient(_) | Fault::Unreachable(_) => lease + 4.0,
        Fault::SkewClient(..) | Fault::SkewMaster(..) => lease + 6.0,
        _ => lease + 2.0,
    }
}

/// A small deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One of `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// +1 or -1.
    pub fn sign(&mut self) -> i64 {
        if self.next() & 1 == 0 {
            1
        } else {
            -1
        }
    }
}

/// The nodes and clients faults may be aimed at.
struct Targets {
    root: usize,
    mid: usize,
    leaves: Vec<usize>,
    /// Clients of our library (Rust or Python), by index.
    ours: Vec<usize>,
}

fn targets(l: &Layout) -> Targets {
    let faultable: Vec<usize> = (0..l.nodes.len())
        .filter(|&n| l.nodes[n].faultable)
        .collect();
    let leaves = faultable
        .iter()
        .copied()
        .filter(|&n| !l.nodes.iter().any(|c| c.parent == Some(n)))
        .collect();
    let ours = (0..l.clients.len())
        .filter(|&c| l.clients[c].kind != Kind::Go && l.nodes[l.clients[c].leaf].faultable)
        .collect();
    Targets {
        root: 0,
        mid: faultable.iter().copied().find(|&n| n != 0).unwrap_or(0),
        leaves,
        ours,
    }
}

/// Every kind at least once: a master killed or paused at each level
/// alone (their recovery is checked against a target), the other kinds in
/// pairs that hit different parts of the tree; order and targets drawn
/// from `seed`.
pub fn short(l: &Layout, seed: u64) -> Vec<Slot> {
    let mut rng = Rng::new(seed);
    let t = targets(l);
    let leaf = |r: &mut Rng| t.leaves[r.below(t.leaves.len())];
    let client = |r: &mut Rng| t.ours[r.below(t.ours.len())];
    let skew = |r: &mut Rng| 30 * r.sign();
    let s1 = skew(&mut rng);
    let mut plan: Vec<Vec<Fault>> = vec![
        vec![Fault::KillMaster(t.root)],
        vec![Fault::KillMaster(t.mid)],
        vec![Fault::KillMaster(leaf(&mut rng))],
        vec![Fault::PauseMaster(t.root)],
        vec![Fault::PauseMaster(t.mid)],
        vec![Fault::PauseMaster(leaf(&mut rng))],
        vec![Fault::EtcdDown],
        vec![
            Fault::EtcdCut(t.root),
            Fault::SkewClient(client(&mut rng), s1),
        ],
        vec![Fault::EtcdCut(leaf(&mut rng)), Fault::CapacityDown],
        vec![
            Fault::CutFromParent(leaf(&mut rng)),
            Fault::SkewClient(client(&mut rng), -s1),
        ],
        vec![
            Fault::CutClient(client(&mut rng)),
            Fault::SkewMaster(t.root, skew(&mut rng)),
        ],
        vec![
            Fault::SkewMaster(leaf(&mut rng), skew(&mut rng)),
            Fault::RemoveTemplate,
        ],
        vec![
            Fault::SkewMaster(t.mid, skew(&mut rng)),
            Fault::ChangeAlgorithm,
        ],
    ];
    for i in (1..plan.len()).rev() {
        plan.swap(i, rng.below(i + 1));
    }
    plan.into_iter().map(|f| slot(l, f)).collect()
}

/// Random slots (one fault, or two aimed at different parts) for
/// `seconds`.
pub fn long(l: &Layout, seed: u64, seconds: f64) -> Vec<Slot> {
    let mut rng = Rng::new(seed);
    let t = targets(l);
    let mut out = Vec::new();
    let mut total = 0.0;
    while total < seconds {
        let mut faults = vec![any(&mut rng, &t)];
        if rng.below(3) == 0 {
            let second = any(&mut rng, &t);
            if disjoint(&faults[0], &second) {
                faults.push(second);
            }
        }
        let s = slot(l, faults);
        total += s.length;
        out.push(s);
    }
    out
}

fn any(rng: &mut Rng, t: &Targets) -> Fault {
    let nodes = [vec![t.root, t.mid], t.leaves.clone()].concat();
    let node = nodes[rng.below(nodes.len())];
    let client = t.ours[rng.below(t.ours.len())];
    let leaf = t.leaves[rng.below(t.leaves.len())];
    match rng.below(11) {
        0 => Fault::KillMaster(node),
        1 => Fault::PauseMaster(node),
        2 => Fault::EtcdDown,
        3 => Fault::EtcdCut(node),
        4 => Fault::CutFromParent(leaf),
        5 => Fault::CutClient(client),
        6 => Fault::SkewClient(client, 30 * rng.sign()),
        7 => Fault::SkewMaster(node, 30 * rng.sign()),
        8 => Fault::CapacityDown,
        9 => Fault::RemoveTemplate,
        _ => Fault::ChangeAlgorithm,
    }
}

/// Two faults that may run together: not both on the config or etcd, not
/// both on the same node.
fn disjoint(a: &Fault, b: &Fault) -> bool {
    let part = |f: &Fault| match f {
        Fault::KillMaster(n)
        | Fault::PauseMaster(n)
        | Fault::EtcdCut(n)
        | Fault::CutFromParent(n)
        | Fault::Unreachable(n)
        | Fault::SkewMaster(n, _) => format!("node{n}"),
        Fault::CutClient(c) | Fault::SkewClient(c, _) => format!("client{c}"),
        Fault::EtcdDown => "etcd".into(),
        Fault::CapacityDown | Fault::RemoveTemplate | Fault::ChangeAlgorithm => "config".into(),
    };
    let (pa, pb) = (part(a), part(b));
    pa != pb
        && !(pa == "etcd" && matches!(b, Fault::EtcdCut(_)))
        && !(pb == "etcd" && matches!(a, Fault::EtcdCut(_)))
}

/// A slot of `faults`: as long as the longest, then time to settle: a
/// lease and a few seconds, or after etcd was down, two leases and two
/// TTLs (every node elects again and a new master may learn a lease long).
fn slot(l: &Layout, faults: Vec<Fault>) -> Slot {
    let (lease, ttl) = (l.terms.lease as f64, l.terms.ttl as f64);
    let duration = faults
        .iter()
        .map(|f| duration(f, lease, ttl))
        .fold(0.0, f64::max);
    let settle = if faults.contains(&Fault::EtcdDown) {
        2.0 * (lease + ttl)
    } else {
        lease + 4.0
    };
    Slot {
        faults,
        duration,
        length: duration + settle,
    }
}

/// A slot from the command line: faults joined by `+`, each one of
/// `kill:NODE`, `pause:NODE`, `etcd-down`, `etcd-cut:NODE`,
/// `cut-parent:NODE`, `cut-client:CLIENT`, `skew-client:CLIENT:SECS`,
/// `skew-master:NODE:SECS`, `capacity-down`, `remove-template`,
/// `change-algorithm` (nodes and clients by name: `root`, `mid`,
/// `leafA`, `rust-a0`, …).
pub fn parse_slot(spec: &str, l: &Layout) -> anyhow::Result<Slot> {
    let faults = spec
        .split('+')
        .map(|f| parse_fault(f.trim(), l))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(slot(l, faults))
}

fn parse_fault(spec: &str, l: &Layout) -> anyhow::Result<Fault> {
    let parts: Vec<&str> = spec.split(':').collect();
    let node = |i: usize| {
        let name = parts.get(i).copied().unwrap_or("");
        l.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| anyhow::anyhow!("{spec}: no node {name:?}"))
    };
    let client = |i: usize| {
        let name = parts.get(i).copied().unwrap_or("");
        l.clients
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| anyhow::anyhow!("{spec}: no client {name:?}"))
    };
    let secs = |i: usize| -> anyhow::Result<i64> {
        let v = parts.get(i).copied().unwrap_or("");
        v.parse()
            .map_err(|_| anyhow::anyhow!("{spec}: {v:?} is not a number of seconds"))
    };
    Ok(match parts[0] {
        "kill" => Fault::KillMaster(node(1)?),
        "pause" => Fault::PauseMaster(node(1)?),
        "etcd-down" => Fault::EtcdDown,
        "etcd-cut" => Fault::EtcdCut(node(1)?),
        "cut-parent" => Fault::CutFromParent(node(1)?),
        "cut-client" => Fault::CutClient(client(1)?),
        "unreachable" => Fault::Unreachable(node(1)?),
        "skew-client" => Fault::SkewClient(client(1)?, secs(2)?),
        "skew-master" => Fault::SkewMaster(node(1)?, secs(2)?),
        "capacity-down" => Fault::CapacityDown,
        "remove-template" => Fault::RemoveTemplate,
        "change-algorithm" => Fault::ChangeAlgorithm,
        other => anyhow::bail!("unknown fault {other:?}"),
    })
}

/// A fault's name for reports, with the layout's names.
pub fn name(f: &Fault, l: &Layout) -> String {
    let node = |n: &usize| l.nodes.get(*n).map_or("?", |x| x.name.as_str()).to_string();
    let client = |c: &usize| {
        l.clients
            .get(*c)
            .map_or("?", |x| x.name.as_str())
            .to_string()
    };
    match f {
        Fault::KillMaster(n) => format!("kill -9 {} master", node(n)),
        Fault::PauseMaster(n) => format!("SIGSTOP {} master", node(n)),
        Fault::EtcdDown => "etcd stopped".into(),
        Fault::EtcdCut(n) => format!("{} master cut from etcd", node(n)),
        Fault::CutFromParent(n) => format!("{} cut from its parent", node(n)),
        Fault::CutClient(c) => format!("{} cut from its leaf", client(c)),
        Fault::Unreachable(n) => format!("{} unreachable", node(n)),
        Fault::SkewClient(c, s) => format!("{} clock {s:+} s", client(c)),
        Fault::SkewMaster(n, s) => format!("{} master clock {s:+} s", node(n)),
        Fault::CapacityDown => "capacity pushed to 60 %".into(),
        Fault::RemoveTemplate => "template removed".into(),
        Fault::ChangeAlgorithm => "algorithm changed".into(),
    }
}
