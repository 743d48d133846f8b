//! How the harness reads the servers' HTTP pages (status, metrics) and
//! asks them Discovery: plainly, or on a secure tree over TLS with its own
//! client certificate (the `read` access rule names it).
//!
//! Must not: change anything on the servers it reads.

use std::net::SocketAddr;
use std::time::Duration;

use doorman_client::ClientTls;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;

use crate::secure::Secure;

/// The harness's way in: plain, or with TLS settings.
#[derive(Clone, Debug, Default)]
pub struct Http {
    pages: doorman_net::page::PageClient,
    grpc: Option<ClientTls>,
}

impl Http {
    /// On a secure tree, with the harness's certificate.
    pub fn new(secure: Option<&Secure>) -> anyhow::Result<Http> {
        let Some(s) = secure else {
            return Ok(Http::default());
        };
        let ops = s.ops();
        let grpc = ClientTls::from_files(&s.ca(), Some(&ops.cert), Some(&ops.key))?;
        let pages = doorman_net::page::PageClient::new(Some(&grpc), None)
            .map_err(|e| anyhow::anyhow!("the harness's TLS: {e}"))?;
        Ok(Http {
            pages,
            grpc: Some(grpc),
        })
    }

    /// One HTTP/1.0 GET: the body, if an answer came within a second.
    pub async fn get(&self, addr: SocketAddr, path: &str) -> Option<String> {
        let addr = addr.to_string();
        let page = self.pages.get(&addr, path, Duration::from_secs(1)).await;
        page.ok().map(|p| p.body)
    }

    /// Whether `addr` says it is the master, asked within `within`
    /// (`None`: no answer).
    pub async fn is_master(&self, addr: SocketAddr, within: Duration) -> Option<bool> {
        let call = async {
            let tls = self.grpc.as_ref();
            let ep = doorman_net::tls::endpoint(&addr.to_string(), tls).ok()?;
            let channel = ep.connect().await.ok()?;
            let mut c = CapacityClient::new(channel);
            let d = c.discovery(pb::DiscoveryRequest {}).await.ok()?;
            Some(d.into_inner().is_master)
        };
        tokio::time::timeout(within, call).await.ok().flatten()
    }
}
