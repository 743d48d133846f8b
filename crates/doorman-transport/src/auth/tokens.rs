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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use subtle::ConstantTimeEq;

/// Shortest plain token accepted in the file.
pub const MIN_TOKEN_CHARS: usize = 16;

/// What is wrong with a token file, naming the file and the entry at
/// fault (never the token itself).
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("{}: not UTF-8 text", path.display())]
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// What is wrong inside the file.
    #[error("{}: {problem}", path.display())]
    In {
        /// The file.
        path: PathBuf,
        /// The problem.
        #[source]
        problem: Box<TokensError>,
    },
    /// Not TOML.
    #[error("not valid TOML: {0}")]
    NotToml(String),
    /// No `[[token]]` entry.
    #[error("expected one or more [[token]] entries")]
    NoEntries,
    /// An entry that is wrong.
    #[error("token[{index}]: {problem}")]
    Entry {
        /// Its position in the file.
        index: usize,
        /// What is wrong with it.
        problem: EntryProblem,
    },
}

impl TokensError {
    /// This problem, found in the file at `path`.
    pub fn in_file(self, path: &Path) -> TokensError {
        TokensError::In {
            path: path.to_path_buf(),
            problem: Box::new(self),
        }
    }
}

/// What is wrong with one `[[token]]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    /// No identity.
    #[error("identity: required (a string)")]
    NoIdentity,
    /// An empty identity, or one with control characters.
    #[error("identity: must be non-empty, without control characters")]
    BadIdentity,
    /// A plain token shorter than [`MIN_TOKEN_CHARS`].
    #[error("token: at least {MIN_TOKEN_CHARS} characters")]
    ShortToken,
    /// A digest that is not 64 hexadecimal digits.
    #[error("sha256: 64 hexadecimal digits")]
    BadDigest,
    /// Both or neither of `token` and `sha256`.
    #[error("give exactly one of token or sha256")]
    NotExactlyOne,
}

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
    pub fn load(path: &Path) -> Result<Tokens, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        Tokens::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<Tokens, TokensError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| TokensError::NotToml(e.message().to_string()))?;
        let items = match table.get("token") {
            Some(toml::Value::Array(items)) if !items.is_empty() => items,
            _ => return Err(TokensError::NoEntries),
        };
        let mut tokens = Tokens::default();
        for (index, item) in items.iter().enumerate() {
            let entry =
                Tokens::entry(item).map_err(|problem| TokensError::Entry { index, problem })?;
            tokens.entries.push(entry);
        }
        Ok(tokens)
    }

    fn entry(item: &toml::Value) -> Result<([u8; 32], Arc<str>), EntryProblem> {
        let get = |k: &str| item.get(k).and_then(|v| v.as_str());
        let identity = get("identity").ok_or(EntryProblem::NoIdentity)?;
        if identity.is_empty() || doorman_core::limits::has_control_chars(identity) {
            return Err(EntryProblem::BadIdentity);
        }
        let digest = match (get("token"), get("sha256")) {
            (Some(t), None) if t.chars().count() >= MIN_TOKEN_CHARS => digest(t),
            (Some(_), None) => return Err(EntryProblem::ShortToken),
            (None, Some(h)) => unhex(h).ok_or(EntryProblem::BadDigest)?,
            _ => return Err(EntryProblem::NotExactlyOne),
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
            doorman_core::config::sha256_hex(b"0123456789abcdef-cron")
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
        assert!(matches!(
            e,
            TokensError::Entry {
                index: 0,
                problem: EntryProblem::ShortToken
            }
        ));
        let e = e.to_string();
        assert_eq!(e, "token[0]: token: at least 16 characters");
        assert!(!e.contains("short\""));
        let e = Tokens::parse("[[token]]\ntoken = \"0123456789abcdefgh\"\n").unwrap_err();
        assert!(e.to_string().contains("identity: required"), "{e}");
        assert!(Tokens::parse("").is_err());
    }
}
