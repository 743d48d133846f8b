//! Configuration stored in an etcd key: read at start, watched while
//! running. A changed value is validated as a whole; a valid one replaces
//! the running config at once (leases kept), an invalid one is logged with
//! every problem, counted in `doorman_server_config_reloads_total{result="error"}`,
//! and the running config stays. After a lost connection the watcher
//! re-reads the key, so no change is missed, and counts the restart in
//! `doorman_server_config_watch_restarts_total`. The watch has its own etcd
//! connection: the election's lease keep-alives and session changes never
//! touch it.
//!
//! Must not: apply an invalid config or block the server on etcd.

use doorman_core::server::Sharded;
use std::sync::Arc;
use std::time::Duration;

use doorman_core::Backoff;
use etcd_client::{EventType, WatchOptions};
use tokio::sync::watch;
use tokio::time::timeout;

use doorman_etcd::audit;
use doorman_etcd::{connect, EtcdError, EtcdOptions};

use super::{apply, ConfigVersion};
use doorman_state::ServerState;

const STEP: Duration = Duration::from_secs(3);

/// The name a config from etcd is known by in logs and errors.
pub fn source_name(key: &str) -> String {
    format!("etcd:{key}")
}

/// Reads the key: its value with the revision that wrote it (none if the
/// key does not exist), and the revision it was read at.
pub async fn fetch_value(
    etcd: &EtcdOptions,
    key: &str,
) -> Result<(Option<(Vec<u8>, i64)>, i64), EtcdError> {
    let mut client = connect(etcd, STEP).await?;
    let resp = timeout(STEP, client.get(key, None))
        .await
        .map_err(EtcdError::timed_out(format!("reading {key} from etcd")))?
        .map_err(EtcdError::failed(format!("reading {key} from etcd")))?;
    let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
    let value = resp
        .kvs()
        .first()
        .map(|kv| (kv.value().to_vec(), kv.mod_revision()));
    Ok((value, revision))
}

/// What a root without its config waits for.
pub fn missing(key: &str) -> String {
    format!(
        "no config at etcd key {key} (push one with `doorman config push --etcd … --key {key} FILE`)"
    )
}

/// What a root whose etcd cannot be read at start waits for.
pub fn unreadable(key: &str, why: &str) -> String {
    format!("cannot read the config at etcd key {key} yet ({why}); retrying")
}

/// Reads the key: its value and the revision it was read at; a missing
/// key is an error (`doorman config get`).
pub async fn fetch(etcd: &EtcdOptions, key: &str) -> Result<(Vec<u8>, i64), EtcdError> {
    match fetch_value(etcd, key).await? {
        (Some((value, _)), revision) => Ok((value, revision)),
        (None, _) => Err(EtcdError::Missing { why: missing(key) }),
    }
}

/// The version of `bytes`, written to `key` at revision `written`, with
/// its audit record if it has one (an unreadable record is logged; the
/// config is still applied).
pub async fn version_of(
    etcd: &EtcdOptions,
    key: &str,
    bytes: &[u8],
    written: i64,
) -> ConfigVersion {
    let record = match audit::record_of(etcd, key, written).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(%key, version = written, "cannot read the config's audit record: {e}");
            None
        }
    };
    let pushed = record.as_ref().map(|r| (r.pusher.as_str(), r.pushed_at));
    ConfigVersion::of(&source_name(key), bytes).at(written, pushed)
}

/// Watches `key` until `stop` turns true. `last` is the value the running
/// config came from, read at `revision`.
pub async fn watch(
    state: Arc<ServerState>,
    etcd: EtcdOptions,
    key: String,
    last: Option<Vec<u8>>,
    revision: i64,
    mut stop: watch::Receiver<bool>,
) {
    let seed = revision as u64;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10), seed);
    let mut w = Watcher {
        state,
        etcd,
        key,
        last,
        revision,
    };
    loop {
        if *stop.borrow() {
            return;
        }
        let result = w.session(&mut stop, &mut backoff).await;
        if *stop.borrow() || stop.has_changed().is_err() {
            return;
        }
        if let Err(e) = result {
            w.state.metrics.config_watch_restart();
            let delay = backoff.next_delay();
            tracing::warn!(retry_in = ?delay, "config watch: {e}");
            w.revision = 0;
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// What the watch has seen so far.
struct Watcher {
    state: Arc<ServerState>,
    etcd: EtcdOptions,
    key: String,
    /// The value the running config came from (none: the key was missing).
    last: Option<Vec<u8>>,
    /// The revision seen; 0 after a lost connection (re-read the key).
    revision: i64,
}

impl Watcher {
    /// Applies `value`, written at revision `written`, if it differs from
    /// the running config's source.
    async fn offer(&mut self, value: &[u8], written: i64) {
        if self.last.as_deref() != Some(value) {
            let version = version_of(&self.etcd, &self.key, value, written).await;
            apply(&self.state, value, version);
            self.last = Some(value.to_vec());
        }
    }

    /// One connection: catch up if needed, then apply every change until
    /// the stream ends (an error) or `stop` turns true (Ok).
    async fn session(
        &mut self,
        stop: &mut watch::Receiver<bool>,
        backoff: &mut Backoff,
    ) -> Result<(), EtcdError> {
        let key = self.key.clone();
        let mut client = connect(&self.etcd, STEP).await?;
        if self.revision == 0 {
            // Reconnected: catch up with anything missed.
            let (value, rev) = fetch_value(&self.etcd, &key).await?;
            match value {
                Some((value, written)) => self.offer(&value, written).await,
                // etcd answers but nothing was pushed yet: say so instead
                // of the read failure a root pending since start showed.
                None if self.state.core().waiting_for_config() => {
                    self.state.core().wait_for_config(missing(&key));
                }
                None => {}
            }
            self.revision = rev;
        }
        let opts = WatchOptions::new().with_start_revision(self.revision + 1);
        let mut stream = client
            .watch(key.as_str(), Some(opts))
            .await
            .map_err(EtcdError::failed(format!("watching {key}")))?;
        backoff.reset();
        loop {
            let msg = tokio::select! {
                m = stream.message() => m.map_err(EtcdError::failed(format!("watch on {key}")))?,
                // Stopped, or the server was dropped without stopping
                // (the caller tells them apart).
                _ = stop.changed() => return Ok(()),
            };
            let Some(resp) = msg else {
                return Err(EtcdError::Ended {
                    what: format!("watch on {key} closed"),
                });
            };
            if resp.canceled() {
                return Err(EtcdError::Ended {
                    what: format!("watch on {key} canceled (compacted?)"),
                });
            }
            for ev in resp.events() {
                self.event(ev).await;
            }
        }
    }

    async fn event(&mut self, ev: &etcd_client::Event) {
        let Some(kv) = ev.kv() else { return };
        self.revision = self.revision.max(kv.mod_revision());
        match ev.event_type() {
            EventType::Put => self.offer(kv.value(), kv.mod_revision()).await,
            EventType::Delete => {
                tracing::warn!(key = %self.key, "config key deleted from etcd; keeping the running config");
            }
        }
    }
}
