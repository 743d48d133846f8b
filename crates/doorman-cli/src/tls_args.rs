//! The TLS and token flags of every command that connects to a server (`get`,
//! `loadtest`, the demo) and of a server towards its parent: one set of
//! names and one way of turning them into [`ClientTls`].
//!
//! Must not: know about any one subcommand.

use std::path::PathBuf;

use doorman_client::{BearerToken, ClientTls};

/// `--tls-ca`, `--tls-cert`, `--tls-key`, `--tls-server-name`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientTlsArgs {
    /// Connect over TLS, trusting servers whose certificates chain to this
    /// PEM CA file.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate to present (mutual TLS; needs --tls-key and
    /// --tls-ca).
    #[arg(long, requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Name to check the server's certificate against (default: the host
    /// of the address dialled).
    #[arg(long, requires = "tls_ca")]
    pub tls_server_name: Option<String>,
    /// Send the bearer token in this file (first line) as
    /// `authorization: Bearer …` (for servers with --auth-tokens).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

impl ClientTlsArgs {
    /// The TLS options, `None` without `--tls-ca`.
    pub fn client_tls(&self) -> anyhow::Result<Option<ClientTls>> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let tls = ClientTls::from_files(ca, self.tls_cert.as_deref(), self.tls_key.as_deref())?;
        Ok(Some(match &self.tls_server_name {
            Some(n) => tls.with_server_name(n),
            None => tls,
        }))
    }
}

impl ClientTlsArgs {
    /// The bearer token, `None` without `--token-file`.
    pub fn token(&self) -> anyhow::Result<Option<BearerToken>> {
        match &self.token_file {
            Some(p) => Ok(Some(BearerToken::from_file(p).map_err(anyhow::Error::msg)?)),
            None => Ok(None),
        }
    }
}

/// `e` with its causes and, for a failure that looks like a TLS mismatch,
/// what to pass: a plaintext client whose connection a TLS server closed,
/// or a TLS client without the certificate a mutual-TLS server requires.
pub fn explain(e: &(dyn std::error::Error + 'static), tls: Option<&ClientTls>) -> String {
    let why = cause(e);
    let hint = match tls {
        None if why.contains("transport error") => {
            " (if the server uses TLS, pass --tls-ca; a plaintext client's connection is closed by a TLS server)"
        }
        Some(t) if !t.has_client_certificate() && why.contains("CertificateRequired") => {
            " (the server requires a client certificate: pass --tls-cert and --tls-key)"
        }
        Some(t) if !t.has_client_certificate() && why.contains("transport error") => {
            " (if the server requires client certificates, pass --tls-cert and --tls-key)"
        }
        _ => "",
    };
    format!("{why}{hint}")
}

/// `e` with its chain of causes ("transport error: … : invalid peer
/// certificate: UnknownIssuer"), so a failed handshake says why.
pub fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    // A Status prints its whole debug form; its message and sources say it.
    let mut out = match e.downcast_ref::<tonic::Status>() {
        Some(s) => s.message().to_string(),
        None => e.to_string(),
    };
    let mut next = e.source();
    while let Some(s) = next {
        let msg = s.to_string();
        if !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        next = s.source();
    }
    out
}
