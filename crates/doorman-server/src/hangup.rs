//! SIGHUP as an awaitable: every watcher that reloads on SIGHUP (the
//! config file, the TLS material) holds its own [`Hangups`].
//!
//! Must not: decide what a hangup reloads.

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
