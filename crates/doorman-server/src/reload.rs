//! Keeps the running config in step with its file: checks the file every
//! `interval` and reloads at once on SIGHUP. A changed file is validated as
//! a whole; a bad one is logged with every problem, counted in
//! `doorman_server_config_reloads_total{result="error"}`, and the running
//! config stays. Leases survive reloads.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::Config;
use crate::service::ServerState;

/// Reads, validates and applies the file if its content changed since
/// `last`. Returns the content now seen.
fn check(state: &ServerState, path: &PathBuf, last: &mut Option<Vec<u8>>, force: bool) {
    let content = match std::fs::read(path) {
        Ok(c) => c,
        Err(e) => {
            if force || last.is_some() {
                tracing::error!(path = %path.display(), error = %e, "cannot read config file; keeping the running config");
                state.metrics.config_reload(false);
                *last = None;
            }
            return;
        }
    };
    if !force && last.as_deref() == Some(content.as_slice()) {
        return;
    }
    apply(state, &content, &path.display().to_string());
    *last = Some(content);
}

/// Validates config bytes from `source_name` as a whole and applies them
/// (leases kept), or logs every problem and counts the rejection; the running
/// config then stays. Used for files and etcd values alike.
pub(crate) fn apply(state: &ServerState, bytes: &[u8], source_name: &str) {
    match Config::from_bytes(bytes, source_name) {
        Ok(cfg) => {
            tracing::info!(summary = %cfg.summary(), "config applied");
            state.core().replace_config(Arc::new(cfg));
            state.metrics.config_reload(true);
        }
        Err(e) => {
            tracing::error!("config rejected, keeping the running config: {e}");
            state.metrics.config_reload(false);
        }
    }
}

/// Watches `path` until `stop` turns true. `initial` is the content the
/// running config was loaded from.
pub async fn watch_file(
    state: Arc<ServerState>,
    path: PathBuf,
    initial: Vec<u8>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut last = Some(initial);
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<Option<()>>();
        tokio::select! {
            _ = tick.tick() => check(&state, &path, &mut last, false),
            _ = hangup => {
                tracing::info!(path = %path.display(), "SIGHUP: reloading config");
                check(&state, &path, &mut last, true);
            }
            _ = stop.changed() => return,
        }
    }
}
