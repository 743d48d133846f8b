//! How records, logs, metrics and the status page name a config's
//! content: the hex SHA-256 of its bytes, computed the same way wherever a
//! config is read (a file, an etcd key) or pushed (`doorman config push`'s
//! audit record).
//!
//! Must not: read the config.

/// The hex SHA-256 of config bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha256_of_abc_is_the_standard_vector() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
