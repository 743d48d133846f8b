//! The harness's network: each process of the tree runs on its own "host",
//! a network namespace with one address on a private bridge, so a link
//! between two hosts can be cut the way a firewall or a broken switch cuts
//! it (nftables rules in both hosts dropping each other's packets: no
//! reset, no refusal, the peer just hears nothing), whatever address a
//! redirect or a Discovery names. The harness itself reaches every host
//! through the bridge's own address; nothing is bound outside the bridge's
//! private subnet, and everything is removed when the [`Net`] is dropped.
//!
//! Must not: touch any interface, namespace or rule it did not create.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
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

/// The bridge, its hosts and the links cut between them.
#[derive(Debug)]
pub struct Net {
    tag: String,
    subnet: [u8; 3],
    bridge: String,
    hosts: Vec<Host>,
    cut: BTreeSet<(Host, Host)>,
}

/// Runs `ip`, `nft` or `sysctl`, failing with what it printed.
fn run(cmd: &str, args: &[&str]) -> anyhow::Result<()> {
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
    Ok(())
}

fn in_ns(ns: &str, cmd: &str, args: &[&str]) -> anyhow::Result<()> {
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
            cut: BTreeSet::new(),
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
        run(
            "ip",
            &[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ],
        )?;
        run("ip", &["link", "set", &inner, "netns", &host.ns])?;
        run("ip", &["link", "set", &outer, "master", &self.bridge])?;
        run("ip", &["link", "set", &outer, "up"])?;
        let addr = format!("{}/24", host.ip);
        in_ns(&host.ns, "ip", &["addr", "add", &addr, "dev", &inner])?;
        in_ns(&host.ns, "ip", &["link", "set", &inner, "up"])?;
        in_ns(&host.ns, "ip", &["link", "set", "lo", "up"])?;
        self.render(&host)?;
        Ok(host)
    }

    /// Cuts the link between `a` and `b` (both ways; packets dropped).
    pub fn cut(&mut self, a: &Host, b: &Host) -> anyhow::Result<()> {
        let key = if a < b {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        if self.cut.insert(key) {
            self.render(a)?;
            self.render(b)?;
        }
        Ok(())
    }

    /// Mends the link between `a` and `b`.
    pub fn heal(&mut self, a: &Host, b: &Host) -> anyhow::Result<()> {
        let key = if a < b {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        if self.cut.remove(&key) {
            self.render(a)?;
            self.render(b)?;
        }
        Ok(())
    }

    /// Writes `host`'s rules afresh: drop to and from every host it is cut
    /// from.
    fn render(&self, host: &Host) -> anyhow::Result<()> {
        let peers: Vec<Ipv4Addr> = self
            .cut
            .iter()
            .filter_map(|(a, b)| match (a == host, b == host) {
                (true, _) => Some(b.ip),
                (_, true) => Some(a.ip),
                _ => None,
            })
            .collect();
        let mut rules = String::from(
            "table inet dmf\ndelete table inet dmf\ntable inet dmf {\n\
             chain out { type filter hook output priority 0; policy accept;\n",
        );
        for ip in &peers {
            rules += &format!("ip daddr {ip} drop\n");
        }
        rules += "}\nchain in { type filter hook input priority 0; policy accept;\n";
        for ip in &peers {
            rules += &format!("ip saddr {ip} drop\n");
        }
        rules += "}\n}\n";
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), rules)?;
        let path = file.path().to_string_lossy().to_string();
        in_ns(&host.ns, "nft", &["-f", &path])
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
