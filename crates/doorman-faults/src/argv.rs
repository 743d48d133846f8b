//! How each process of the tree is started: the command lines of a
//! server replica and of a client of each kind, plain or on a secure tree
//! (certificates, tokens, access rules: `secure.rs`).
//!
//! Must not: start or stop anything (`world.rs` and `procs.rs` do).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;

use crate::net::Host;
use crate::secure::{client_identity, node_identity};
use crate::tree::{join, ClientSpec, Kind, CONFIG_KEY, LEGACY_RESOURCE, MASS_RESOURCE};
use crate::world::{World, HTTP_PORT};

fn path(p: &Path) -> String {
    p.to_string_lossy().to_string()
}

impl World {
    /// Replica of node `n` on `host`, below `parent` (its replicas'
    /// addresses).
    pub(crate) fn server_argv(
        &self,
        n: usize,
        host: &Host,
        parent: Option<String>,
    ) -> anyhow::Result<Vec<String>> {
        let node = &self.layout.nodes[n];
        let addr = SocketAddr::new(host.ip.into(), crate::world::GRPC_PORT);
        let http = SocketAddr::new(addr.ip(), HTTP_PORT);
        let mut argv = vec![
            path(&self.programs.doorman),
            "server".into(),
            "--listen".into(),
            addr.to_string(),
            "--http".into(),
            http.to_string(),
            "--log-format".into(),
            "json".into(),
            "--election-key".into(),
            format!("/faults/{}", node.name),
            "--election-ttl".into(),
            self.layout.terms.ttl.to_string(),
        ];
        argv.extend(self.etcd_args("server"));
        match &parent {
            Some(p) => argv.extend(["--parent".into(), p.clone()]),
            None => argv.extend(["--config".into(), format!("etcd:{CONFIG_KEY}")]),
        }
        if self.secure.is_some() {
            argv.extend(self.secure_server_argv(n, host, parent.is_some())?);
        }
        Ok(argv)
    }

    /// The secure tree's flags of a replica of node `n`: its certificate,
    /// who it accepts (client CA, tokens), its token and CA towards its
    /// parent, and its local config with the access rules.
    fn secure_server_argv(
        &self,
        n: usize,
        host: &Host,
        below: bool,
    ) -> anyhow::Result<Vec<String>> {
        let s = self.secure.as_ref().context("not a secure tree")?;
        let node = &self.layout.nodes[n];
        let replica = format!("{}-{}", node.name, host.ip);
        let cert = s.node_cert(&replica, &node.name, host.ip.into());
        let legacy = self.serves_go_clients(n);
        let mut argv = Vec::new();
        if legacy {
            // Plaintext towards the original clients; mutual TLS upstream.
            argv.extend([
                "--parent-tls-cert".into(),
                path(&cert.cert),
                "--parent-tls-key".into(),
                path(&cert.key),
            ]);
        } else {
            argv.extend([
                "--tls-cert".into(),
                path(&cert.cert),
                "--tls-key".into(),
                path(&cert.key),
                "--tls-client-ca".into(),
                path(&s.ca()),
                "--auth-tokens".into(),
                path(&s.tokens_file()?),
            ]);
        }
        if below {
            let token = s.token_file(&node_identity(&node.name))?;
            let (serves, clients) = self.below(n);
            let config = s.intermediate_config(&node.name, &serves, &clients)?;
            argv.extend([
                "--parent-tls-ca".into(),
                path(&s.ca()),
                "--parent-token-file".into(),
                path(&token),
                "--config".into(),
                path(&config),
            ]);
        }
        Ok(argv)
    }

    /// Whether node `n` is the original Go clients' leaf.
    fn serves_go_clients(&self, n: usize) -> bool {
        self.layout
            .clients
            .iter()
            .any(|c| c.leaf == n && c.kind == Kind::Go)
    }

    /// The identities of node `n`'s children and of its clients (mass
    /// processes included).
    pub(crate) fn below(&self, n: usize) -> (Vec<String>, Vec<String>) {
        let nodes = &self.layout.nodes;
        let serves = nodes
            .iter()
            .filter(|c| c.parent == Some(n))
            .map(|c| node_identity(&c.name))
            .collect();
        let mut clients: Vec<String> = self
            .layout
            .clients
            .iter()
            .filter(|c| c.leaf == n)
            .map(|c| client_identity(&c.name))
            .collect();
        if let Some(m) = self.layout.mass.filter(|m| m.leaf == n) {
            clients.extend((0..m.procs).map(|p| client_identity(&format!("mass{p}"))));
        }
        (serves, clients)
    }

    /// Client `c` of the servers `servers`; `count` clients in one process
    /// (mass clients: each asks for `MASS_RESOURCE`).
    pub(crate) fn client_argv(
        &self,
        c: &ClientSpec,
        servers: &[SocketAddr],
        count: Option<usize>,
    ) -> anyhow::Result<Vec<String>> {
        let wants = c.wants.to_string();
        let p = &self.programs;
        let resource = if count.is_some() {
            MASS_RESOURCE.to_string()
        } else {
            self.layout.resource.clone()
        };
        let mut argv = match c.kind {
            Kind::Rust => vec![
                path(&p.harness),
                "client".into(),
                "--server".into(),
                join(servers),
                "--id".into(),
                c.id.clone(),
                "--resource".into(),
                resource,
                "--wants".into(),
                wants,
                "--count".into(),
                count.unwrap_or(1).to_string(),
                "--rpc-timeout-ms".into(),
                self.layout.terms.rpc_timeout_ms.to_string(),
            ],
            Kind::Python => vec![
                path(p.python.as_deref().context("no python")?),
                path(&p.pyclient),
                join(servers),
                c.id.clone(),
                resource,
                wants,
            ],
            // One address: the original client does not do Discovery.
            Kind::Go => vec![
                path(p.goclient.as_deref().context("no goclient")?),
                "-server".into(),
                servers[0].to_string(),
                "-resource".into(),
                LEGACY_RESOURCE.into(),
                "-wants".into(),
                wants,
                "-client_id".into(),
                c.id.clone(),
                "-duration".into(),
                "100000".into(),
                "-logtostderr".into(),
            ],
        };
        if self.layout.liar.as_deref() == Some(c.name.as_str()) && c.kind == Kind::Rust {
            argv.push("--ignore-lease-end".into());
        }
        self.push_secure(c, &mut argv)?;
        Ok(argv)
    }

    /// On the secure tree, client `c`'s CA, certificate, key and token
    /// file (flags for ours, positional for the Python client; the
    /// original's client has none).
    fn push_secure(&self, c: &ClientSpec, argv: &mut Vec<String>) -> anyhow::Result<()> {
        let (Some(s), Kind::Rust | Kind::Python) = (&self.secure, c.kind) else {
            return Ok(());
        };
        let cert = s.client_cert(&c.name);
        let token = s.token_file(&client_identity(&c.name))?;
        let files = [s.ca(), cert.cert, cert.key, token];
        let flags = ["--tls-ca", "--tls-cert", "--tls-key", "--token-file"];
        for (flag, file) in flags.iter().zip(&files) {
            if c.kind == Kind::Rust {
                argv.push(flag.to_string());
            }
            argv.push(path(file));
        }
        Ok(())
    }
}
