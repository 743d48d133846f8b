//! Throwaway certificate authorities, for the demo (`doorman demo --tls`),
//! the tests and the fault harness: one CA made at start and the
//! certificates it issues (to serve on addresses and names, to
//! authenticate as a client by a URI, DNS name or common name, or both),
//! as PEM text. The test kit's `Pki` and the demo's `DemoTls` write them
//! to files; `doorman-faults pki` writes them for the Python checks.
//!
//! Must not: do I/O, or be used for a production CA (the CA's key lives in
//! memory and wherever its user writes it).

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// Why a certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused a name or failed to sign.
    #[error("certificate {what}: {source}")]
    Rcgen {
        /// What was being made.
        what: String,
        /// rcgen's reason.
        source: rcgen::Error,
    },
}

/// A certificate authority and its certificate.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// What a certificate is for and whom it names.
#[derive(Debug, Clone, Default)]
pub struct CertSpec {
    /// The subject's common name, if any.
    pub common_name: Option<String>,
    /// Addresses it serves on (IP SANs).
    pub ips: Vec<IpAddr>,
    /// Host names it serves as, or names it as a client (DNS SANs).
    pub dns: Vec<String>,
    /// Identities it names (URI SANs, e.g. SPIFFE ids).
    pub uris: Vec<String>,
    /// It may serve (TLS server authentication).
    pub server: bool,
    /// It may authenticate as a client.
    pub client: bool,
    /// Valid only in 2020 (an expired certificate, for tests).
    pub expired: bool,
}

/// A certificate and its private key, as PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl CertSpec {
    /// A certificate named `name` (common name) for 127.0.0.1 and
    /// `localhost` that may serve and authenticate as a client: a server
    /// or a node on this machine.
    pub fn local(name: &str) -> CertSpec {
        CertSpec {
            common_name: Some(name.into()),
            dns: vec!["localhost".into()],
            ips: vec![[127, 0, 0, 1].into()],
            server: true,
            client: true,
            ..CertSpec::default()
        }
    }
}

impl Ca {
    /// A new CA whose certificate names `common_name`.
    pub fn new(common_name: &str) -> Result<Ca, PkiError> {
        let mut p = CertificateParams::default();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p.distinguished_name.push(DnType::CommonName, common_name);
        let what = || format!("of CA {common_name:?}");
        let key = KeyPair::generate().map_err(|e| rcgen_error(what(), e))?;
        let cert = p.self_signed(&key).map_err(|e| rcgen_error(what(), e))?;
        Ok(Ca {
            pem: cert.pem(),
            issuer: Issuer::new(p, key),
        })
    }

    /// The CA's certificate.
    pub fn cert_pem(&self) -> &str {
        &self.pem
    }

    /// A certificate as `spec` says, signed by this CA, with a new key.
    pub fn issue(&self, spec: &CertSpec) -> Result<Issued, PkiError> {
        let what = || format!("for {spec:?}");
        let p = params(spec).map_err(|e| rcgen_error(what(), e))?;
        let key = KeyPair::generate().map_err(|e| rcgen_error(what(), e))?;
        let cert = p
            .signed_by(&key, &self.issuer)
            .map_err(|e| rcgen_error(what(), e))?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn params(spec: &CertSpec) -> Result<CertificateParams, rcgen::Error> {
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    if let Some(cn) = &spec.common_name {
        p.distinguished_name.push(DnType::CommonName, cn.as_str());
    }
    for d in &spec.dns {
        p.subject_alt_names
            .push(SanType::DnsName(d.as_str().try_into()?));
    }
    for ip in &spec.ips {
        p.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    for u in &spec.uris {
        p.subject_alt_names
            .push(SanType::URI(u.as_str().try_into()?));
    }
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    if spec.server {
        p.key_usages.push(KeyUsagePurpose::KeyEncipherment);
        p.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
    }
    if spec.client {
        p.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    if spec.expired {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    Ok(p)
}

fn rcgen_error(what: String, source: rcgen::Error) -> PkiError {
    PkiError::Rcgen { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_certificate_is_pem_signed_by_a_ca_that_is_pem_too() {
        let ca = Ca::new("test CA").unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let spec = CertSpec {
            common_name: Some("node".into()),
            ips: vec![[127, 0, 0, 1].into()],
            uris: vec!["spiffe://x/node".into()],
            server: true,
            client: true,
            ..CertSpec::default()
        };
        let issued = ca.issue(&spec).unwrap();
        assert!(issued.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(issued.key_pem.contains("PRIVATE KEY"));
    }

    #[test]
    fn a_name_rcgen_refuses_is_an_error_that_says_what_was_made() {
        let ca = Ca::new("test CA").unwrap();
        let spec = CertSpec {
            dns: vec!["bücher.example".into()],
            ..CertSpec::default()
        };
        let err = ca.issue(&spec).expect_err("a DNS name must be ASCII (IA5)");
        assert!(err.to_string().contains("bücher.example"), "{err}");
    }
}
