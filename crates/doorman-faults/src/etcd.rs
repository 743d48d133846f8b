//! The tree's etcd: a three-member cluster, each member on a host of its
//! own (Debian's etcd 3.4: one `--name`, data dir and pair of ports per
//! member, the same `--initial-cluster` list for all), and what its faults
//! need: which member leads, a member killed and started again on its
//! data, and a member replaced with its data wiped (removed from the
//! cluster, wiped, added back and started to join the existing cluster:
//! etcd refuses a member that lost its data under its old id).
//!
//! Must not: touch the tree's keys (the config push does).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::net::{Host, Net};
use crate::procs::{Proc, Sink, Spec};
use crate::secure::Secure;

/// Members of the cluster.
pub const MEMBERS: usize = 3;
/// Each member's client port (its peer port is the next).
pub const ETCD_PORT: u16 = 2379;

/// The running cluster.
#[derive(Debug)]
pub struct Etcd {
    /// Its members, in order.
    pub members: Vec<Proc>,
    /// Their client addresses.
    pub addrs: Vec<SocketAddr>,
    dir: PathBuf,
    /// On a secure tree: how the harness reaches it (CA, its certificate,
    /// the root user's password).
    tls: Option<AdminTls>,
    /// Whether auth is on (the harness then signs in as root): not before
    /// [`Etcd::auth_on`], where etcd refuses every sign-in.
    auth: bool,
}

/// The harness's credentials for a secure cluster.
#[derive(Debug, Clone)]
struct AdminTls {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
    root_password: String,
}

fn peer_url(host: &Host) -> String {
    format!("http://{}:{}", host.ip, ETCD_PORT + 1)
}

fn name(i: usize) -> String {
    format!("etcd{}", i + 1)
}

/// Member `i`'s command line: joining a `new` cluster or an `existing`
/// one, whose members are `cluster` (name=peer URL, comma-separated);
/// with `tls` (certificate, key, CA), clients must present certificates.
fn argv(
    etcd: &Path,
    (i, host): (usize, &Host),
    dir: &Path,
    (cluster, state): (&str, &str),
    tls: Option<&(PathBuf, PathBuf, PathBuf)>,
) -> Vec<String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let client = format!("{scheme}://{}:{ETCD_PORT}", host.ip);
    let data = dir.join(format!("{}-data", name(i)));
    let mut v: Vec<String> = [
        etcd.to_string_lossy().as_ref(),
        "--name",
        &name(i),
        "--data-dir",
        &data.to_string_lossy(),
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &peer_url(host),
        "--initial-advertise-peer-urls",
        &peer_url(host),
        "--initial-cluster",
        cluster,
        "--initial-cluster-state",
        state,
        "--initial-cluster-token",
        "doorman-faults",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some((cert, key, ca)) = tls {
        let s = |p: &PathBuf| p.to_string_lossy().to_string();
        v.extend([
            "--cert-file".into(),
            s(cert),
            "--key-file".into(),
            s(key),
            "--trusted-ca-file".into(),
            s(ca),
            "--client-cert-auth".into(),
        ]);
    }
    v
}

impl Etcd {
    /// Starts the members on hosts of their own (over TLS, requiring
    /// client certificates, on a secure tree).
    pub fn start(
        net: &mut Net,
        etcd: &Path,
        dir: &Path,
        sink: &Sink,
        secure: Option<&Secure>,
    ) -> anyhow::Result<Etcd> {
        let hosts = (0..MEMBERS)
            .map(|i| net.host(&name(i)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let cluster = (0..MEMBERS)
            .map(|i| format!("{}={}", name(i), peer_url(&hosts[i])))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            // A data dir left by an earlier run in the same directory
            // belongs to another cluster (other addresses, other ids).
            let _ = std::fs::remove_dir_all(dir.join(format!("{}-data", name(i))));
            let tls = secure.map(|s| {
                let c = s.etcd_cert(&name(i), host.ip.into());
                (c.cert, c.key, s.ca())
            });
            let spec = Spec {
                name: name(i),
                host: host.clone(),
                argv: argv(etcd, (i, host), dir, (&cluster, "new"), tls.as_ref()),
                faketime: false,
                env: Vec::new(),
                stdin_closes: false,
                clock: 0,
            };
            members.push(Proc::start(spec, dir, usize::MAX - i, sink.clone())?);
        }
        let addrs = hosts
            .iter()
            .map(|h| SocketAddr::new(h.ip.into(), ETCD_PORT))
            .collect();
        let tls = match secure {
            Some(s) => {
                let ops = s.ops();
                Some(AdminTls {
                    ca: std::fs::read(s.ca())?,
                    cert: std::fs::read(&ops.cert)?,
                    key: std::fs::read(&ops.key)?,
                    root_password: s.root_password().to_string(),
                })
            }
            None => None,
        };
        let e = Etcd {
            members,
            addrs,
            dir: dir.to_path_buf(),
            tls,
            auth: false,
        };
        e.wait_listening()?;
        Ok(e)
    }

    fn wait_listening(&self) -> anyhow::Result<()> {
        for addr in &self.addrs {
            let listening = (0..150).any(|_| {
                let ok = std::net::TcpStream::connect_timeout(addr, Duration::from_millis(200));
                ok.is_ok() || {
                    std::thread::sleep(Duration::from_millis(100));
                    false
                }
            });
            if !listening {
                bail!("etcd did not listen on {addr} within 15 s");
            }
        }
        Ok(())
    }

    /// The endpoints, comma-separated (`--etcd` of the servers).
    pub fn endpoints(&self) -> String {
        crate::tree::join(&self.addrs)
    }

    /// The hosts of the members.
    pub fn hosts(&self) -> Vec<Host> {
        self.members.iter().map(|m| m.spec.host.clone()).collect()
    }

    /// A client of the members at `addrs`: as root once auth is on
    /// (`user`), over TLS on a secure tree.
    async fn client(
        &self,
        addrs: &[SocketAddr],
        user: bool,
    ) -> anyhow::Result<etcd_client::Client> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let eps: Vec<String> = addrs.iter().map(|a| format!("{scheme}://{a}")).collect();
        let mut opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(2));
        if let Some(t) = &self.tls {
            let tls = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(&t.ca))
                .identity(etcd_client::Identity::from_pem(&t.cert, &t.key));
            opts = opts.with_tls(tls);
            if user {
                opts = opts.with_user("root", t.root_password.clone());
            }
        }
        Ok(etcd_client::Client::connect(eps, Some(opts)).await?)
    }

    /// A client of the whole cluster for the harness's own operations
    /// (`user`: as root, once auth is on).
    pub async fn admin(&self, user: bool) -> anyhow::Result<etcd_client::Client> {
        self.client(&self.addrs, user).await
    }

    /// From now on the harness signs in as root (the users exist and auth
    /// is on).
    pub fn auth_on(&mut self) {
        self.auth = true;
    }

    /// The index of the member that leads, as the members running say.
    pub async fn leader(&self) -> Option<usize> {
        for (i, addr) in self.addrs.iter().enumerate() {
            if self.members[i].pid().is_none() {
                continue;
            }
            let Ok(mut c) = self.client(&[*addr], self.auth).await else {
                continue;
            };
            let Ok(s) = c.status().await else { continue };
            let me = s.header().map(|h| h.member_id());
            if me == Some(s.leader()) {
                return Some(i);
            }
        }
        None
    }

    /// Whether every member serves within `within`.
    pub async fn ready(&self, within: Duration) -> bool {
        let until = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < until {
            if self.all_serve().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// Whether every member answers and names the same leader.
    pub async fn all_serve(&self) -> bool {
        let mut leaders = Vec::new();
        for addr in &self.addrs {
            let Ok(mut c) = self.client(&[*addr], self.auth).await else {
                return false;
            };
            match c.status().await {
                Ok(s) if s.leader() != 0 => leaders.push(s.leader()),
                _ => return false,
            }
        }
        leaders.windows(2).all(|w| w[0] == w[1])
    }

    /// Member `i` removed from the cluster, its data wiped, added back
    /// and started to join it (the others must have quorum).
    pub async fn replace_wiped(&mut self, i: usize) -> anyhow::Result<()> {
        self.members[i].kill()?;
        let others: Vec<SocketAddr> = (0..MEMBERS)
            .filter(|&j| j != i)
            .map(|j| self.addrs[j])
            .collect();
        let mut c = self.client(&others, self.auth).await?;
        let list = c.member_list().await.context("etcd member list")?;
        let host = self.members[i].spec.host.clone();
        let old = list
            .members()
            .iter()
            .find(|m| m.name() == name(i) || m.peer_urls().contains(&peer_url(&host)))
            .map(|m| m.id());
        if let Some(id) = old {
            c.member_remove(id).await.context("etcd member remove")?;
        }
        let data = self.dir.join(format!("{}-data", name(i)));
        let _ = std::fs::remove_dir_all(&data);
        c.member_add([peer_url(&host)], None)
            .await
            .context("etcd member add")?;
        let cluster = (0..MEMBERS)
            .map(|j| format!("{}={}", name(j), peer_url(&self.members[j].spec.host)))
            .collect::<Vec<_>>()
            .join(",");
        let etcd = PathBuf::from(&self.members[i].spec.argv[0]);
        let tls = self.member_tls(i);
        let state = (cluster.as_str(), "existing");
        self.members[i].spec.argv = argv(&etcd, (i, &host), &self.dir, state, tls.as_ref());
        self.members[i].restart(0)
    }

    /// The TLS files member `i` was started with, if any.
    fn member_tls(&self, i: usize) -> Option<(PathBuf, PathBuf, PathBuf)> {
        let a = &self.members[i].spec.argv;
        let flag = |f: &str| {
            let at = a.iter().position(|x| x == f)?;
            a.get(at + 1).map(PathBuf::from)
        };
        Some((
            flag("--cert-file")?,
            flag("--key-file")?,
            flag("--trusted-ca-file")?,
        ))
    }

    /// Writes `value` under `key` as is, unchecked (an invalid config
    /// pushed around `doorman config push`'s validation).
    /// Tried on each running member in turn for up to 10 s: one may be
    /// down or still joining (a member wiped in the same slot).
    pub async fn put_raw(&self, key: &str, value: &[u8]) -> anyhow::Result<()> {
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut last = anyhow::anyhow!("no etcd member is running");
        while tokio::time::Instant::now() < until {
            for (i, addr) in self.addrs.iter().enumerate() {
                if self.members[i].pid().is_none() {
                    continue;
                }
                match self.client(&[*addr], self.auth).await {
                    Ok(mut c) => match c.put(key, value, None).await {
                        Ok(_) => return Ok(()),
                        Err(e) => {
                            last = anyhow::Error::new(e).context(format!("etcd put at {addr}"))
                        }
                    },
                    Err(e) => last = e.context(format!("etcd at {addr}")),
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(last)
    }

    /// Stops every member by its pid.
    pub fn stop(&mut self) {
        for m in &mut self.members {
            m.stop(Duration::from_secs(3));
        }
    }
}
