//! The bearer-token file (`--auth-tokens FILE`): which token names which
//! identity. Tokens are kept only as SHA-256 digests and compared in
//! constant time against every entry, so neither timing nor a memory dump
//! of the server gives a token away; no token is ever logged.
//!
//! ```toml
//! [[token]]
//! identity = "batch-jobs"
//! token = "a-long-random-string"        # or
//! # sha256 = "<hex digest of the token>"
//! ```
//!
//! Must not: decide what an identity may do.

use std::path::Path;
use std::sync::Arc;

use subtle::ConstantTimeEq;

/// Shortest plain token accepted in the file.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Tokens and the identities they name.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], Arc<str>)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} entries)", self.entries.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Tokens {
    /// Reads and checks the file: every problem is reported with its
    /// entry (never the token itself).
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let name = path.display();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
        Tokens::parse(&text).map_err(|e| format!("{name}: {e}"))
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message()))?;
        let items = match table.get("token") {
            Some(toml::Value::Array(items)) if !items.is_empty() => items,
            _ => return Err("expected one or more [[token]] entries".into()),
        };
        let mut tokens = Tokens::default();
        for (i, item) in items.iter().enumerate() {
            let entry = Tokens::entry(item).map_err(|why| format!("token[{i}]: {why}"))?;
            tokens.entries.push(entry);
        }
        Ok(tokens)
    }

    fn entry(item: &toml::Value) -> Result<([u8; 32], Arc<str>), String> {
        let get = |k: &str| item.get(k).and_then(|v| v.as_str());
        let identity = get("identity").ok_or("identity: required (a string)")?;
        if identity.is_empty() || doorman_core::limits::has_control_chars(identity) {
            return Err("identity: must be non-empty, without control characters".into());
        }
        let digest = match (get("token"), get("sha256")) {
            (Some(t), None) if t.chars().count() >= MIN_TOKEN_CHARS => digest(t),
            (Some(_), None) => return Err(format!("token: at least {MIN_TOKEN_CHARS} characters")),
            (None, Some(h)) => unhex(h).ok_or("sha256: 64 hexadecimal digits")?,
            _ => return Err("give exactly one of token or sha256".into()),
        };
        Ok((digest, Arc::from(identity)))
    }

    /// The identity `token` names, comparing with every entry in constant
    /// time.
    pub fn identify(&self, token: &str) -> Option<Arc<str>> {
        let d = digest(token);
        let mut found = None;
        for (known, identity) in &self.entries {
            if bool::from(known.ct_eq(&d)) {
                found = Some(identity.clone());
            }
        }
        found
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True without entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_identities() {
        let t = Tokens::parse(&format!(
            r#"
            [[token]]
            identity = "batch"
            token = "0123456789abcdef-batch"
            [[token]]
            identity = "cron"
            sha256 = "{}"
            "#,
            crate::config_version::sha256_hex(b"0123456789abcdef-cron")
        ))
        .unwrap();
        assert_eq!(
            t.identify("0123456789abcdef-batch").as_deref(),
            Some("batch")
        );
        assert_eq!(t.identify("0123456789abcdef-cron").as_deref(), Some("cron"));
        assert_eq!(t.identify("0123456789abcdef-other"), None);
        assert_eq!(format!("{t:?}"), "Tokens(2 entries)");
    }

    #[test]
    fn bad_files_say_which_entry_and_never_echo_the_token() {
        let e = Tokens::parse("[[token]]\nidentity = \"a\"\ntoken = \"short\"\n").unwrap_err();
        assert_eq!(e, "token[0]: token: at least 16 characters");
        assert!(!e.contains("short\""));
        let e = Tokens::parse("[[token]]\ntoken = \"0123456789abcdefgh\"\n").unwrap_err();
        assert!(e.contains("identity: required"), "{e}");
        assert!(Tokens::parse("").is_err());
    }
}
