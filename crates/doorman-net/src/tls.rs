//! TLS towards Doorman servers: the CA the servers' certificates must
//! chain to and, for mutual TLS, this client's own certificate and key.
//! Files are read and checked when the options are made, so a wrong path
//! or a file without a certificate is an error at start, naming the file.
//! Also the one place an address becomes an [`Endpoint`], plain or TLS.
//!
//! Must not: retry or decide anything about leases.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// TLS options of a client (also used by intermediate servers towards
/// their parent and by every CLI command that connects).
#[derive(Clone)]
pub struct ClientTls {
    ca: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    server_name: Option<String>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("client_certificate", &self.identity.is_some())
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// A TLS file that could not be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct TlsFileError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

fn file_error(path: &Path, reason: impl ToString) -> TlsFileError {
    TlsFileError {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|e| file_error(path, format!("cannot read: {e}")))
}

/// A PEM file of certificates (at least one): its text and the parsed
/// certificates. Servers and clients read their certificate files here.
pub fn pem_certs(path: &Path) -> Result<(Vec<u8>, Vec<CertificateDer<'static>>), TlsFileError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no PEM certificate in the file"));
    }
    Ok((pem, certs))
}

/// A PEM private key file (PKCS#8, PKCS#1 or SEC1): its text and the key.
pub fn pem_key(path: &Path) -> Result<(Vec<u8>, PrivateKeyDer<'static>), TlsFileError> {
    let pem = read(path)?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| file_error(path, format!("no usable PEM private key: {e}")))?;
    Ok((pem, key))
}

impl ClientTls {
    /// Trust servers whose certificates chain to the PEM CA file `ca`;
    /// present `cert`/`key` (PEM) if given (both or neither).
    pub fn from_files(
        ca: &Path,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<Self, TlsFileError> {
        let (ca_pem, _) = pem_certs(ca)?;
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some(read_identity(c, k)?),
            (None, None) => None,
            (Some(c), None) | (None, Some(c)) => {
                return Err(TlsFileError {
                    path: c.to_path_buf(),
                    reason: "a client certificate needs both --tls-cert and --tls-key".into(),
                })
            }
        };
        Ok(ClientTls {
            ca: ca_pem,
            identity,
            server_name: None,
        })
    }

    /// Checks servers' certificates against `name` instead of the host of
    /// the address dialled.
    pub fn with_server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// True if a client certificate is presented.
    pub fn has_client_certificate(&self) -> bool {
        self.identity.is_some()
    }

    /// The name servers' certificates are checked against, if set.
    pub fn server_name(&self) -> Option<String> {
        self.server_name.clone()
    }

    /// The same settings as a rustls client config (for the HTTP pages).
    pub fn rustls_config(&self) -> Result<rustls::ClientConfig, String> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&self.ca) {
            roots
                .add(c.map_err(|e| format!("the CA: {e}"))?)
                .map_err(|e| format!("the CA: {e}"))?;
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                let certs = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("the client certificate: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| format!("the client key: {e}"))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| e.to_string())
            }
        }
    }

    fn config(&self) -> ClientTlsConfig {
        let mut c = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca));
        if let Some((cert, key)) = &self.identity {
            c = c.identity(Identity::from_pem(cert, key));
        }
        if let Some(name) = &self.server_name {
            c = c.domain_name(name.clone());
        }
        c
    }
}

fn read_identity(cert: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsFileError> {
    Ok((pem_certs(cert)?.0, pem_key(key)?.0))
}

/// Why an address cannot be an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Not a usable address or URI.
    #[error("bad address {addr:?}: {source}")]
    Address {
        /// The address.
        addr: String,
        /// Why.
        source: tonic::transport::Error,
    },
    /// The TLS settings do not apply to it.
    #[error("TLS for {addr}: {source}")]
    Tls {
        /// The address.
        addr: String,
        /// Why.
        source: tonic::transport::Error,
    },
}

/// `addr` (`host:port` or a URI) as an endpoint: `http://` without TLS,
/// `https://` with it.
pub fn endpoint(addr: &str, tls: Option<&ClientTls>) -> Result<Endpoint, EndpointError> {
    let uri = match (addr.split_once("://"), tls) {
        (Some(_), _) => addr.to_string(),
        (None, None) => format!("http://{addr}"),
        (None, Some(_)) => format!("https://{addr}"),
    };
    let addr = || addr.to_string();
    let ep = Endpoint::from_shared(uri).map_err(|source| EndpointError::Address {
        addr: addr(),
        source,
    })?;
    match tls {
        Some(t) => ep
            .tls_config(t.config())
            .map_err(|source| EndpointError::Tls {
                addr: addr(),
                source,
            }),
        None => Ok(ep),
    }
}
