//! Which config a server runs, as logs, metrics and the status page name
//! it: its source, the SHA-256 of its bytes and, for a config pushed to
//! etcd with `doorman config push`, its version (the etcd revision that
//! wrote it), who pushed it and when (from its audit record).
//!
//! Must not: read etcd (the etcd source looks the record up).

use std::fmt;

use doorman_core::config::sha256_hex;

/// The running config's identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigVersion {
    /// Where it came from (`etcd:KEY`, a file path).
    pub source: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// The etcd revision that wrote it (etcd configs only).
    pub version: Option<i64>,
    /// Who pushed it (from its audit record).
    pub pusher: Option<String>,
    /// When it was pushed, seconds since the Unix epoch.
    pub pushed_at: Option<u64>,
}

impl ConfigVersion {
    /// The version of `bytes` read from `source`.
    pub fn of(source: &str, bytes: &[u8]) -> Self {
        ConfigVersion {
            source: source.to_string(),
            sha256: sha256_hex(bytes),
            ..Default::default()
        }
    }

    /// With its etcd version and, if it has an audit record, who pushed
    /// it and when.
    pub fn at(mut self, version: i64, pushed: Option<(&str, u64)>) -> Self {
        self.version = Some(version);
        if let Some((pusher, at)) = pushed {
            self.pusher = Some(pusher.to_string());
            self.pushed_at = Some(at);
        }
        self
    }
}

impl fmt::Display for ConfigVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sha256 {}",
            self.source,
            &self.sha256[..12.min(self.sha256.len())]
        )?;
        if let Some(v) = self.version {
            write!(f, ", version {v}")?;
            match (&self.pusher, self.pushed_at) {
                (Some(p), Some(t)) => write!(f, ", pushed by {p} at {t} (Unix s)")?,
                _ => write!(
                    f,
                    ", no audit record (not written by `doorman config push`)"
                )?,
            }
        }
        Ok(())
    }
}
