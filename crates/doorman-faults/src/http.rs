//! How the harness reads the servers' HTTP pages (status, metrics) and
//! asks them Discovery: plainly, or on a secure tree over TLS with its own
//! client certificate (the `read` access rule names it).
//!
//! Must not: change anything on the servers it reads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use doorman_client::ClientTls;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::secure::Secure;

/// The harness's way in: plain, or with TLS settings.
#[derive(Clone, Default)]
pub struct Http {
    tls: Option<(Arc<rustls::ClientConfig>, ClientTls)>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Http {
    /// On a secure tree, with the harness's certificate.
    pub fn new(secure: Option<&Secure>) -> anyhow::Result<Http> {
        let Some(s) = secure else {
            return Ok(Http::default());
        };
        let ops = s.ops();
        let mut roots = rustls::RootCertStore::empty();
        for c in doorman_net::tls::pem_certs(&s.ca())?.1 {
            roots.add(c).context("the harness's CA")?;
        }
        let certs = doorman_net::tls::pem_certs(&ops.cert)?.1;
        let key = doorman_net::tls::pem_key(&ops.key)?.1;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)?;
        let grpc = ClientTls::from_files(&s.ca(), Some(&ops.cert), Some(&ops.key))?;
        Ok(Http {
            tls: Some((Arc::new(config), grpc)),
        })
    }

    /// One HTTP/1.0 GET: the body, if an answer came within a second.
    pub async fn get(&self, addr: SocketAddr, path: &str) -> Option<String> {
        let call = async {
            let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
            match &self.tls {
                None => exchange(tcp, addr, path).await,
                Some((config, _)) => {
                    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
                    let c = tokio_rustls::TlsConnector::from(config.clone());
                    let s = c.connect(name, tcp).await.ok()?;
                    exchange(s, addr, path).await
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(1), call)
            .await
            .ok()
            .flatten()
    }

    /// Whether `addr` says it is the master, asked within `within`
    /// (`None`: no answer).
    pub async fn is_master(&self, addr: SocketAddr, within: Duration) -> Option<bool> {
        let call = async {
            let tls = self.tls.as_ref().map(|t| &t.1);
            let ep = doorman_net::tls::endpoint(&addr.to_string(), tls).ok()?;
            let channel = ep.connect().await.ok()?;
            let mut c = CapacityClient::new(channel);
            let d = c.discovery(pb::DiscoveryRequest {}).await.ok()?;
            Some(d.into_inner().is_master)
        };
        tokio::time::timeout(within, call).await.ok().flatten()
    }
}

async fn exchange(
    mut s: impl AsyncRead + AsyncWrite + Unpin,
    addr: SocketAddr,
    path: &str,
) -> Option<String> {
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    // A TLS peer may end without close_notify: keep what came.
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8(buf).ok()?;
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}
