//! Bearer tokens, for places where mutual TLS is not practical: sent as
//! `authorization: Bearer …` on every RPC of a client (or of a server
//! towards its parent); the server maps it to an identity. A token is never
//! printed (its `Debug` is redacted) and should only travel over TLS.
//!
//! Must not: decide what a token allows (the server's access rules do).

use std::fmt;
use std::path::{Path, PathBuf};

use tonic::metadata::{Ascii, MetadataValue};

/// A bearer token.
#[derive(Clone)]
pub struct BearerToken(MetadataValue<Ascii>);

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(redacted)")
    }
}

/// Why a bearer token cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Empty, or not printable ASCII without spaces.
    #[error("a bearer token must be non-empty printable ASCII without spaces")]
    Malformed,
    /// Not a valid header value.
    #[error("unusable bearer token: {0}")]
    Unusable(#[from] tonic::metadata::errors::InvalidMetadataValue),
    /// Its file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Its file holds no usable token.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<TokenError>,
    },
}

impl BearerToken {
    /// The `authorization` header's value (`Bearer …`), for an HTTP call.
    pub fn header_value(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }

    /// A token given as text (printable ASCII, no spaces).
    pub fn new(token: &str) -> Result<BearerToken, TokenError> {
        let ok = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(TokenError::Malformed);
        }
        Ok(BearerToken(MetadataValue::try_from(format!(
            "Bearer {token}"
        ))?))
    }

    /// The token in a file (its first line; surrounding white space is
    /// ignored).
    pub fn from_file(path: &Path) -> Result<BearerToken, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let line = text.lines().next().unwrap_or("").trim();
        BearerToken::new(line).map_err(|e| TokenError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Adds the `authorization` header to `req`.
    pub fn attach<T>(&self, req: &mut tonic::Request<T>) {
        req.metadata_mut().insert("authorization", self.0.clone());
    }
}

/// A request carrying the RPC deadline and, if given, the bearer token.
pub fn outgoing<T: Clone>(
    msg: &T,
    timeout: std::time::Duration,
    token: Option<&BearerToken>,
) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg.clone());
    r.set_timeout(timeout);
    if let Some(t) = token {
        t.attach(&mut r);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_never_printed() {
        assert!(BearerToken::new("").is_err());
        assert!(BearerToken::new("has space").is_err());
        let t = BearerToken::new("s3cret-token").unwrap();
        assert_eq!(format!("{t:?}"), "BearerToken(redacted)");
        let r = outgoing(&(), std::time::Duration::from_secs(1), Some(&t));
        assert_eq!(
            r.metadata().get("authorization").unwrap(),
            "Bearer s3cret-token"
        );
    }
}
