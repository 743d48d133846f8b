//! Certificates made in the test with rcgen: a CA, server certificates for
//! 127.0.0.1 and `localhost`, client certificates with an identity (URI
//! SAN, DNS SAN or only a CN), expired ones, and a second, untrusted CA.
//! Everything is written as PEM files into a temporary directory that
//! lives as long as the [`Pki`].

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// A test CA and the directory its files are written to.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
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
        let mut p = CertificateParams::default();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p.distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        let key = KeyPair::generate().expect("CA key");
        let cert = p.self_signed(&key).expect("CA certificate");
        std::fs::write(dir.path().join(format!("{name}-ca.pem")), cert.pem()).expect("write CA");
        Pki {
            dir,
            issuer: Issuer::new(p, key),
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

    /// A server certificate for 127.0.0.1 and `localhost`, written as
    /// `<file>.pem` and `<file>.key`.
    pub fn server(&self, file: &str) -> CertFiles {
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        p.subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        p.distinguished_name.push(DnType::CommonName, file);
        self.issue(p, file)
    }

    /// A certificate for a host at `ips` that serves and is a client too
    /// (a server that leases from its parent, an etcd member), naming
    /// `name`.
    pub fn node(&self, file: &str, ips: &[std::net::IpAddr], name: Name<'_>) -> CertFiles {
        let mut p = client_params(name);
        p.distinguished_name.push(DnType::CommonName, file);
        for ip in ips {
            p.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        p.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.issue(p, file)
    }

    /// A client certificate naming `name`.
    pub fn client(&self, file: &str, name: Name<'_>) -> CertFiles {
        self.issue(client_params(name), file)
    }

    /// A client certificate naming `name` that expired yesterday.
    pub fn expired_client(&self, file: &str, name: Name<'_>) -> CertFiles {
        let mut p = client_params(name);
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        self.issue(p, file)
    }

    fn issue(&self, p: CertificateParams, file: &str) -> CertFiles {
        let key = KeyPair::generate().expect("key");
        let cert = p.signed_by(&key, &self.issuer).expect("certificate");
        let files = CertFiles {
            cert: self.dir.path().join(format!("{file}.pem")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
        files
    }
}

fn client_params(name: Name<'_>) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    match name {
        Name::Uri(u) => p
            .subject_alt_names
            .push(SanType::URI(u.try_into().expect("URI"))),
        Name::Dns(d) => p
            .subject_alt_names
            .push(SanType::DnsName(d.try_into().expect("DNS name"))),
        Name::CommonName(cn) => p.distinguished_name.push(DnType::CommonName, cn),
    }
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    p
}
