//! What can go wrong with etcd, as data: a setup error names the flag it
//! comes from (`--etcd-ca`, `--etcd-password-file`, …); a call error says
//! what was being done and how it failed (no answer in time, an error
//! from etcd or the connection, a stream that ended, a key with no value).
//!
//! Must not: hold a password or a file's contents.

use std::path::PathBuf;

use doorman_net::tls::TlsFileError;

/// The etcd flags do not make a usable connection.
#[derive(Debug, thiserror::Error)]
pub enum EtcdSetupError {
    /// A client certificate or key without a CA.
    #[error("--etcd-cert/--etcd-key need --etcd-ca")]
    CertWithoutCa,
    /// Only one of a certificate and its key.
    #[error("--etcd-cert and --etcd-key go together")]
    CertWithoutKey,
    /// Only one of a user and its password file.
    #[error("--etcd-user and --etcd-password-file go together")]
    UserWithoutPassword,
    /// A TLS file that cannot be used.
    #[error("{flag} {source}")]
    File {
        /// The flag that named the file.
        flag: &'static str,
        /// Why it cannot be used.
        #[source]
        source: TlsFileError,
    },
    /// The password file cannot be read.
    #[error("--etcd-password-file {}: cannot read: {source}", path.display())]
    PasswordUnreadable {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The password file holds no password.
    #[error("--etcd-password-file {}: the file is empty", path.display())]
    PasswordEmpty {
        /// The file.
        path: PathBuf,
    },
}

/// A call to etcd that did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// etcd did not answer in time.
    #[error("{what} timed out")]
    TimedOut {
        /// What was being done ("reading KEY from etcd").
        what: String,
    },
    /// etcd, or the connection to it, answered with an error.
    #[error("{what}: {source}")]
    Failed {
        /// What was being done.
        what: String,
        /// etcd's error.
        #[source]
        source: etcd_client::Error,
    },
    /// A stream etcd was sending ended or was cancelled.
    #[error("{what}")]
    Ended {
        /// What ended, and how ("watch on KEY closed").
        what: String,
    },
    /// Someone else changed a key between our read and our write.
    #[error("{what}")]
    Conflict {
        /// Which key, and what to do.
        what: String,
    },
    /// A key that must hold a value holds none.
    #[error("{why}")]
    Missing {
        /// What is missing and what to do about it.
        why: String,
    },
    /// A value etcd holds (or one to write) is not what it must be.
    #[error("{what}: {why}")]
    Malformed {
        /// Which value.
        what: String,
        /// What is wrong with it.
        why: String,
    },
}

impl EtcdError {
    /// The error of `what` not answered in time.
    pub fn timed_out<E>(what: impl Into<String>) -> impl FnOnce(E) -> EtcdError {
        let what = what.into();
        move |_| EtcdError::TimedOut { what }
    }

    /// The error of `what` failing with etcd's `source`.
    pub fn failed(what: impl Into<String>) -> impl FnOnce(etcd_client::Error) -> EtcdError {
        let what = what.into();
        move |source| EtcdError::Failed { what, source }
    }
}
