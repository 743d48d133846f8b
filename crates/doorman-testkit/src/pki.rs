//! Certificates made in the test with the one throwaway CA of
//! `doorman-pki`: server certificates for 127.0.0.1 and `localhost`,
//! client certificates with an identity (URI SAN, DNS SAN or only a CN),
//! expired ones, and a second, untrusted CA. Everything is written as PEM
//! files into a temporary directory that lives as long as the [`Pki`].

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use doorman_pki::{Ca, CertSpec};

/// A test CA and the directory its files are written to.
pub struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
    name: String,
}

/// A certificate and key as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// PEM certificate.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// Whom a client certificate names.
#[derive(Debug, Clone, Copy)]
pub enum Name<'a> {
    /// A URI SAN (e.g. a SPIFFE id).
    Uri(&'a str),
    /// A DNS SAN.
    Dns(&'a str),
    /// Only a subject common name.
    CommonName(&'a str),
}

impl Pki {
    /// A new CA named `name`; its certificate is `<dir>/<name>-ca.pem`.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let ca = Ca::new(&format!("{name} test CA")).expect("CA certificate");
        std::fs::write(dir.path().join(format!("{name}-ca.pem")), ca.cert_pem()).expect("write CA");
        Pki {
            dir,
            ca,
            name: name.to_string(),
        }
    }

    /// The CA certificate file.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join(format!("{}-ca.pem", self.name))
    }

    /// The directory files are written to.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A certificate for 127.0.0.1 and `localhost` that serves (and may
    /// present itself to a parent), written as `<file>.pem` and
    /// `<file>.key`.
    pub fn server(&self, file: &str) -> CertFiles {
        self.issue(&CertSpec::local(file), file)
    }

    /// A certificate for a host at `ips` that serves and is a client too
    /// (a server that leases from its parent, an etcd member), naming
    /// `name`.
    pub fn node(&self, file: &str, ips: &[IpAddr], name: Name<'_>) -> CertFiles {
        let mut spec = client_spec(name);
        spec.common_name = Some(file.into());
        spec.ips = ips.to_vec();
        spec.server = true;
        self.issue(&spec, file)
    }

    /// A client certificate naming `name`.
    pub fn client(&self, file: &str, name: Name<'_>) -> CertFiles {
        self.issue(&client_spec(name), file)
    }

    /// A client certificate naming `name` that expired in 2021.
    pub fn expired_client(&self, file: &str, name: Name<'_>) -> CertFiles {
        let spec = CertSpec {
            expired: true,
            ..client_spec(name)
        };
        self.issue(&spec, file)
    }

    fn issue(&self, spec: &CertSpec, file: &str) -> CertFiles {
        let issued = self.ca.issue(spec).unwrap_or_else(|e| panic!("{e}"));
        let files = CertFiles {
            cert: self.dir.path().join(format!("{file}.pem")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, issued.cert_pem).expect("write certificate");
        std::fs::write(&files.key, issued.key_pem).expect("write key");
        files
    }
}

fn client_spec(name: Name<'_>) -> CertSpec {
    let mut spec = CertSpec {
        client: true,
        ..CertSpec::default()
    };
    match name {
        Name::Uri(u) => spec.uris.push(u.into()),
        Name::Dns(d) => spec.dns.push(d.into()),
        Name::CommonName(cn) => spec.common_name = Some(cn.into()),
    }
    spec
}
