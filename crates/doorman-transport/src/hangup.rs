//! SIGHUP as an awaitable, and the one loop every file watcher runs (the
//! config file, the TLS material, the bearer tokens): look every
//! `interval`, look again at once on SIGHUP, end when told to stop.
//!
//! Must not: decide what a look reloads.

use std::time::Duration;

use tokio::sync::watch;

use crate::listener::stopped;

/// The SIGHUPs received from now on (never any where there are no Unix
/// signals, or if the handler cannot be installed).
#[derive(Debug)]
pub struct Hangups {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    /// Starts listening.
    pub fn new() -> Self {
        Hangups {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok(),
        }
    }

    /// Resolves at the next SIGHUP.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.signal.as_mut() {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending::<()>().await
    }
}

impl Default for Hangups {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a watcher looks at its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// The interval passed: reload only what changed.
    Tick,
    /// A SIGHUP: reload whatever the files hold.
    Hangup,
}

impl Look {
    /// How a log line names it.
    pub fn why(self) -> &'static str {
        match self {
            Look::Tick => "files changed",
            Look::Hangup => "SIGHUP",
        }
    }
}

/// Calls `look` every `interval` (the first time after one interval) and at
/// each SIGHUP, until `stop` turns true.
pub async fn watch_files(
    interval: Duration,
    mut stop: watch::Receiver<bool>,
    mut look: impl FnMut(Look),
) {
    let mut hup = Hangups::new();
    // A zero period would panic in tokio; 1 ms is the floor.
    let period = interval.max(Duration::from_millis(1));
    let mut tick = tokio::time::interval_at(doorman_net::clock::instant() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => look(Look::Tick),
            _ = hup.recv() => look(Look::Hangup),
            _ = stopped(&mut stop) => return,
        }
    }
}
