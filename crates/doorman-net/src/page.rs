//! Reading one of a server's HTTP pages (`/api/v1/tree`, `/metrics`, …)
//! the way the CLI and the fault harness do: one HTTP/1.0 GET, plain or
//! over TLS with the same [`ClientTls`] the gRPC calls use, with a bearer
//! token if given, within a deadline.
//!
//! Must not: follow redirects or retry (the caller decides).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::bearer::BearerToken;
use crate::tls::ClientTls;

/// A page's answer: the status code and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: String,
}

/// How to reach a server's pages.
#[derive(Clone, Default)]
pub struct PageClient {
    tls: Option<Arc<rustls::ClientConfig>>,
    server_name: Option<String>,
    token: Option<BearerToken>,
}

impl std::fmt::Debug for PageClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageClient")
            .field("tls", &self.tls.is_some())
            .field("token", &self.token.is_some())
            .finish()
    }
}

impl PageClient {
    /// Plain HTTP, or TLS with `tls`; `token` sent as `authorization`.
    pub fn new(tls: Option<&ClientTls>, token: Option<BearerToken>) -> Result<Self, String> {
        let (tls, server_name) = match tls {
            None => (None, None),
            Some(t) => (Some(Arc::new(t.rustls_config()?)), t.server_name()),
        };
        Ok(PageClient {
            tls,
            server_name,
            token,
        })
    }

    /// `GET path` from `addr` (`host:port`) within `within`.
    pub async fn get(&self, addr: &str, path: &str, within: Duration) -> Result<Page, String> {
        let call = async {
            let tcp = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
            match &self.tls {
                None => self.exchange(tcp, addr, path).await,
                Some(config) => {
                    let host = self.server_name.clone().unwrap_or_else(|| host_of(addr));
                    let name = rustls::pki_types::ServerName::try_from(host)
                        .map_err(|e| format!("{addr}: {e}"))?;
                    let c = tokio_rustls::TlsConnector::from(config.clone());
                    let s = c
                        .connect(name, tcp)
                        .await
                        .map_err(|e| format!("{addr}: TLS: {e}"))?;
                    self.exchange(s, addr, path).await
                }
            }
        };
        tokio::time::timeout(within, call)
            .await
            .map_err(|_| format!("{addr}: no answer within {within:?}"))?
    }

    async fn exchange(
        &self,
        mut s: impl AsyncRead + AsyncWrite + Unpin,
        addr: &str,
        path: &str,
    ) -> Result<Page, String> {
        let auth = match &self.token {
            Some(t) => format!("Authorization: {}\r\n", t.header_value()),
            None => String::new(),
        };
        let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}\r\n");
        let io = |e: std::io::Error| format!("{addr}: {e}");
        s.write_all(req.as_bytes()).await.map_err(io)?;
        let mut buf = Vec::new();
        // A TLS peer may end without close_notify: keep what came.
        let _ = s.read_to_end(&mut buf).await;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("{addr}: no status in {head:?}"))?;
        Ok(Page {
            status,
            body: body.to_string(),
        })
    }
}

/// The host part of `host:port` (brackets of an IPv6 address dropped).
fn host_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}
