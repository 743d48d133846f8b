//! `RateResource`: capacity is operations per second. A token bucket is
//! refilled at the granted rate with a burst of `burst_time` × rate (default
//! 0.1 s, at least one permit).
//!
//! Must not: talk to the server (the background task does).

use tokio::time::{Duration, Instant};

use crate::acquire::{deadline_after, AcquireError};
use crate::resource::{Handle, Limiter, Wants};

/// Options of a rate resource.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateOptions {
    /// Priority band (higher = more important).
    pub priority: i64,
    /// What to ask for.
    pub wants: Wants,
    /// Burst size as a duration of capacity (default 100 ms; at least one
    /// permit).
    pub burst: std::time::Duration,
}

impl Default for RateOptions {
    fn default() -> Self {
        RateOptions {
            priority: 0,
            wants: Wants::Auto,
            burst: std::time::Duration::from_millis(100),
        }
    }
}

impl RateOptions {
    /// Fixed wants, default priority and burst.
    pub fn wants(w: f64) -> Self {
        RateOptions {
            wants: Wants::Fixed(w),
            ..Self::default()
        }
    }

    /// Sets the priority.
    pub fn priority(mut self, p: i64) -> Self {
        self.priority = p;
        self
    }
}

/// A handle on a rate-limited resource. Clones share the resource; the last
/// handle dropped releases it on the server.
///
/// ```no_run
/// # async fn f(client: doorman_client::Client) -> Result<(), doorman_client::ClientError> {
/// use doorman_client::RateOptions;
/// let db = client.rate_resource("db/users/1", RateOptions::wants(100.0))?;
/// loop {
///     db.wait().await;
///     // one query
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RateResource {
    pub(crate) shared: Handle,
}

impl RateResource {
    crate::resource::handle_accessors!("ops/s");

    /// What the resource asks the server for now.
    pub fn current_wants(&self) -> f64 {
        self.shared.wants(crate::clock::instant())
    }

    /// Changes what is asked for; a change of more than 10 % is sent early.
    pub fn set_wants(&self, wants: Wants) {
        self.shared.set_wants(wants);
    }

    /// Takes one permit if one is available now. Never blocks.
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits if available now. Never blocks. A refusal is
    /// counted in `doorman_client_refused_total`; in shadow mode the
    /// call succeeds and is counted in [`would_refuse`](Self::would_refuse)
    /// instead.
    pub fn try_acquire_n(&self, n: u32) -> bool {
        let now = crate::clock::instant();
        let mut st = self.shared.limiter();
        st.record_call(now, f64::from(n));
        let t = st.at(now);
        let ok = match &mut st.limiter {
            Limiter::Rate(b) => b.try_take(f64::from(n), t).is_ok(),
            Limiter::Gauge(_) => false,
        };
        drop(st);
        if ok {
            return true;
        }
        if self.shared.shadow_applies() {
            self.shared.would_have_refused();
            return true;
        }
        self.shared.refused();
        false
    }

    /// Waits for one permit. Capacity 0 blocks until capacity arrives,
    /// however long that takes (also while the server refuses the
    /// resource); use [`wait_timeout`](Self::wait_timeout) to be told why.
    /// Cancellation-safe: dropping the future takes nothing.
    pub async fn wait(&self) {
        self.wait_n(1).await
    }

    /// Waits for `n` permits (a weighted acquisition). Capacity 0 blocks
    /// until capacity arrives. Dropping the future before it completes takes
    /// nothing.
    pub async fn wait_n(&self, n: u32) {
        // Without a deadline nothing fails: refusals and a closed client
        // are waited out like capacity 0.
        let _ = self.acquire(n, None).await;
    }

    /// Waits at most `timeout` for one permit.
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<(), AcquireError> {
        self.wait_n_until(1, deadline_after(timeout)).await
    }

    /// Waits until `deadline` for one permit.
    pub async fn wait_until(&self, deadline: Instant) -> Result<(), AcquireError> {
        self.wait_n_until(1, deadline).await
    }

    /// Waits at most `timeout` for `n` permits.
    pub async fn wait_n_timeout(&self, n: u32, timeout: Duration) -> Result<(), AcquireError> {
        self.wait_n_until(n, deadline_after(timeout)).await
    }

    /// Waits until `deadline` for `n` permits. Fails at once, without
    /// taking anything, when the server refuses the resource or the client
    /// is closed, and at the deadline when capacity did not come.
    /// Cancellation-safe.
    pub async fn wait_n_until(&self, n: u32, deadline: Instant) -> Result<(), AcquireError> {
        self.acquire(n, Some(deadline)).await
    }

    /// Takes `n` permits as soon as the limiter allows; with a deadline,
    /// gives up on it or when acquiring is hopeless.
    async fn acquire(&self, n: u32, deadline: Option<Instant>) -> Result<(), AcquireError> {
        let start = crate::clock::instant();
        let n = f64::from(n);
        self.shared.limiter().record_call(start, n);
        let mut blocked = false;
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = crate::clock::instant();
            let delay = match self.take(n, now, blocked) {
                Ok(()) => {
                    self.shared
                        .waited(now.saturating_duration_since(start).as_secs_f64());
                    return Ok(());
                }
                Err(d) => d,
            };
            if let Some(e) = deadline.and_then(|dl| self.shared.give_up(dl, now)) {
                return Err(e);
            }
            blocked = true;
            let wake = delay.map(|d| now + d);
            let until = match (wake, deadline) {
                (Some(w), Some(dl)) => Some(w.min(dl)),
                (w, dl) => w.or(dl),
            };
            match until {
                Some(t) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(t) => {}
                        _ = &mut notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Takes `n` tokens now, or says how long until they could be there
    /// (`None`: not before the capacity changes). In shadow mode never
    /// fails: without the tokens it goes ahead, counted.
    fn take(&self, n: f64, now: Instant, blocked: bool) -> Result<(), Option<Duration>> {
        let mut st = self.shared.limiter();
        let t = st.at(now);
        let r = match &mut st.limiter {
            Limiter::Rate(b) => b.try_take(n, t),
            Limiter::Gauge(_) => Err(None),
        };
        if r.is_ok() {
            st.record_wait(now, blocked);
            return r;
        }
        drop(st);
        // Shadow mode: go ahead without the tokens, counted.
        if self.shared.shadow_applies() {
            self.shared.would_have_refused();
            self.shared.lock().record_wait(now, blocked);
            return Ok(());
        }
        r
    }
}

#[cfg(test)]
#[path = "rate_tests.rs"]
mod tests;
