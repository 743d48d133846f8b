//! The faults and when they happen: a seeded schedule of slots, each with
//! one fault or two at once. The short schedule (CI's) has every kind
//! alone once (the master faults once per level) and every kind added
//! with the lowered-grant and paused-client work in at least one pair;
//! the long one has the short one's slots and slots drawn at random
//! beside them, for as long as asked.
//!
//! Must not: touch a process (`faults/` does).

use crate::rng::Rng;
use crate::tree::{Kind, Layout};

/// One fault, aimed at a node (by index), a client (by index) or the
/// whole tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// kill -9 of the node's master; it is started again when the fault
    /// ends (as a standby), its wall clock off by ±30 s or ±1 h.
    KillMaster(usize),
    /// SIGSTOP of the node's master past its election TTL, then SIGCONT.
    PauseMaster(usize),
    /// Every etcd member stopped (SIGKILL), then started again on its data.
    EtcdDown,
    /// One etcd member that does not lead killed, then started again.
    EtcdMemberDown,
    /// The etcd leader killed, then started again.
    EtcdLeaderDown,
    /// Two of the three etcd members killed (quorum lost), then started
    /// again (quorum regained).
    EtcdQuorumLost,
    /// An etcd member that does not lead removed, its data wiped, added
    /// back and started to join the cluster again.
    EtcdWiped,
    /// The node's master cut off from every etcd member.
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
    /// The client's answers lost on the way back (its requests arrive).
    AnswersLost(usize),
    /// The client's requests lost (answers to it would pass).
    RequestsLost(usize),
    /// The (proxied) client's grant raised (the others on its leaf want
    /// less for a while), then lowered while its proxy swallows the
    /// answers to it: it holds the higher lease to its end, which its leaf
    /// must count.
    LoweringLost(usize),
    /// A third of the packets between the node's replicas and its
    /// parent's dropped at random, both ways.
    Lossy(usize),
    /// The proxied client's packets delayed 300–800 ms, both ways.
    Delay(usize),
    /// The client stopped (SIGSTOP) past its lease and resumed behind a
    /// partition from its leaf, mended a few seconds later.
    PauseClient(usize),
    /// The client killed (kill -9), started again when the fault ends
    /// with its wall clock off by ±30 s or ±1 h.
    KillClient(usize),
    /// A thousand clients on the mass leaf, its master killed: they
    /// reconnect to the successor at once.
    MassReconnect,
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
    /// A config that fails validation written to etcd (around `doorman
    /// config push`'s check): the root must reject it and keep its config.
    InvalidConfig,
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

/// The tree's terms a slot's times follow: lease length, the root's
/// refresh interval and the election TTL, s.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Root lease length.
    pub lease: f64,
    /// Root refresh interval.
    pub refresh: f64,
    /// Election TTL.
    pub ttl: f64,
}

/// How long a fault lasts: past the TTL for a paused master, past a
/// lease for a cut, a one-way loss or a paused client (so that a lease
/// runs out during it); for a killed process, long enough that its
/// successor (or its leaf) has moved on before it starts again; briefly
/// for what changes no lease.
pub fn duration(f: &Fault, t: Times) -> f64 {
    match f {
        Fault::PauseMaster(_) => (2.5 * t.ttl).max(t.ttl + 4.0),
        Fault::KillMaster(_) => t.ttl + 4.0,
        Fault::CutFromParent(_)
        | Fault::CutClient(_)
        | Fault::Unreachable(_)
        | Fault::AnswersLost(_)
        | Fault::RequestsLost(_)
        | Fault::PauseClient(_) => t.lease + 4.0,
        Fault::LoweringLost(_) => t.lease + 10.0,
        Fault::EtcdMemberDown | Fault::EtcdLeaderDown | Fault::EtcdWiped => 10.0,
        Fault::KillClient(_)
        | Fault::SkewClient(..)
        | Fault::SkewMaster(..)
        | Fault::Delay(_)
        | Fault::InvalidConfig => 8.0,
        Fault::MassReconnect => 2.0 * t.ttl + 10.0,
        Fault::EtcdDown
        | Fault::EtcdQuorumLost
        | Fault::EtcdCut(_)
        | Fault::Lossy(_)
        | Fault::CapacityDown
        | Fault::RemoveTemplate
        | Fault::ChangeAlgorithm => t.lease + 2.0,
    }
}

/// How long the tree settles after a fault: after every etcd member or
/// quorum was lost, two leases and two TTLs (every node elects again and
/// a new master may learn a lease long), after etcd's leader was killed a
/// lease, a TTL and 4 s; a lease after the mass
/// reconnect; a few seconds after what changes no lease; else two refresh
/// intervals and a TTL (a master lost is replaced within a TTL, and a
/// client back from a cut asks within an interval and has its share at
/// the others' next). A tree still settling when the next slot begins is
/// one more fault for it, not a gap in the audit: Σ is audited all along.
fn settle(f: &Fault, t: Times) -> f64 {
    match f {
        Fault::EtcdDown | Fault::EtcdQuorumLost => 2.0 * (t.lease + t.ttl),
        // etcd electing a new leader can outlast the election TTL on a
        // loaded machine: every master then steps down and its successor
        // learns (two 30-minute runs dipped to 0 and the next slot, a lone
        // master fault, was charged 8 s of it).
        Fault::EtcdLeaderDown => t.lease + t.ttl + 4.0,
        Fault::EtcdMemberDown | Fault::EtcdWiped | Fault::InvalidConfig | Fault::Delay(_) => 4.0,
        Fault::MassReconnect => t.lease,
        _ => 2.0 * t.refresh + t.ttl,
    }
}

/// The nodes and clients faults may be aimed at.
pub(crate) struct Targets {
    root: usize,
    mid: usize,
    leaves: Vec<usize>,
    /// Clients of our library (Rust or Python), by index.
    ours: Vec<usize>,
    /// Those behind a proxy.
    proxied: Vec<usize>,
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
    let ours: Vec<usize> = (0..l.clients.len())
        .filter(|&c| l.clients[c].kind != Kind::Go && l.nodes[l.clients[c].leaf].faultable)
        .collect();
    Targets {
        root: 0,
        mid: faultable.iter().copied().find(|&n| n != 0).unwrap_or(0),
        leaves,
        proxied: ours
            .iter()
            .copied()
            .filter(|&c| l.clients[c].proxied)
            .collect(),
        ours: ours
            .into_iter()
            .filter(|&c| !l.clients[c].proxied)
            .collect(),
    }
}

/// The short schedule: see the module doc; order and targets drawn from
/// `seed`. Without mass clients or a proxied client, their faults are
/// left out.
pub fn short(l: &Layout, seed: u64) -> Vec<Slot> {
    let mut rng = Rng::new(seed);
    let t = targets(l);
    let leaf = |r: &mut Rng| t.leaves[r.below(t.leaves.len())];
    let client = |r: &mut Rng| t.ours[r.below(t.ours.len())];
    let skew = |r: &mut Rng| crate::tree::offset(r);
    let s1 = skew(&mut rng);
    let mut plan: Vec<Vec<Fault>> = vec![
        vec![Fault::KillMaster(t.root)],
        vec![Fault::KillMaster(t.mid)],
        vec![Fault::KillMaster(leaf(&mut rng))],
        vec![Fault::PauseMaster(t.root)],
        vec![Fault::PauseMaster(t.mid)],
        vec![Fault::PauseMaster(leaf(&mut rng))],
        vec![Fault::EtcdDown],
        vec![Fault::EtcdMemberDown],
        vec![Fault::EtcdLeaderDown],
        vec![Fault::EtcdQuorumLost],
        vec![Fault::EtcdWiped],
        vec![Fault::CutFromParent(t.mid)],
        vec![Fault::Unreachable(leaf(&mut rng))],
        vec![Fault::AnswersLost(client(&mut rng))],
        vec![Fault::RequestsLost(client(&mut rng))],
        vec![Fault::Lossy(leaf(&mut rng))],
        vec![Fault::PauseClient(client(&mut rng))],
        vec![Fault::KillClient(client(&mut rng))],
        vec![Fault::InvalidConfig],
        // Pairs: every kind the lowered-grant and paused-client work added
        // beside another, and the older kinds that are never alone.
        vec![
            Fault::EtcdCut(t.root),
            Fault::SkewClient(client(&mut rng), s1),
        ],
        vec![
            Fault::CutClient(client(&mut rng)),
            Fault::SkewMaster(t.root, skew(&mut rng)),
        ],
        vec![Fault::AnswersLost(client(&mut rng)), Fault::EtcdMemberDown],
        vec![Fault::RequestsLost(client(&mut rng)), Fault::InvalidConfig],
        vec![Fault::Lossy(leaf(&mut rng)), Fault::RemoveTemplate],
        vec![Fault::PauseClient(client(&mut rng)), Fault::ChangeAlgorithm],
        vec![Fault::KillClient(client(&mut rng)), Fault::EtcdWiped],
        vec![Fault::Unreachable(leaf(&mut rng)), Fault::EtcdQuorumLost],
        vec![Fault::CutFromParent(leaf(&mut rng)), Fault::CapacityDown],
    ];
    plan.extend(optional(l, &t, &mut rng));
    for i in (1..plan.len()).rev() {
        plan.swap(i, rng.below(i + 1));
    }
    plan.into_iter().map(|f| slot(l, f)).collect()
}

/// The short schedule's slots for the parts a layout may leave out: the
/// proxied client's (delay, a lowering lost) and the mass clients'.
fn optional(l: &Layout, t: &Targets, rng: &mut Rng) -> Vec<Vec<Fault>> {
    let mut plan = Vec::new();
    if let Some(&c) = t.proxied.first() {
        let leaf = t.leaves[rng.below(t.leaves.len())];
        plan.push(vec![Fault::Delay(c)]);
        plan.push(vec![Fault::Delay(c), Fault::PauseMaster(leaf)]);
        plan.push(vec![Fault::LoweringLost(c)]);
        plan.push(vec![Fault::LoweringLost(c), Fault::EtcdLeaderDown]);
    }
    if l.mass.is_some() {
        plan.push(vec![Fault::MassReconnect]);
        plan.push(vec![
            Fault::MassReconnect,
            Fault::SkewMaster(t.mid, crate::tree::offset(rng)),
        ]);
    }
    plan
}

/// The short schedule's slots (every kind alone and in pairs), then
/// random ones (one fault, or two aimed at different parts) until
/// `seconds` are planned, all in a seeded order: a long run covers what
/// the short one does, whatever the draw.
pub fn long(l: &Layout, seed: u64, seconds: f64) -> Vec<Slot> {
    let mut out = short(l, seed);
    let mut rng = Rng::new(seed ^ 0x10_46);
    let t = targets(l);
    let mut total: f64 = out.iter().map(|s| s.length).sum();
    while total < seconds {
        let mut faults = vec![any(&mut rng, &t, l)];
        if rng.below(3) == 0 {
            let second = any(&mut rng, &t, l);
            if disjoint(&faults[0], &second) {
                faults.push(second);
            }
        }
        let s = slot(l, faults);
        total += s.length;
        out.push(s);
    }
    for i in (1..out.len()).rev() {
        out.swap(i, rng.below(i + 1));
    }
    out
}

fn any(rng: &mut Rng, t: &Targets, l: &Layout) -> Fault {
    let nodes = [vec![t.root, t.mid], t.leaves.clone()].concat();
    let node = nodes[rng.below(nodes.len())];
    let client = t.ours[rng.below(t.ours.len())];
    let leaf = t.leaves[rng.below(t.leaves.len())];
    let below_root = [vec![t.mid], t.leaves.clone()].concat();
    let cut = below_root[rng.below(below_root.len())];
    match rng.below(25) {
        0 => Fault::KillMaster(node),
        1 => Fault::PauseMaster(node),
        2 => Fault::EtcdDown,
        3 => Fault::EtcdCut(node),
        4 => Fault::CutFromParent(cut),
        5 => Fault::CutClient(client),
        6 => Fault::SkewClient(client, crate::tree::offset(rng)),
        7 => Fault::SkewMaster(node, crate::tree::offset(rng)),
        8 => Fault::CapacityDown,
        9 => Fault::RemoveTemplate,
        10 => Fault::ChangeAlgorithm,
        11 => Fault::EtcdMemberDown,
        12 => Fault::EtcdLeaderDown,
        13 => Fault::EtcdQuorumLost,
        14 => Fault::EtcdWiped,
        15 => Fault::Unreachable(cut),
        16 => Fault::AnswersLost(client),
        17 => Fault::RequestsLost(client),
        18 => match t.proxied.first() {
            Some(&c) => Fault::LoweringLost(c),
            None => Fault::AnswersLost(client),
        },
        19 => Fault::Lossy(leaf),
        20 => Fault::PauseClient(client),
        21 => Fault::KillClient(client),
        22 => Fault::InvalidConfig,
        23 if l.mass.is_some() => Fault::MassReconnect,
        _ => match t.proxied.first() {
            Some(&c) => Fault::Delay(c),
            None => Fault::KillMaster(node),
        },
    }
}

/// What part of the tree a fault touches, to keep two of a slot apart.
fn part(f: &Fault) -> String {
    match f {
        Fault::KillMaster(n)
        | Fault::PauseMaster(n)
        | Fault::EtcdCut(n)
        | Fault::CutFromParent(n)
        | Fault::Unreachable(n)
        | Fault::Lossy(n)
        | Fault::SkewMaster(n, _) => format!("node{n}"),
        Fault::CutClient(c)
        | Fault::SkewClient(c, _)
        | Fault::AnswersLost(c)
        | Fault::RequestsLost(c)
        | Fault::PauseClient(c)
        | Fault::KillClient(c)
        | Fault::Delay(c) => format!("client{c}"),
        Fault::EtcdDown
        | Fault::EtcdMemberDown
        | Fault::EtcdLeaderDown
        | Fault::EtcdQuorumLost
        | Fault::EtcdWiped => "etcd".into(),
        // It changes the others' wants: the config's part.
        Fault::LoweringLost(_) => "demand".into(),
        Fault::MassReconnect => "mass".into(),
        Fault::CapacityDown
        | Fault::RemoveTemplate
        | Fault::ChangeAlgorithm
        | Fault::InvalidConfig => "config".into(),
    }
}

/// Two faults that may run together: not both on the config, the demand
/// or etcd, not both on the same node or client, and nothing that needs
/// etcd while it has no quorum: a config push (it cannot be written then)
/// or the mass reconnect (it kills the mass leaf's master and waits for a
/// successor, and no master is elected, or stays one, without etcd).
pub(crate) fn disjoint(a: &Fault, b: &Fault) -> bool {
    let (pa, pb) = (part(a), part(b));
    let etcd_cut = |f: &Fault| matches!(f, Fault::EtcdCut(_));
    let no_quorum = |f: &Fault| matches!(f, Fault::EtcdDown | Fault::EtcdQuorumLost);
    let needs_etcd = |p: &str| p == "config" || p == "mass";
    let lowering = |p: &str| p == "demand" || p == "config";
    pa != pb
        && !(pa == "etcd" && etcd_cut(b))
        && !(pb == "etcd" && etcd_cut(a))
        && !(lowering(&pa) && lowering(&pb))
        && !(needs_etcd(&pa) && no_quorum(b))
        && !(needs_etcd(&pb) && no_quorum(a))
}

/// A slot of `faults`: as long as the longest, then as long as the
/// longest settling.
pub(crate) fn slot(l: &Layout, faults: Vec<Fault>) -> Slot {
    let t = Times {
        lease: l.terms.lease as f64,
        refresh: l.terms.refresh as f64,
        ttl: l.terms.ttl as f64,
    };
    let duration = faults.iter().map(|f| duration(f, t)).fold(0.0, f64::max);
    let settle = faults.iter().map(|f| settle(f, t)).fold(0.0, f64::max);
    Slot {
        faults,
        duration,
        length: duration + settle,
    }
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
        Fault::EtcdMemberDown => "an etcd member killed".into(),
        Fault::EtcdLeaderDown => "the etcd leader killed".into(),
        Fault::EtcdQuorumLost => "etcd quorum lost".into(),
        Fault::EtcdWiped => "an etcd member wiped".into(),
        Fault::EtcdCut(n) => format!("{} master cut from etcd", node(n)),
        Fault::CutFromParent(n) => format!("{} cut from its parent", node(n)),
        Fault::CutClient(c) => format!("{} cut from its leaf", client(c)),
        Fault::Unreachable(n) => format!("{} unreachable", node(n)),
        Fault::AnswersLost(c) => format!("{}'s answers lost", client(c)),
        Fault::RequestsLost(c) => format!("{}'s requests lost", client(c)),
        Fault::LoweringLost(c) => format!("{} lowered, answers lost", client(c)),
        Fault::Lossy(n) => format!("{} ↔ parent 33 % loss", node(n)),
        Fault::Delay(c) => format!("{} delayed 300–800 ms", client(c)),
        Fault::PauseClient(c) => format!("SIGSTOP {} past its lease", client(c)),
        Fault::KillClient(c) => format!("kill -9 {}", client(c)),
        Fault::MassReconnect => "1 000 clients reconnect".into(),
        Fault::SkewClient(c, s) => format!("{} clock {s:+} s", client(c)),
        Fault::SkewMaster(n, s) => format!("{} master clock {s:+} s", node(n)),
        Fault::CapacityDown => "capacity pushed to 60 %".into(),
        Fault::RemoveTemplate => "template removed".into(),
        Fault::ChangeAlgorithm => "algorithm changed".into(),
        Fault::InvalidConfig => "invalid config pushed".into(),
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
