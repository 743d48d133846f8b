//! How each process of the tree is started: the command lines of a
//! server replica, a client of each kind and etcd, and the names and
//! address lists they take.
//!
//! Must not: start or stop anything (`tree.rs` and `procs.rs` do).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;

use crate::net::Host;
use crate::procs::Spec;
use crate::tree::{
    join, ClientSpec, Kind, Node, Programs, World, CONFIG_KEY, ETCD_PORT, HTTP_PORT,
    LEGACY_RESOURCE,
};

impl World {
    pub(crate) fn server_argv(
        &self,
        node: &Node,
        addr: SocketAddr,
        parent: Option<String>,
    ) -> Vec<String> {
        let http = SocketAddr::new(addr.ip(), HTTP_PORT);
        let mut argv = vec![
            self.programs.doorman.to_string_lossy().to_string(),
            "server".into(),
            "--listen".into(),
            addr.to_string(),
            "--http".into(),
            http.to_string(),
            "--log-format".into(),
            "json".into(),
            "--etcd".into(),
            self.etcd_addr.to_string(),
            "--election-key".into(),
            format!("/faults/{}", node.name),
            "--election-ttl".into(),
            self.layout.terms.ttl.to_string(),
        ];
        match parent {
            Some(p) => argv.extend(["--parent".into(), p]),
            None => argv.extend(["--config".into(), format!("etcd:{CONFIG_KEY}")]),
        }
        argv
    }

    pub(crate) fn client_argv(
        &self,
        c: &ClientSpec,
        servers: &[SocketAddr],
    ) -> anyhow::Result<Vec<String>> {
        let wants = c.wants.to_string();
        let p = &self.programs;
        let s = |x: &Path| x.to_string_lossy().to_string();
        Ok(match c.kind {
            Kind::Rust => vec![
                s(&p.harness),
                "client".into(),
                "--server".into(),
                join(servers),
                "--id".into(),
                c.id.clone(),
                "--resource".into(),
                self.layout.resource.clone(),
                "--wants".into(),
                wants,
            ],
            Kind::Python => vec![
                s(p.python.as_deref().context("no python")?),
                s(&p.pyclient),
                join(servers),
                c.id.clone(),
                self.layout.resource.clone(),
                wants,
            ],
            // One address: the original client does not do Discovery.
            Kind::Go => vec![
                s(p.goclient.as_deref().context("no goclient")?),
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
        })
    }
}

impl Programs {
    /// etcd's command line on `host`, its data under `dir`.
    pub(crate) fn etcd_spec(&self, host: &Host, dir: &Path) -> Spec {
        let url = |port: u16| format!("http://{}:{port}", host.ip);
        let data = dir.join("etcd-data");
        Spec {
            name: "etcd".into(),
            host: host.clone(),
            argv: vec![
                self.etcd.to_string_lossy().to_string(),
                "--name".into(),
                "faults".into(),
                "--data-dir".into(),
                data.to_string_lossy().to_string(),
                "--listen-client-urls".into(),
                url(ETCD_PORT),
                "--advertise-client-urls".into(),
                url(ETCD_PORT),
                "--listen-peer-urls".into(),
                url(ETCD_PORT + 1),
                "--initial-advertise-peer-urls".into(),
                url(ETCD_PORT + 1),
                "--initial-cluster".into(),
                format!("faults={}", url(ETCD_PORT + 1)),
            ],
            faketime: false,
            env: Vec::new(),
            stdin_closes: false,
        }
    }
}
