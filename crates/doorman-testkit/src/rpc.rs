//! Raw RPCs and pages for tests that talk to a server on the wire: a
//! server on 127.0.0.1:0 with a manual clock, a tonic client, one-resource
//! requests, plain and TLS HTTP GETs, a metric read from `/metrics`, and
//! the redirect and standby checks.
//!
//! Must not: go through the client library (tests of it use it directly).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use doorman_core::config::Config;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use doorman_server::server::{start, ConfigSource, RunningServer, ServerOptions};
use tonic::transport::Channel;

pub use crate::ManualClock;

/// Options for a server on 127.0.0.1:0 (gRPC and HTTP) with `config`,
/// on `clock`, answering every request at once (no minimum interval).
pub fn opts(config: ConfigSource, clock: &ManualClock) -> ServerOptions {
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), config);
    o.http = Some("127.0.0.1:0".parse().unwrap());
    o.min_request_interval = Duration::ZERO;
    o.clock = clock.clock();
    o
}

/// A server started on config `text` (valid, or the test fails).
pub async fn server_with(text: &str, clock: &ManualClock) -> RunningServer {
    let cfg = Arc::new(Config::parse(text, "test.toml").expect("test config is valid"));
    start(opts(ConfigSource::Inline(cfg), clock))
        .await
        .expect("server starts")
}

/// A server on `text` plus one access rule that lets only identities
/// `spiffe://x/*` acquire: an unauthenticated caller is refused.
pub async fn server_refusing_anonymous(text: &str, clock: &ManualClock) -> RunningServer {
    let text =
        format!("{text}\n[[access]]\nidentities = [\"spiffe://x/*\"]\nactions = [\"acquire\"]\n");
    server_with(&text, clock).await
}

/// A plaintext tonic client of the capacity service at `addr`.
pub async fn client(addr: SocketAddr) -> CapacityClient<Channel> {
    CapacityClient::connect(format!("http://{addr}"))
        .await
        .expect("connects")
}

/// A one-band request for `wants` of `id`, holding `has` if given.
pub fn rr(id: &str, wants: f64, has: Option<f64>) -> pb::ResourceRequest {
    pb::ResourceRequest {
        resource_id: id.into(),
        priority: 0,
        has: has.map(|c| pb::Lease {
            expiry_time: 0,
            refresh_interval: 0,
            capacity: c,
            remaining_ms: None,
        }),
        wants,
        has_remaining_ms: None,
    }
}

/// GetCapacity as `client_id` for `resources` (the call must succeed).
pub async fn get(
    c: &mut CapacityClient<Channel>,
    client_id: &str,
    resources: Vec<pb::ResourceRequest>,
) -> pb::GetCapacityResponse {
    c.get_capacity(pb::GetCapacityRequest {
        client_id: client_id.into(),
        resource: resources,
    })
    .await
    .expect("GetCapacity succeeds")
    .into_inner()
}

/// Capacity granted for the first resource of a one-resource request.
pub async fn cap(
    c: &mut CapacityClient<Channel>,
    client_id: &str,
    id: &str,
    wants: f64,
    has: Option<f64>,
) -> f64 {
    let r = get(c, client_id, vec![rr(id, wants, has)]).await;
    assert!(r.mastership.is_none(), "unexpected redirect: {r:?}");
    r.response[0].gets.capacity
}

/// A plain HTTP/1.0 GET; returns (status line, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("http connects");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// The value of a metric line (exact name with labels) in a /metrics body.
pub fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A config of four resources for RPC tests: `fair` (FAIR_SHARE 100),
/// `learn` (the same, learning for 10 s), `db/special` (STATIC 5) and
/// `db/*` (PROPORTIONAL_SHARE 50, safe capacity 2).
pub const CONFIG: &str = r#"
[[resources]]
identifier_glob = "fair"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 4
learning_mode_duration = 0

[[resources]]
identifier_glob = "learn"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 4
learning_mode_duration = 10

[[resources]]
identifier_glob = "db/special"
capacity = 5
[resources.algorithm]
kind = "STATIC"
lease_length = 20
refresh_interval = 4
learning_mode_duration = 0

[[resources]]
identifier_glob = "db/*"
capacity = 50
safe_capacity = 2
[resources.algorithm]
kind = "PROPORTIONAL_SHARE"
lease_length = 20
refresh_interval = 4
learning_mode_duration = 0
parameters = { decay_factor = "0.5" }
"#;

/// Asserts that a standby that does not know the master answers Discovery
/// (not master, no address) and refuses every other RPC with UNAVAILABLE.
pub async fn assert_unavailable_standby(standby: &str) {
    let mut c = CapacityClient::connect(format!("http://{standby}"))
        .await
        .expect("connects");
    let d = c
        .discovery(pb::DiscoveryRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!d.is_master && d.mastership.master_address.is_none());
    let e = c
        .get_capacity(pb::GetCapacityRequest {
            client_id: "a".into(),
            resource: vec![rr("r", 1.0, None)],
        })
        .await
        .expect_err("no master to redirect to");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains("master is unknown"), "{e:?}");
    let e = c
        .release_capacity(pb::ReleaseCapacityRequest {
            client_id: "a".into(),
            resource_id: vec!["r".into()],
        })
        .await
        .expect_err("no master to redirect to");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
}

/// Asserts that the server at `standby` redirects every RPC to `master`.
pub async fn assert_redirects(standby: &str, master: Option<&str>) {
    let mut c = CapacityClient::connect(format!("http://{standby}"))
        .await
        .expect("connects");
    let want = Some(pb::Mastership {
        master_address: master.map(str::to_string),
    });
    let d = c
        .discovery(pb::DiscoveryRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!d.is_master);
    assert_eq!(d.mastership.master_address.as_deref(), master);
    let r = get(&mut c, "a", vec![rr("r", 1.0, None)]).await;
    assert!(r.response.is_empty());
    assert_eq!(r.mastership, want);
    let r = c
        .get_server_capacity(pb::GetServerCapacityRequest {
            report: None,
            server_id: "s".into(),
            resource: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.mastership, want);
    let r = c
        .release_capacity(pb::ReleaseCapacityRequest {
            client_id: "a".into(),
            resource_id: vec!["r".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.mastership, want);
}

/// One HTTPS GET (HTTP/1.0) trusting `ca`, presenting `me` if given and
/// sending `bearer` as a token if given: the status line and the body.
pub async fn https_get(
    addr: SocketAddr,
    path: &str,
    ca: &std::path::Path,
    me: Option<&crate::CertFiles>,
    bearer: Option<&str>,
) -> (String, String) {
    use doorman_net::tls::{pem_certs, pem_key};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certs(ca).unwrap().1 {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match me {
        Some(m) => b
            .with_client_auth_cert(pem_certs(&m.cert).unwrap().1, pem_key(&m.key).unwrap().1)
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut s = connector.connect(name, tcp).await.expect("TLS handshake");
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    (status, body.to_string())
}
