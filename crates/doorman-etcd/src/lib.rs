//! Doorman's etcd boundary, buildable and testable without the server:
//! the connection (here: where etcd is and how to authenticate to it,
//! [`EtcdOptions`]: endpoints, TLS with an optional client certificate, a
//! user and password, with short connect timeouts and keep-alives, so a
//! dead etcd is noticed in seconds), the master election and its lease
//! horizon record ([`EtcdElection`], `election.rs`, `horizon.rs`), and the
//! audited config store ([`audit`]: push, history, rollback). The server's
//! etcd config source watches the key through [`connect`].
//!
//! Must not: hold state or retry in the connection (callers back off
//! themselves), show a password (its `Debug` is redacted), or know the
//! server (an election reaches the core through `doorman_election`'s
//! `Mastership`).

pub mod audit;
mod clock;
mod election;
mod error;
mod horizon;
mod replicas;

pub use election::EtcdElection;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use doorman_net::tls::{pem_certs, pem_key, TlsFileError};
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tokio::time::timeout;

pub use error::{EtcdError, EtcdSetupError};

/// Where etcd is and how to authenticate to it.
#[derive(Clone, Default)]
pub struct EtcdOptions {
    /// Endpoints: `host:port` or URLs.
    pub endpoints: Vec<String>,
    /// TLS towards etcd: `https://` is assumed for endpoints without a
    /// scheme.
    pub tls: Option<EtcdTls>,
    /// etcd's user authentication.
    pub user: Option<EtcdUser>,
    /// The files `tls` and `user` were read from, read again at each
    /// connection.
    pub files: Option<Arc<EtcdFiles>>,
}

/// TLS towards etcd: the CA that signed etcd's certificate, and our client
/// certificate when etcd requires one (`--client-cert-auth`).
#[derive(Clone, Debug)]
pub struct EtcdTls {
    /// PEM of the CA.
    pub ca_pem: Vec<u8>,
    /// PEM of our certificate chain and key.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// An etcd user and its password.
#[derive(Clone)]
pub struct EtcdUser {
    /// The user name.
    pub name: String,
    /// The password (never printed).
    pub password: String,
}

impl fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtcdUser({}, password redacted)", self.name)
    }
}

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("endpoints", &self.endpoints)
            .field("tls", &self.tls.is_some())
            .field("user", &self.user)
            .finish()
    }
}

impl From<Vec<String>> for EtcdOptions {
    fn from(endpoints: Vec<String>) -> Self {
        EtcdOptions {
            endpoints,
            ..Default::default()
        }
    }
}

/// The files the etcd options come from (command-line flags). They are
/// read again at every new connection, so a rotated client certificate or
/// a changed password is used from the next reconnect on.
#[derive(Debug, Clone, Default)]
pub struct EtcdFiles {
    /// `--etcd-ca`.
    pub ca: Option<PathBuf>,
    /// `--etcd-cert`.
    pub cert: Option<PathBuf>,
    /// `--etcd-key`.
    pub key: Option<PathBuf>,
    /// `--etcd-user`.
    pub user: Option<String>,
    /// `--etcd-password-file`.
    pub password_file: Option<PathBuf>,
}

impl EtcdOptions {
    /// Options from endpoints and files, each file checked: a missing or
    /// unreadable one, a certificate without a key, or a user without a
    /// password file is an error naming the flag.
    pub fn from_files(endpoints: Vec<String>, f: EtcdFiles) -> Result<EtcdOptions, EtcdSetupError> {
        let mut opts = EtcdOptions::read(endpoints, &f)?;
        opts.files = Some(Arc::new(f));
        Ok(opts)
    }

    fn read(endpoints: Vec<String>, f: &EtcdFiles) -> Result<EtcdOptions, EtcdSetupError> {
        let (ca, cert, key) = (f.ca.as_deref(), f.cert.as_deref(), f.key.as_deref());
        let tls = match (ca, cert, key) {
            (None, None, None) => None,
            (None, _, _) => return Err(EtcdSetupError::CertWithoutCa),
            (Some(ca), cert, key) => Some(EtcdTls {
                ca_pem: flagged("--etcd-ca", pem_certs(ca))?,
                identity: match (cert, key) {
                    (None, None) => None,
                    (Some(c), Some(k)) => Some((
                        flagged("--etcd-cert", pem_certs(c))?,
                        flagged("--etcd-key", pem_key(k))?,
                    )),
                    _ => return Err(EtcdSetupError::CertWithoutKey),
                },
            }),
        };
        let user = match (&f.user, &f.password_file) {
            (None, None) => None,
            (Some(name), Some(p)) => Some(EtcdUser {
                name: name.to_string(),
                password: read_password(p)?,
            }),
            _ => return Err(EtcdSetupError::UserWithoutPassword),
        };
        Ok(EtcdOptions {
            endpoints,
            tls,
            user,
            files: None,
        })
    }

    /// The options with their files read again (a rotated certificate, a
    /// new password); if a file is now unreadable or wrong, the material
    /// read before stays, with a warning.
    fn reread(&self) -> std::borrow::Cow<'_, EtcdOptions> {
        let Some(files) = &self.files else {
            return std::borrow::Cow::Borrowed(self);
        };
        match EtcdOptions::read(self.endpoints.clone(), files) {
            Ok(mut fresh) => {
                fresh.files = Some(files.clone());
                std::borrow::Cow::Owned(fresh)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot re-read the etcd TLS or password files; using the ones read before");
                std::borrow::Cow::Borrowed(self)
            }
        }
    }

    /// The endpoints as etcd-client wants them: with TLS, `https://` for
    /// those without a scheme.
    fn urls(&self) -> Vec<String> {
        self.endpoints
            .iter()
            .map(|e| match (&self.tls, e.contains("://")) {
                (Some(_), false) => format!("https://{e}"),
                _ => e.clone(),
            })
            .collect()
    }

    fn connect_options(&self, connect_timeout: Duration) -> ConnectOptions {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(connect_timeout)
            .with_keep_alive(KEEP_ALIVE, connect_timeout)
            .with_keep_alive_while_idle(false)
            .with_require_leader(true);
        if let Some(t) = &self.tls {
            let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(&t.ca_pem));
            if let Some((cert, key)) = &t.identity {
                tls = tls.identity(Identity::from_pem(cert, key));
            }
            opts = opts.with_tls(tls);
        }
        if let Some(u) = &self.user {
            opts = opts
                .with_user(u.name.clone(), u.password.clone())
                .with_auto_token_refresh(true);
        }
        opts
    }
}

/// The PEM text of a file read by `pem_certs`/`pem_key`, or the error
/// naming the flag.
fn flagged<T>(
    flag: &'static str,
    r: Result<(Vec<u8>, T), TlsFileError>,
) -> Result<Vec<u8>, EtcdSetupError> {
    r.map(|(pem, _)| pem)
        .map_err(|source| EtcdSetupError::File { flag, source })
}

fn read_password(path: &Path) -> Result<String, EtcdSetupError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| EtcdSetupError::PasswordUnreadable {
            path: path.to_path_buf(),
            source,
        })?;
    let password = text.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        return Err(EtcdSetupError::PasswordEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(password)
}

/// How often a connection to etcd with calls in flight (the config watch,
/// the election's streams) pings to find out it is dead. etcd closes a
/// connection that pings more often than its `--grpc-keepalive-min-time`
/// (5 s by default) with GOAWAY `too_many_pings` after the third such ping,
/// and one without calls in flight that pings at all (it does not permit
/// pings without streams): so every 10 s, and never while idle (a call on
/// an idle connection that died fails on its own deadline).
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Connects to etcd with short timeouts (campaigns block, so no request
/// timeout is set; callers bound each call themselves).
pub async fn connect(etcd: &EtcdOptions, connect_timeout: Duration) -> Result<Client, EtcdError> {
    let etcd = etcd.reread();
    let endpoints = reachable(etcd.urls(), connect_timeout).await;
    let opts = etcd.connect_options(connect_timeout);
    let what = format!("cannot connect to etcd {endpoints:?}");
    timeout(connect_timeout * 2, Client::connect(&endpoints, Some(opts)))
        .await
        .map_err(EtcdError::timed_out(what.clone()))?
        .map_err(EtcdError::failed(what))
}

/// The endpoints that accept a TCP connection within `within`, in their
/// order (all of them if none does: the connection then fails with the
/// client's own error). The etcd client balances calls over every
/// endpoint it is given and goes on sending some to one that is down:
/// measured with the fault harness, a three-member cluster whose leader
/// was killed left a node without a master for over 20 s, its lease
/// grants failing with "tcp connect error". Each connection (every
/// election session, every config watch) asks again, so a member that
/// comes back is used from the next one on.
async fn reachable(urls: Vec<String>, within: Duration) -> Vec<String> {
    let mut probes = tokio::task::JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let authority = url
            .split_once("://")
            .map_or(url.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        probes.spawn(async move {
            let ok = timeout(within, tokio::net::TcpStream::connect(authority)).await;
            (i, matches!(ok, Ok(Ok(_))))
        });
    }
    let mut up = vec![false; urls.len()];
    while let Some(r) = probes.join_next().await {
        if let Ok((i, ok)) = r {
            up[i] = ok;
        }
    }
    if !up.contains(&true) {
        return urls;
    }
    urls.into_iter()
        .zip(up)
        .filter_map(|(u, ok)| ok.then_some(u))
        .collect()
}
