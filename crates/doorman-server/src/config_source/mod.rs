//! The config-source boundary: where a server's resource config comes from
//! (a file, an etcd key, or given inline), reading it at start, and keeping
//! the running config in step with it ([`mod@file`], [`etcd`]). A root whose
//! file is missing or empty, or whose etcd key is not pushed yet, starts
//! without a config, refuses requests and is not ready until one arrives.
//! Every change is
//! validated as a whole by the core's config model before it replaces the
//! running config; a bad one is logged with every problem and counted, and
//! the running config stays.
//!
//! Must not: apply an invalid config or decide anything about leases.

pub mod etcd;
pub mod file;

pub use doorman_state::config_version::ConfigVersion;

use doorman_core::server::Sharded;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use doorman_core::config::{Config, ConfigError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use doorman_etcd::EtcdOptions;
use doorman_state::ServerState;

/// Where the config comes from.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A TOML file, reloaded on change and SIGHUP.
    File(PathBuf),
    /// A config given directly (tests, demo); never reloaded.
    Inline(Arc<Config>),
    /// An etcd key, watched; `doorman config push` writes it.
    Etcd {
        /// Where etcd is and how to authenticate to it.
        etcd: EtcdOptions,
        /// The key, e.g. `/doorman/config`.
        key: String,
    },
}

/// Why the config could not be read at start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The config is invalid (or the file unreadable).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The config as read at start, with what the watcher needs to notice
/// later changes.
#[derive(Debug)]
pub struct Loaded {
    /// The validated config (empty while `pending`).
    pub config: Arc<Config>,
    /// What a root without a config waits for: its file missing or empty,
    /// its etcd key not pushed yet.
    pub pending: Option<String>,
    /// The bytes it came from (none for an inline or missing config).
    bytes: Option<Vec<u8>>,
    /// The etcd revision it was read at (0 otherwise).
    revision: i64,
    /// Which config it is (none while pending or inline).
    pub version: Option<ConfigVersion>,
}

impl ConfigSource {
    /// Reads and validates the config. A missing or empty file, a missing
    /// etcd key and an etcd that does not answer are not errors: the config
    /// is then pending.
    pub async fn load(&self) -> Result<Loaded, LoadError> {
        match self {
            ConfigSource::File(path) => match file::read_or_wait(path)? {
                Ok((cfg, bytes)) => {
                    let v = ConfigVersion::of(&path.display().to_string(), &bytes);
                    Ok(Loaded::new(cfg, Some(bytes), 0, Some(v)))
                }
                Err(why) => Ok(Loaded::pending(why, 0)),
            },
            ConfigSource::Inline(c) => Ok(Loaded {
                config: c.clone(),
                pending: None,
                bytes: None,
                revision: 0,
                version: None,
            }),
            ConfigSource::Etcd { etcd: options, key } => {
                let (value, rev) = match etcd::fetch_value(options, key).await {
                    Ok(read) => read,
                    // Revision 0: the watcher reads the key again as soon
                    // as etcd answers.
                    Err(e) => return Ok(Loaded::pending(etcd::unreadable(key, &e.to_string()), 0)),
                };
                let Some((bytes, written)) = value else {
                    return Ok(Loaded::pending(etcd::missing(key), rev));
                };
                let cfg = Config::from_bytes(&bytes, &etcd::source_name(key))?;
                let v = etcd::version_of(options, key, &bytes, written).await;
                Ok(Loaded::new(cfg, Some(bytes), rev, Some(v)))
            }
        }
    }

    /// Spawns the task that keeps the running config in step with the
    /// source (none for an inline config).
    pub fn spawn_watch(
        &self,
        loaded: Loaded,
        state: Arc<ServerState>,
        poll: Duration,
        stop: watch::Receiver<bool>,
    ) -> Option<JoinHandle<()>> {
        Some(match self {
            ConfigSource::File(path) => tokio::spawn(file::watch_file(
                state,
                path.clone(),
                loaded.bytes,
                poll,
                stop,
            )),
            ConfigSource::Etcd { etcd: options, key } => tokio::spawn(etcd::watch(
                state,
                options.clone(),
                key.clone(),
                loaded.bytes,
                loaded.revision,
                stop,
            )),
            ConfigSource::Inline(_) => return None,
        })
    }
}

impl Loaded {
    fn new(
        config: Config,
        bytes: Option<Vec<u8>>,
        revision: i64,
        version: Option<ConfigVersion>,
    ) -> Self {
        Loaded {
            config: Arc::new(config),
            pending: None,
            bytes,
            revision,
            version,
        }
    }

    fn pending(why: String, revision: i64) -> Self {
        Loaded {
            config: Arc::new(Config::empty()),
            pending: Some(why),
            bytes: None,
            revision,
            version: None,
        }
    }
}

/// Validates config bytes from `source_name` as a whole and applies them
/// (leases kept), or logs every problem and counts the rejection; the running
/// config then stays. Used for files and etcd values alike.
pub(crate) fn apply(state: &ServerState, bytes: &[u8], version: ConfigVersion) {
    match Config::from_bytes(bytes, &version.source) {
        Ok(cfg) => {
            tracing::info!(summary = %cfg.summary(), "config applied: {version}");
            let old = state.core().replace_config(Arc::new(cfg));
            drop(old); // after the core lock is released
            state.moved.note_all();
            state.metrics.config_reload(true, state.now());
            state.set_config_version(version);
        }
        Err(e) => {
            tracing::error!("config rejected, keeping the running config: {e}");
            state.metrics.config_reload(false, state.now());
        }
    }
}
