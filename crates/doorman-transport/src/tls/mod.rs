//! The server's TLS material: certificate chain, private key and, for
//! mutual TLS, the CA that client certificates must chain to. Loaded at
//! start (a bad file is a start error) and re-read when any of the files
//! changes (as cert-manager and similar tools rotate them, including
//! Kubernetes' symlink swaps) and on SIGHUP: new connections use the new
//! material, open ones keep theirs, and a bad new file is logged and
//! counted while the old material stays.
//!
//! Must not: accept connections (`accept.rs`) or decide what an identity
//! may do.

mod accept;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use doorman_net::tls::{pem_certs, pem_key, TlsFileError};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::sync::watch;

pub use crate::identity::identity_of;
pub use accept::{secure, Peer, PeerInfo};

use crate::hangup::Look;

/// Where the TLS boundary reports what happened (the server's metrics
/// implement it): failed handshakes by port and reason, and reloads.
pub trait TlsEvents: Send + Sync + 'static {
    /// A handshake on `port` failed for `reason` (a counter label).
    fn handshake_failed(&self, port: Port, reason: &'static str);
    /// The material was reloaded (`ok`) or a new file was rejected.
    fn reloaded(&self, ok: bool);
}

/// The files of `--tls-cert`, `--tls-key` and `--tls-client-ca`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates client certificates must chain to; `None` means
    /// no client certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

/// Why TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or parsed.
    #[error(transparent)]
    File(#[from] TlsFileError),
    /// rustls refused the combination (e.g. key does not match the
    /// certificate).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Which listener a config is for: gRPC speaks HTTP/2, the pages HTTP/1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The gRPC port (ALPN `h2`).
    Grpc,
    /// The HTTP pages (ALPN `http/1.1`).
    Http,
}

impl Port {
    /// The label used in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Port::Grpc => "grpc",
            Port::Http => "http",
        }
    }
}

/// The current server configs of both ports, swapped as a whole.
#[derive(Debug)]
pub struct ServerTls {
    files: TlsFiles,
    current: RwLock<[Arc<ServerConfig>; 2]>,
    stamps: Mutex<Vec<Option<SystemTime>>>,
}

impl ServerTls {
    /// Loads the files; an error names the file and what is wrong.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let configs = build(&files)?;
        let stamps = stamps(&files);
        Ok(ServerTls {
            files,
            current: RwLock::new(configs),
            stamps: Mutex::new(stamps),
        })
    }

    /// The files this material comes from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// True if clients must present a certificate.
    pub fn requires_client_cert(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// The acceptor new connections of `port` use now.
    pub fn acceptor(&self, port: Port) -> tokio_rustls::TlsAcceptor {
        let configs = self.current.read().unwrap_or_else(|e| e.into_inner());
        let i = usize::from(port == Port::Http);
        tokio_rustls::TlsAcceptor::from(configs[i].clone())
    }

    /// Re-reads the files and installs them; on error the old material
    /// stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let stamps = stamps(&self.files);
        let configs = build(&self.files)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = configs;
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) = stamps;
        Ok(())
    }

    /// True if a file's modification time (through symlinks) changed since
    /// the last load.
    pub fn changed(&self) -> bool {
        let now = stamps(&self.files);
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) != now
    }

    /// Reloads, logging and counting the outcome.
    fn reload_logged(&self, events: &dyn TlsEvents, why: &str) {
        match self.reload() {
            Ok(()) => {
                events.reloaded(true);
                tracing::info!(cert = %self.files.cert.display(), "TLS material reloaded ({why})");
            }
            Err(e) => {
                events.reloaded(false);
                // Remember the stamps so a bad file is reported once, not
                // at every poll; a fixed file changes them again.
                *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) = stamps(&self.files);
                tracing::error!(error = %e, "new TLS material rejected ({why}); the old one stays in use");
            }
        }
    }
}

/// Watches the files every `interval` and reloads on change or SIGHUP.
pub fn spawn_watch(
    tls: Arc<ServerTls>,
    events: Arc<dyn TlsEvents>,
    interval: Duration,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(crate::hangup::watch_files(interval, stop, move |look| {
        if look == Look::Hangup || tls.changed() {
            tls.reload_logged(&*events, look.why());
        }
    }))
}

fn stamps(files: &TlsFiles) -> Vec<Option<SystemTime>> {
    let paths = [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ];
    paths
        .iter()
        .flatten()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File(TlsFileError {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    })
}

/// The gRPC port's config (a client certificate required when there is a
/// client CA) and the HTTP port's (a client certificate verified if sent,
/// so `/metrics` and `/healthz` stay reachable without one; the pages
/// check identities themselves).
fn build(files: &TlsFiles) -> Result<[Arc<ServerConfig>; 2], TlsError> {
    let grpc = config(files, true, b"h2")?;
    let http = config(files, false, b"http/1.1")?;
    Ok([grpc, http])
}

fn config(files: &TlsFiles, require: bool, alpn: &[u8]) -> Result<Arc<ServerConfig>, TlsError> {
    let (_, certs) = pem_certs(&files.cert)?;
    let (_, key) = pem_key(&files.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in pem_certs(ca)?.1 {
                roots.add(c).map_err(|e| file_error(ca, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match require {
                true => verifier,
                false => verifier.allow_unauthenticated(),
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| file_error(ca, e))?)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(format!("{}: {e}", files.key.display())))?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}
