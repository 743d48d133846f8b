//! A config file as a source: read at start, then kept in step: checks the file every
//! `interval` and reloads at once on SIGHUP. A changed file is validated as
//! a whole; a bad one is logged with every problem, counted in
//! `doorman_server_config_reloads_total{result="error"}`, and the running
//! config stays. Leases survive reloads.
//!
//! Must not: apply an invalid config or stop on a transient read error.

use doorman_core::server::Sharded;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use doorman_core::config::{Config, ConfigError};
use tokio::sync::watch;

use super::{apply, ConfigVersion};
use doorman_state::ServerState;
use doorman_transport::hangup::Look;

/// Reads and validates a config file at start; also returns its bytes (to
/// notice later changes). `Ok(Err(reason))` when the file is missing or
/// holds no config yet (a Kubernetes ConfigMap not mounted yet, a
/// placeholder): a root then starts, is not ready, and applies the file
/// when it appears.
pub fn read_or_wait(path: &Path) -> Result<Result<(Config, Vec<u8>), String>, ConfigError> {
    let name = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Err(format!("waiting for the config file {name}")));
        }
        Err(e) => return Err(ConfigError::whole(&name, format!("cannot read: {e}"))),
        Ok(bytes) => bytes,
    };
    if Config::is_blank(&bytes) {
        return Ok(Err(format!(
            "the config file {name} has no [[resources]] yet"
        )));
    }
    Ok(Ok((Config::from_bytes(&bytes, &name)?, bytes)))
}

/// Reads and validates a config file (`doorman config check`): a missing
/// or blank file is an error here.
pub fn read(path: &Path) -> Result<(Config, Vec<u8>), ConfigError> {
    let name = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| ConfigError::whole(&name, format!("cannot read: {e}")))?;
    Ok((Config::from_bytes(&bytes, &name)?, bytes))
}

/// Reads, validates and applies the file if its content changed since
/// `last`. Returns the content now seen.
fn check(state: &ServerState, path: &PathBuf, last: &mut Option<Vec<u8>>, force: bool) {
    let content = match std::fs::read(path) {
        Ok(c) => c,
        Err(e) => {
            if force || last.is_some() {
                tracing::error!(path = %path.display(), error = %e, "cannot read config file; keeping the running config");
                state.metrics.config_reload(false, state.now());
                *last = None;
            }
            return;
        }
    };
    if !force && last.as_deref() == Some(content.as_slice()) {
        return;
    }
    if Config::is_blank(&content) && state.core().waiting_for_config() {
        // Still no config: keep waiting without counting a rejection.
        *last = Some(content);
        return;
    }
    let name = path.display().to_string();
    apply(state, &content, ConfigVersion::of(&name, &content));
    *last = Some(content);
}

/// Watches `path` until `stop` turns true. `initial` is the content the
/// running config was loaded from (none if the file was missing).
pub async fn watch_file(
    state: Arc<ServerState>,
    path: PathBuf,
    initial: Option<Vec<u8>>,
    interval: Duration,
    stop: watch::Receiver<bool>,
) {
    let mut last = initial;
    doorman_transport::hangup::watch_files(interval, stop, |look| {
        let force = look == Look::Hangup;
        if force {
            tracing::info!(path = %path.display(), "SIGHUP: reloading config");
        }
        check(&state, &path, &mut last, force);
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = read(Path::new("/nonexistent/doorman.toml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/doorman.toml"), "{e}");
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
