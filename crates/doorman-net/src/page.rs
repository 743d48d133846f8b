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
        let read = (&mut s)
            .take(MAX_PAGE_BYTES + 1)
            .read_to_end(&mut buf)
            .await;
        match read {
            Ok(_) => {}
            // A TLS peer may end without close_notify: keep what came
            // (Content-Length below says whether it is whole).
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => return Err(io(e)),
        }
        if buf.len() as u64 > MAX_PAGE_BYTES {
            return Err(format!("{addr}: {path} is over {MAX_PAGE_BYTES} bytes"));
        }
        parse(&buf).map_err(|why| format!("{addr}: {path}: {why}"))
    }
}

/// The most bytes of a page read (`/debug/status` of 100 000 resources is
/// about 30 MB).
pub const MAX_PAGE_BYTES: u64 = 128 << 20;

/// An HTTP/1.x answer: its status and body, whole as Content-Length says
/// when it says.
fn parse(buf: &[u8]) -> Result<Page, String> {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("not an HTTP answer")?;
    let head = String::from_utf8_lossy(&buf[..end]);
    let body = &buf[end + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let length = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    if let Some(n) = length.filter(|n| *n != body.len()) {
        return Err(format!("cut short: {} of {n} bytes", body.len()));
    }
    Ok(Page {
        status,
        body: String::from_utf8_lossy(body).into_owned(),
    })
}

/// The host part of `host:port` (brackets of an IPv6 address dropped).
fn host_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_whole_or_an_error() {
        let ok = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi").unwrap();
        assert_eq!((ok.status, ok.body.as_str()), (200, "hi"));
        let e = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhi").unwrap_err();
        assert_eq!(e, "cut short: 2 of 5 bytes");
        let no_length = parse(b"HTTP/1.0 403 Forbidden\r\n\r\nno").unwrap();
        assert_eq!((no_length.status, no_length.body.as_str()), (403, "no"));
        assert!(parse(b"garbage").is_err());
    }
}
