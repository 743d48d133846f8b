//! The harness's network: each process of the tree runs on its own "host",
//! a network namespace with one address on a private bridge, so what
//! reaches a host from another can be dropped the way a firewall or a
//! broken switch drops it (no reset, no refusal: the sender just hears
//! nothing), whatever address a redirect or a Discovery names. A rule is
//! directional, in the receiving host's input chain: packets from one
//! host to another are passed, dropped, or dropped at random (nftables
//! `numgen random`); a cut is both directions dropped, a one-way loss one
//! of them. Every rule counts what it dropped and what passed after it
//! ([`Net::counters`]), so a fault is shown to have happened, not believed
//! because `nft` exited 0. The harness itself reaches every host through
//! the bridge's own address; nothing is bound outside the bridge's private
//! subnet, and everything is removed when the [`Net`] is dropped.
//!
//! Must not: touch any interface, namespace or rule it did not create.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use anyhow::{bail, Context};

/// One host: a network namespace and its address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Host {
    /// The namespace's name.
    pub ns: String,
    /// Its address on the bridge.
    pub ip: Ipv4Addr,
}

/// What happens to packets from one host to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// All dropped.
    Drop,
    /// This percentage dropped at random.
    Lossy(u8),
    /// All pass, counted (the other way of a one-way loss).
    Count,
}

/// The bridge, its hosts and the rules between them.
#[derive(Debug)]
pub struct Net {
    tag: String,
    subnet: [u8; 3],
    bridge: String,
    hosts: Vec<Host>,
    /// (from, to) → what happens to packets from `from` arriving at `to`.
    rules: BTreeMap<(Host, Host), Rule>,
}

/// Packets from one host to another as a rule counted them: dropped, and
/// passed after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    /// Dropped by the rule.
    pub dropped: u64,
    /// Passed (after the rule, or with no rule at all: not counted).
    pub passed: u64,
}

/// Runs `ip`, `nft` or `sysctl`, failing with what it printed; returns
/// its output.
fn run(cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {cmd} (iproute2 and nftables are needed)"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

fn in_ns(ns: &str, cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut all = vec!["netns", "exec", ns, cmd];
    all.extend_from_slice(args);
    run("ip", &all)
}

impl Net {
    /// A bridge on a /24 of 10.0.0.0/8 chosen from `tag` (so concurrent
    /// runs do not meet), with address .1 for the harness. Needs root (or
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN).
    pub fn new(tag: u32) -> anyhow::Result<Net> {
        let subnet = [10, 100 + (tag % 100) as u8, (tag / 100 % 250) as u8];
        let tag = format!("dmf{}", tag % 100_000);
        let bridge = format!("{tag}br");
        run("ip", &["link", "add", &bridge, "type", "bridge"]).context(
            "creating the harness's bridge (run as root: network namespaces are needed)",
        )?;
        let net = Net {
            tag,
            subnet,
            bridge,
            hosts: Vec::new(),
            rules: BTreeMap::new(),
        };
        let own = format!("{}/24", net.ip(1));
        run("ip", &["addr", "add", &own, "dev", &net.bridge])?;
        run("ip", &["link", "set", &net.bridge, "up"])?;
        Ok(net)
    }

    fn ip(&self, last: u8) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, last)
    }

    /// A new host named `label`.
    pub fn host(&mut self, label: &str) -> anyhow::Result<Host> {
        let n = self.hosts.len() + 2;
        if n > 250 {
            bail!("too many hosts");
        }
        let host = Host {
            ns: format!("{}-{label}", self.tag),
            ip: self.ip(n as u8),
        };
        let (outer, inner) = (format!("{}a{n}", self.tag), format!("{}b{n}", self.tag));
        run("ip", &["netns", "add", &host.ns])?;
        self.hosts.push(host.clone());
        let veth = [
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ];
        run("ip", &veth)?;
        run("ip", &["link", "set", &inner, "netns", &host.ns])?;
        run("ip", &["link", "set", &outer, "master", &self.bridge])?;
        run("ip", &["link", "set", &outer, "up"])?;
        let addr = format!("{}/24", host.ip);
        in_ns(&host.ns, "ip", &["addr", "add", &addr, "dev", &inner])?;
        in_ns(&host.ns, "ip", &["link", "set", &inner, "up"])?;
        in_ns(&host.ns, "ip", &["link", "set", "lo", "up"])?;
        self.render(&host, &BTreeMap::new())?;
        Ok(host)
    }

    /// Packets from `from` to `to` follow `rule` from now on (`None`:
    /// all pass).
    pub fn set(&mut self, from: &Host, to: &Host, rule: Option<Rule>) -> anyhow::Result<()> {
        let key = (from.clone(), to.clone());
        let before = match rule {
            Some(r) => self.rules.insert(key, r),
            None => self.rules.remove(&key),
        };
        if before != rule {
            // The chain is written afresh: the other rules at `to` keep
            // what they counted (a fault's proof must not be wiped by
            // another's rule on the same host); this one starts at 0.
            let mut kept = self.chain_counts(to).unwrap_or_default();
            kept.retain(|comment, _| !comment.ends_with(&format!(" {}", from.ip)));
            self.render(to, &kept)?;
        }
        Ok(())
    }

    /// Packets each rule of `host`'s chain counted, by the rule's comment
    /// (`drop IP`, `pass IP`).
    fn chain_counts(&self, host: &Host) -> anyhow::Result<BTreeMap<String, u64>> {
        let text = in_ns(
            &host.ns,
            "nft",
            &["-j", "list", "chain", "inet", "dmf", "in"],
        )?;
        let v: serde_json::Value = serde_json::from_str(&text).context("nft -j output")?;
        let mut out = BTreeMap::new();
        let rules = v["nftables"].as_array().into_iter().flatten();
        for r in rules.filter_map(|x| x.get("rule")) {
            let comment = r["comment"].as_str().unwrap_or("").to_string();
            let packets = r["expr"]
                .as_array()
                .into_iter()
                .flatten()
                .find_map(|e| e["counter"]["packets"].as_u64())
                .unwrap_or(0);
            *out.entry(comment).or_insert(0) += packets;
        }
        Ok(out)
    }

    /// The rule packets from `from` to `to` follow, if any.
    pub fn rule(&self, from: &Host, to: &Host) -> Option<Rule> {
        self.rules.get(&(from.clone(), to.clone())).copied()
    }

    /// Connections `host` opens to each route's first address go to its
    /// second instead (DNAT in `host`'s output path; the answers come
    /// back as if from the first): a proxy on the way, whatever address
    /// a redirect names.
    pub fn dnat(&self, host: &Host, routes: &[(SocketAddr, SocketAddr)]) -> anyhow::Result<()> {
        let mut rules = String::from(
            "table ip dmfnat\ndelete table ip dmfnat\ntable ip dmfnat {\n\
             chain out { type nat hook output priority -100; policy accept;\n",
        );
        for (from, to) in routes {
            rules += &format!(
                "ip daddr {} tcp dport {} dnat to {to}\n",
                from.ip(),
                from.port()
            );
        }
        rules += "}\n}\n";
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), rules)?;
        let path = file.path().to_string_lossy().to_string();
        in_ns(&host.ns, "nft", &["-f", &path]).map(|_| ())
    }

    /// What the rule from `from` at `to` has counted since it was set
    /// (zeros without a rule).
    pub fn counters(&self, from: &Host, to: &Host) -> anyhow::Result<Counted> {
        if !self.rules.contains_key(&(from.clone(), to.clone())) {
            return Ok(Counted::default());
        }
        let counts = self.chain_counts(to)?;
        let get = |what: &str| {
            counts
                .get(&format!("{what} {}", from.ip))
                .copied()
                .unwrap_or(0)
        };
        let c = Counted {
            dropped: get("drop"),
            passed: get("pass"),
        };
        Ok(c)
    }

    /// Writes `host`'s input chain afresh: for every host with a rule
    /// towards it, the rule (counting what it drops), then a counter of
    /// what passed, each counter starting from what `kept` says it had.
    fn render(&self, host: &Host, kept: &BTreeMap<String, u64>) -> anyhow::Result<()> {
        let mut rules = String::from(
            "table inet dmf\ndelete table inet dmf\ntable inet dmf {\n\
             chain in { type filter hook input priority 0; policy accept;\n",
        );
        for ((from, to), rule) in &self.rules {
            if to != host {
                continue;
            }
            let ip = from.ip;
            let drop = match rule {
                Rule::Drop => Some(String::new()),
                Rule::Lossy(p) => Some(format!("numgen random mod 100 < {p} ")),
                Rule::Count => None,
            };
            let had = |what: &str| kept.get(&format!("{what} {ip}")).copied().unwrap_or(0);
            if let Some(d) = drop {
                let n = had("drop");
                rules += &format!(
                    "ip saddr {ip} {d}counter packets {n} bytes 0 drop comment \"drop {ip}\"\n"
                );
            }
            let n = had("pass");
            rules += &format!("ip saddr {ip} counter packets {n} bytes 0 comment \"pass {ip}\"\n");
        }
        rules += "}\n}\n";
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), rules)?;
        let path = file.path().to_string_lossy().to_string();
        in_ns(&host.ns, "nft", &["-f", &path]).map(|_| ())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = run("ip", &["netns", "del", &h.ns]);
        }
        let _ = run("ip", &["link", "del", &self.bridge]);
    }
}
