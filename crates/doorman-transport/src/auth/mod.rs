//! Who is calling: the identity of a request, from a bearer token
//! (`authorization: Bearer …`, looked up in [`Tokens`]) or else from the
//! connection's client certificate (the TLS layer's `PeerInfo`). A token that is sent
//! must be valid: a wrong one is refused (UNAUTHENTICATED / 401), never
//! silently ignored, and never logged. What an identity may do is the
//! config's access rules (`doorman_core::config::Acl`), checked by the
//! gRPC and HTTP boundaries through the server state.
//!
//! Must not: decide what an identity may do, or print a token.

pub mod token_file;
pub mod tokens;

use std::sync::Arc;

pub use token_file::TokenFile;
pub use tokens::{EntryProblem, Tokens, TokensError};

/// How a server authenticates callers, besides TLS client certificates.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    /// Bearer tokens (`--auth-tokens`), kept in step with their file.
    pub tokens: Option<Arc<TokenFile>>,
    /// `/metrics`, `/healthz` and `/readyz` need an identity too
    /// (`--http-require-identity`); by default they are open.
    pub health_needs_identity: bool,
    /// Callers can authenticate (client CA or tokens): then the status
    /// pages need an identity even when the config has no access rules,
    /// and so do the capacity RPCs unless `allow_anonymous`.
    pub authenticating: bool,
    /// Serve callers without an identity on the capacity RPCs although
    /// callers can authenticate (`--allow-anonymous`); by default they are
    /// refused, so configuring tokens protects something before any
    /// access rule exists.
    pub allow_anonymous: bool,
}

/// Why a caller could not be identified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The `authorization` header is not `Bearer TOKEN`.
    #[error("the authorization header must be `Bearer TOKEN`")]
    Malformed,
    /// The token is not in the server's token file (or the server has
    /// none).
    #[error("invalid bearer token")]
    UnknownToken,
    /// No token and no client certificate, on a server that identifies
    /// its callers and does not allow anonymous ones.
    #[error(
        "this server identifies its callers: send a bearer token or a client certificate \
         (or start the server with --allow-anonymous)"
    )]
    Anonymous,
}

impl AuthError {
    /// Its label in `doorman_server_auth_failures_total{reason}`.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Malformed => "malformed",
            AuthError::UnknownToken => "unknown_token",
            AuthError::Anonymous => "anonymous",
        }
    }
}

impl Auth {
    /// The identity of a caller of the capacity RPCs: [`Auth::caller`],
    /// and none is refused when callers can authenticate and anonymous
    /// ones are not allowed.
    pub fn rpc_caller(
        &self,
        certificate: Option<&Arc<str>>,
        authorization: Option<&[u8]>,
    ) -> Result<Option<Arc<str>>, AuthError> {
        let who = self.caller(certificate, authorization)?;
        if who.is_none() && self.authenticating && !self.allow_anonymous {
            return Err(AuthError::Anonymous);
        }
        Ok(who)
    }

    /// The caller's identity: the token's when one is sent, else the
    /// client certificate's, else none.
    pub fn caller(
        &self,
        certificate: Option<&Arc<str>>,
        authorization: Option<&[u8]>,
    ) -> Result<Option<Arc<str>>, AuthError> {
        let Some(header) = authorization else {
            return Ok(certificate.cloned());
        };
        let token = std::str::from_utf8(header)
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Malformed)?;
        self.tokens
            .as_ref()
            .and_then(|t| t.tokens().identify(token))
            .map(Some)
            .ok_or(AuthError::UnknownToken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        let t = "[[token]]\nidentity = \"batch\"\ntoken = \"0123456789abcdef-batch\"\n";
        Auth {
            tokens: Some(Arc::new(TokenFile::fixed(Tokens::parse(t).unwrap()))),
            ..Default::default()
        }
    }

    #[test]
    fn a_token_names_the_caller_and_a_bad_one_is_refused() {
        let peer: Arc<str> = Arc::from("cert-id");
        let a = auth();
        let id = a.caller(Some(&peer), Some(b"Bearer 0123456789abcdef-batch"));
        assert_eq!(id.unwrap().as_deref(), Some("batch"));
        assert_eq!(
            a.caller(Some(&peer), None).unwrap().as_deref(),
            Some("cert-id")
        );
        assert_eq!(a.caller(None, None).unwrap(), None);
        assert_eq!(
            a.caller(None, Some(b"Bearer nope-nope-nope-nope")),
            Err(AuthError::UnknownToken)
        );
        assert_eq!(
            a.caller(None, Some(b"Basic abc")),
            Err(AuthError::Malformed)
        );
        // Identities configured: no identity is refused unless allowed.
        let a = Auth {
            authenticating: true,
            ..auth()
        };
        assert_eq!(a.rpc_caller(None, None), Err(AuthError::Anonymous));
        assert_eq!(
            a.caller(None, None),
            Ok(None),
            "pages decide for themselves"
        );
        let open = Auth {
            allow_anonymous: true,
            ..a
        };
        assert_eq!(open.rpc_caller(None, None), Ok(None));
        assert_eq!(Auth::default().rpc_caller(None, None), Ok(None));
        let no_tokens = Auth::default();
        assert_eq!(
            no_tokens.caller(None, Some(b"Bearer 0123456789abcdef-batch")),
            Err(AuthError::UnknownToken)
        );
    }
}
