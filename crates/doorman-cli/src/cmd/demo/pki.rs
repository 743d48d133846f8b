//! The demo's certificates with `--tls`: a throwaway CA made at start and
//! one certificate per node and for the clients, each usable both to serve
//! (127.0.0.1 and `localhost`) and to authenticate as a client (a node
//! presents its own to its parent), named by a SPIFFE-style URI so the
//! status pages and logs show who is who. Everything is written as PEM
//! into a temporary directory that lives as long as the demo; or the
//! user's own CA, certificate and key are used for every node.
//!
//! Must not: be used for anything but the demo (the CA's key sits in a
//! temporary directory).

use std::path::{Path, PathBuf};

use anyhow::Context;
use doorman_client::ClientTls;
use doorman_pki::{Ca, CertSpec};
use doorman_transport::tls::TlsFiles;

/// The TLS material of every link of the demo.
pub struct DemoTls {
    ca: PathBuf,
    certs: Source,
}

enum Source {
    /// Made for this run: a directory with one certificate per name.
    Made { dir: tempfile::TempDir, ca: Box<Ca> },
    /// The user's: one certificate and key for everyone.
    Given { cert: PathBuf, key: PathBuf },
}

impl DemoTls {
    /// A new CA in a temporary directory.
    pub fn make() -> anyhow::Result<DemoTls> {
        let dir = tempfile::Builder::new()
            .prefix("doorman-demo-tls-")
            .tempdir()
            .context("cannot create a directory for the demo's certificates")?;
        let ca = Ca::new("doorman demo CA (throwaway)")?;
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.cert_pem())?;
        Ok(DemoTls {
            ca: ca_file,
            certs: Source::Made {
                dir,
                ca: Box::new(ca),
            },
        })
    }

    /// The user's CA, certificate and key, for every node and client.
    pub fn given(ca: &Path, cert: &Path, key: &Path) -> DemoTls {
        DemoTls {
            ca: ca.to_path_buf(),
            certs: Source::Given {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            },
        }
    }

    /// Where the CA certificate is.
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    /// The directory of the certificates made for this run, if made.
    pub fn dir(&self) -> Option<&Path> {
        match &self.certs {
            Source::Made { dir, .. } => Some(dir.path()),
            Source::Given { .. } => None,
        }
    }

    /// The certificate and key `name` uses (made on first use).
    pub fn cert(&self, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        match &self.certs {
            Source::Given { cert, key } => Ok((cert.clone(), key.clone())),
            Source::Made { dir, ca } => {
                let cert = dir.path().join(format!("{name}.pem"));
                let key = dir.path().join(format!("{name}.key"));
                if !cert.exists() {
                    let (c, k) = issue(ca, name)?;
                    std::fs::write(&cert, c)?;
                    std::fs::write(&key, k)?;
                }
                Ok((cert, key))
            }
        }
    }

    /// A server's files: its certificate, and the CA its callers' must
    /// chain to (mutual TLS).
    pub fn server(&self, name: &str) -> anyhow::Result<TlsFiles> {
        let (cert, key) = self.cert(name)?;
        Ok(TlsFiles {
            cert,
            key,
            client_ca: Some(self.ca.clone()),
        })
    }

    /// What `name` uses to connect: the CA, and its own certificate.
    pub fn client(&self, name: &str) -> anyhow::Result<ClientTls> {
        let (cert, key) = self.cert(name)?;
        Ok(ClientTls::from_files(&self.ca, Some(&cert), Some(&key))?)
    }
}

/// A certificate for `name` (identity `spiffe://doorman.demo/NAME`), valid
/// for 127.0.0.1 and `localhost`, to serve and to authenticate as a
/// client; its PEM and its key's.
fn issue(ca: &Ca, name: &str) -> anyhow::Result<(String, String)> {
    let spec = CertSpec {
        uris: vec![format!("spiffe://doorman.demo/{name}")],
        ..CertSpec::local(name)
    };
    let issued = ca.issue(&spec)?;
    Ok((issued.cert_pem, issued.key_pem))
}
