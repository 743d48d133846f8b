//! `--auth-tokens FILE` kept in step with the file: read at start (a bad
//! file is a start error), then re-read when its content changes
//! (including Kubernetes' symlink swap of a mounted Secret) and on SIGHUP.
//! A bad new file is logged and counted and the tokens in use stay; a good
//! one takes effect for the next request, so a token is added or revoked
//! without a restart.
//!
//! Must not: print a token, or decide what an identity may do.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::{Tokens, TokensError};
use crate::hangup::Look;

/// The tokens in use and the file they come from.
#[derive(Debug)]
pub struct TokenFile {
    path: Option<PathBuf>,
    current: RwLock<Arc<Tokens>>,
    /// The content the tokens in use (or the last rejected ones) came from.
    seen: Mutex<Vec<u8>>,
}

/// What a look at the file found.
#[derive(Debug)]
pub enum TokenReload {
    /// Same content as before: nothing done.
    Unchanged,
    /// New tokens are in use (how many entries).
    Loaded(usize),
    /// The file could not be read or is invalid; the old tokens stay.
    Rejected(TokensError),
}

impl TokenFile {
    /// Reads `path`; an error names the file and the entry at fault.
    pub fn load(path: &Path) -> Result<TokenFile, TokensError> {
        let bytes = read(path)?;
        let tokens = parse(path, &bytes)?;
        Ok(TokenFile {
            path: Some(path.to_path_buf()),
            current: RwLock::new(Arc::new(tokens)),
            seen: Mutex::new(bytes),
        })
    }

    /// Tokens that come from no file and never change.
    pub fn fixed(tokens: Tokens) -> TokenFile {
        TokenFile {
            path: None,
            current: RwLock::new(Arc::new(tokens)),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// The tokens in use now.
    pub fn tokens(&self) -> Arc<Tokens> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads the file if its content changed (or always, with `force`).
    pub fn reload(&self, force: bool) -> TokenReload {
        let Some(path) = &self.path else {
            return TokenReload::Unchanged;
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = match read(path) {
            Ok(b) => b,
            // Reported once: `seen` is cleared until the file is back.
            Err(_) if seen.is_empty() && !force => return TokenReload::Unchanged,
            Err(e) => {
                seen.clear();
                return TokenReload::Rejected(e);
            }
        };
        if !force && *seen == bytes {
            return TokenReload::Unchanged;
        }
        // Remember rejected content too, so a bad file is reported once.
        let parsed = parse(path, &bytes);
        *seen = bytes;
        match parsed {
            Ok(tokens) => {
                let n = tokens.len();
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(tokens);
                TokenReload::Loaded(n)
            }
            Err(e) => TokenReload::Rejected(e),
        }
    }

    /// Reloads, logging the outcome and telling `counted` (true: loaded).
    fn reload_logged(&self, counted: &impl Fn(bool), look: Look) {
        match self.reload(look == Look::Hangup) {
            TokenReload::Unchanged => {}
            TokenReload::Loaded(n) => {
                counted(true);
                tracing::info!(entries = n, "bearer tokens reloaded ({})", look.why());
            }
            TokenReload::Rejected(e) => {
                counted(false);
                tracing::error!(error = %e, "new bearer tokens rejected ({}); the old ones stay in use", look.why());
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TokensError> {
    std::fs::read(path).map_err(|source| TokensError::Unreadable {
        path: path.to_path_buf(),
        source,
    })
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Tokens, TokensError> {
    let text = std::str::from_utf8(bytes).map_err(|_| TokensError::NotText {
        path: path.to_path_buf(),
    })?;
    Tokens::parse(text).map_err(|e| e.in_file(path))
}

/// Watches the token file every `interval` and on SIGHUP; `counted` is
/// told each reload's outcome (true: loaded), for the metrics.
pub fn spawn_watch(
    tokens: Arc<TokenFile>,
    counted: impl Fn(bool) + Send + 'static,
    interval: Duration,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(crate::hangup::watch_files(interval, stop, move |look| {
        tokens.reload_logged(&counted, look)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "[[token]]\nidentity = \"a\"\ntoken = \"0123456789abcdef-aaaa\"\n";
    const TWO: &str = "[[token]]\nidentity = \"b\"\ntoken = \"0123456789abcdef-bbbb\"\n";

    #[test]
    fn a_changed_file_replaces_the_tokens_and_a_bad_one_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(&path, ONE).unwrap();
        let f = TokenFile::load(&path).unwrap();
        let who = |f: &TokenFile, t: &str| f.tokens().identify(t).map(|i| i.to_string());
        assert_eq!(who(&f, "0123456789abcdef-aaaa").as_deref(), Some("a"));
        assert!(matches!(f.reload(false), TokenReload::Unchanged));

        std::fs::write(&path, TWO).unwrap();
        assert!(matches!(f.reload(false), TokenReload::Loaded(1)));
        assert_eq!(who(&f, "0123456789abcdef-aaaa"), None, "revoked");
        assert_eq!(who(&f, "0123456789abcdef-bbbb").as_deref(), Some("b"));

        std::fs::write(&path, "[[token]]\nidentity = \"c\"\ntoken = \"short\"\n").unwrap();
        let TokenReload::Rejected(e) = f.reload(false) else {
            panic!("a short token must be rejected");
        };
        let e = e.to_string();
        assert!(e.contains("token[0]") && !e.contains("short"), "{e}");
        assert_eq!(who(&f, "0123456789abcdef-bbbb").as_deref(), Some("b"));
        assert!(
            matches!(f.reload(false), TokenReload::Unchanged),
            "reported once"
        );

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(f.reload(false), TokenReload::Rejected(_)));
        assert!(
            matches!(f.reload(false), TokenReload::Unchanged),
            "reported once"
        );
        assert_eq!(who(&f, "0123456789abcdef-bbbb").as_deref(), Some("b"));
        std::fs::write(&path, TWO).unwrap();
        assert!(
            matches!(f.reload(false), TokenReload::Loaded(1)),
            "back again"
        );
    }
}
