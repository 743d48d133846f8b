//! The etcd flags of every command that talks to etcd (`server`, `config
//! push/get/history/rollback`): one set of names (`--etcd`, `--etcd-ca`,
//! `--etcd-cert`, `--etcd-key`, `--etcd-user`, `--etcd-password-file`) and
//! one way of turning them into [`EtcdOptions`]; and who they authenticate
//! as ([`principal`]), for the audit records of `config push`.
//!
//! Must not: know about any one subcommand.

use std::path::PathBuf;

use doorman_etcd::{EtcdFiles, EtcdOptions};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Where etcd is and how to authenticate to it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EtcdArgs {
    /// etcd endpoints (comma-separated), `host:port` or URLs.
    #[arg(long, value_delimiter = ',')]
    pub etcd: Vec<String>,
    /// Talk to etcd over TLS, trusting its certificate if it chains to this
    /// PEM CA file.
    #[arg(long)]
    pub etcd_ca: Option<PathBuf>,
    /// PEM client certificate for etcd (`--client-cert-auth`); needs
    /// --etcd-key and --etcd-ca.
    #[arg(long, requires_all = ["etcd_key", "etcd_ca"])]
    pub etcd_cert: Option<PathBuf>,
    /// PEM private key of --etcd-cert.
    #[arg(long, requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd user (etcd auth enabled); needs --etcd-password-file.
    #[arg(long, requires = "etcd_password_file")]
    pub etcd_user: Option<String>,
    /// File holding the etcd user's password (one line; never logged).
    #[arg(long, requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
}

impl EtcdArgs {
    /// The options; `what` names what needs etcd when no endpoint is given.
    pub fn options(&self, what: &str) -> anyhow::Result<EtcdOptions> {
        if self.etcd.is_empty() {
            anyhow::bail!("{what} needs --etcd ENDPOINTS");
        }
        let files = EtcdFiles {
            ca: self.etcd_ca.clone(),
            cert: self.etcd_cert.clone(),
            key: self.etcd_key.clone(),
            user: self.etcd_user.clone(),
            password_file: self.etcd_password_file.clone(),
        };
        EtcdOptions::from_files(self.etcd.clone(), files).map_err(anyhow::Error::msg)
    }
}

/// Who `opts` authenticate to etcd as, for audit records: the
/// etcd user, else the client certificate's identity, else the local
/// user and host, marked unauthenticated.
pub fn principal(opts: &EtcdOptions) -> String {
    if let Some(u) = &opts.user {
        return format!("etcd user {}", u.name);
    }
    let cert_id = opts
        .tls
        .as_ref()
        .and_then(|t| t.identity.as_ref())
        .and_then(|(pem, _)| {
            let der = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
            doorman_transport::identity::identity_of(&der)
        });
    match cert_id {
        Some(id) => format!("certificate {id}"),
        None => {
            let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
            format!("{user}@{} (unauthenticated)", doorman_net::hostname())
        }
    }
}
