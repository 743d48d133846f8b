//! The secure tree (`run --secure`), the production set-up
//! docs/security.md describes: one CA (the test kit's, from doorman-pki) and a
//! certificate per party naming it (`spiffe://faults/…`; a node's replicas
//! share their node's identity); every gRPC link mutual TLS and a bearer
//! token besides (the token's identity, the same as the certificate's, is
//! what the access rules see); access rules at every server (the parent
//! serves its children, a leaf its clients, the harness reads the status
//! pages); etcd over TLS with client certificates and users (servers,
//! the pusher, root for the harness's own cluster operations). The
//! original Go clients have no TLS: their leaf serves them in plaintext
//! and is a mutual-TLS client of its parent (`--parent-tls-cert`).
//!
//! Must not: start anything (it makes files and flags).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use doorman_testkit::{CertFiles, Name, Pki};

use crate::tree::CONFIG_KEY;

/// What the secure tree's parties present.
pub struct Secure {
    pki: Pki,
    dir: PathBuf,
    /// (identity, token) of every party that sends one.
    tokens: std::sync::Mutex<Vec<(String, String)>>,
    root_password: String,
}

impl std::fmt::Debug for Secure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secure").field("dir", &self.dir).finish()
    }
}

/// The identity of node `node` (all its replicas).
pub fn node_identity(node: &str) -> String {
    format!("spiffe://faults/node/{node}")
}

/// The identity of client `name`.
pub fn client_identity(name: &str) -> String {
    format!("spiffe://faults/client/{name}")
}

/// The harness's identity (it reads the status pages).
pub const OPS: &str = "spiffe://faults/ops/harness";

/// A random token (hex of 32 bytes from the OS).
fn token() -> anyhow::Result<String> {
    let mut b = [0u8; 32];
    let mut f = std::fs::File::open("/dev/urandom").context("/dev/urandom")?;
    std::io::Read::read_exact(&mut f, &mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Secure {
    /// A CA, the harness's certificate and the etcd root password, under
    /// `dir/secure`.
    pub fn new(dir: &Path) -> anyhow::Result<Secure> {
        let dir = dir.join("secure");
        std::fs::create_dir_all(&dir)?;
        let s = Secure {
            pki: Pki::new("faults"),
            dir,
            tokens: std::sync::Mutex::new(Vec::new()),
            root_password: token()?,
        };
        s.pki.client("ops", Name::Uri(OPS));
        Ok(s)
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.pki.ca()
    }

    /// The harness's certificate.
    pub fn ops(&self) -> CertFiles {
        self.files("ops")
    }

    fn files(&self, file: &str) -> CertFiles {
        CertFiles {
            cert: self.pki.dir().join(format!("{file}.pem")),
            key: self.pki.dir().join(format!("{file}.key")),
        }
    }

    /// A certificate for replica `file` of node `node` at `ip` (it serves
    /// and is its parent's client).
    pub fn node_cert(&self, file: &str, node: &str, ip: IpAddr) -> CertFiles {
        self.pki.node(file, &[ip], Name::Uri(&node_identity(node)))
    }

    /// A client certificate for client `name`.
    pub fn client_cert(&self, name: &str) -> CertFiles {
        self.pki.client(name, Name::Uri(&client_identity(name)))
    }

    /// A certificate for etcd member `file` at `ip` (its CN is the etcd
    /// user a certificate alone logs in as; every user here also gives a
    /// password).
    pub fn etcd_cert(&self, file: &str, ip: IpAddr) -> CertFiles {
        self.pki.node(file, &[ip], Name::CommonName(file))
    }

    /// The file holding `identity`'s token, made the first time it is
    /// asked for; every server's token file accepts it ([`Secure::tokens_file`],
    /// rewritten then: servers re-read it when it changes).
    pub fn token_file(&self, identity: &str) -> anyhow::Result<PathBuf> {
        let safe: String = identity
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let file = self.dir.join(format!("{safe}.token"));
        let mut v = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if v.iter().any(|(id, _)| id == identity) {
            return Ok(file);
        }
        let t = token()?;
        std::fs::write(&file, format!("{t}\n"))?;
        v.push((identity.to_string(), t));
        drop(v);
        self.tokens_file()?;
        Ok(file)
    }

    /// The servers' `--auth-tokens` file, with every token made so far.
    pub fn tokens_file(&self) -> anyhow::Result<PathBuf> {
        let file = self.dir.join("tokens.toml");
        let v = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let text: String = v
            .iter()
            .map(|(id, t)| format!("[[token]]\nidentity = \"{id}\"\ntoken = \"{t}\"\n\n"))
            .collect();
        std::fs::write(&file, text)?;
        Ok(file)
    }

    /// Access rules of the root: the mid node leases for its subtree, the
    /// harness reads the status pages.
    pub fn root_rules(&self) -> String {
        rules(&[(&node_identity("mid"), "serve")], &[])
    }

    /// A local config for an intermediate node: a template that narrows
    /// nothing, and its rules (`serves`: children that lease from it;
    /// `clients`: clients that acquire from it; none: open, for the
    /// original Go clients' leaf).
    pub fn intermediate_config(
        &self,
        node: &str,
        serves: &[String],
        clients: &[String],
    ) -> anyhow::Result<PathBuf> {
        let template = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 100000.0\n\
                        [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 3600\n\
                        refresh_interval = 3600\n\n";
        let children: Vec<(&str, &str)> = serves.iter().map(|s| (s.as_str(), "serve")).collect();
        let text = if serves.is_empty() && clients.is_empty() {
            template.to_string()
        } else {
            let acquire: Vec<&str> = clients.iter().map(String::as_str).collect();
            format!("{template}{}", rules(&children, &acquire))
        };
        let file = self.dir.join(format!("{node}.toml"));
        std::fs::write(&file, text)?;
        Ok(file)
    }

    /// The flags a party `who` (`server` or `pusher`) reaches etcd with.
    pub fn etcd_flags(&self, who: &str) -> Vec<String> {
        let cert = self.files(&format!("etcd-{who}"));
        let s = |p: &Path| p.to_string_lossy().to_string();
        vec![
            "--etcd-ca".into(),
            s(&self.ca()),
            "--etcd-cert".into(),
            s(&cert.cert),
            "--etcd-key".into(),
            s(&cert.key),
            "--etcd-user".into(),
            format!("doorman-{who}"),
            "--etcd-password-file".into(),
            s(&self.dir.join(format!("etcd-{who}.pw"))),
        ]
    }

    /// The etcd root user's password (the harness's cluster operations).
    pub fn root_password(&self) -> &str {
        &self.root_password
    }

    /// etcd's users and roles, then auth on (through `c`, a client of the
    /// cluster before auth): servers read and write under the tree's
    /// prefix (config, elections), the pusher the config, root everything.
    pub async fn etcd_users(&self, mut c: etcd_client::Client) -> anyhow::Result<()> {
        use etcd_client::Permission;
        for who in ["server", "pusher"] {
            let name = format!("doorman-{who}");
            self.pki
                .client(&format!("etcd-{who}"), Name::CommonName(&name));
        }
        let prefix = |p: &str| {
            let mut end = p.as_bytes().to_vec();
            if let Some(last) = end.last_mut() {
                *last += 1;
            }
            Permission::read_write(p).with_range_end(end)
        };
        c.user_add("root", self.root_password.clone(), None).await?;
        c.role_add("doorman-server").await?;
        c.role_grant_permission("doorman-server", prefix("/faults/"))
            .await?;
        c.role_add("doorman-pusher").await?;
        c.role_grant_permission("doorman-pusher", prefix(CONFIG_KEY))
            .await?;
        for who in ["server", "pusher"] {
            let pw = token()?;
            std::fs::write(self.dir.join(format!("etcd-{who}.pw")), format!("{pw}\n"))?;
            let user = format!("doorman-{who}");
            c.user_add(user.clone(), pw, None).await?;
            c.user_grant_role(user, format!("doorman-{who}")).await?;
        }
        c.user_grant_role("root", "root").await?;
        c.auth_enable().await.context("etcd auth enable")?;
        Ok(())
    }
}

/// `[[access]]` rules: each (identity, action), clients that acquire, and
/// the harness reading the status pages.
fn rules(pairs: &[(&str, &str)], acquire: &[&str]) -> String {
    let mut text = String::new();
    for (id, action) in pairs {
        text += &format!("[[access]]\nidentities = [\"{id}\"]\nactions = [\"{action}\"]\n\n");
    }
    if !acquire.is_empty() {
        let ids: Vec<String> = acquire.iter().map(|i| format!("\"{i}\"")).collect();
        text += &format!(
            "[[access]]\nidentities = [{}]\nactions = [\"acquire\"]\n\n",
            ids.join(", ")
        );
    }
    text + &format!("[[access]]\nidentities = [\"{OPS}\"]\nactions = [\"read\"]\n")
}
