//! Who a client certificate names: its first URI SAN (such as a SPIFFE id),
//! else its first DNS SAN, else its subject's common name.
//!
//! Must not: verify the certificate (rustls did, during the handshake).

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The identity of a DER certificate, if it names one.
pub fn identity_of(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| san.value.general_names.clone())
        .unwrap_or_default();
    let uri = names.iter().find_map(|n| match n {
        GeneralName::URI(u) => Some(u.to_string()),
        _ => None,
    });
    let dns = || {
        names.iter().find_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            _ => None,
        })
    };
    let cn = || {
        cert.subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string)
    };
    uri.or_else(dns).or_else(cn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn cert(sans: Vec<SanType>, cn: Option<&str>) -> Vec<u8> {
        let mut p = CertificateParams::default();
        p.distinguished_name = DistinguishedName::new();
        p.subject_alt_names = sans;
        if let Some(cn) = cn {
            p.distinguished_name.push(DnType::CommonName, cn);
        }
        let key = KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn uri_san_then_dns_san_then_common_name() {
        let spiffe = SanType::URI("spiffe://example.org/ns/a/sa/leaf".try_into().unwrap());
        let dns = SanType::DnsName("leaf.example.org".try_into().unwrap());
        let both = cert(vec![dns.clone(), spiffe], Some("cn"));
        assert_eq!(
            identity_of(&both).as_deref(),
            Some("spiffe://example.org/ns/a/sa/leaf")
        );
        let dns_only = cert(vec![dns], Some("cn"));
        assert_eq!(identity_of(&dns_only).as_deref(), Some("leaf.example.org"));
        assert_eq!(
            identity_of(&cert(vec![], Some("team-a"))).as_deref(),
            Some("team-a")
        );
        assert_eq!(identity_of(&cert(vec![], None)), None);
        assert_eq!(identity_of(b"not a certificate"), None);
    }
}
