//! `GaugeResource`: capacity is operations in flight (rounded down to a
//! whole number of permits). A permit is held until its `GaugePermit` is
//! dropped. When capacity shrinks below the number in flight, new marks wait
//! until enough permits are released.
//!
//! Must not: talk to the server (the background task does).

use std::sync::Arc;

use tokio::time::{Duration, Instant};

use crate::acquire::{deadline_after, AcquireError};
use crate::resource::{Handle, Limiter, Shared, Wants};

/// Options of a gauge resource.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeOptions {
    /// Priority band (higher = more important).
    pub priority: i64,
    /// What to ask for.
    pub wants: Wants,
}

impl Default for GaugeOptions {
    fn default() -> Self {
        GaugeOptions {
            priority: 0,
            wants: Wants::Auto,
        }
    }
}

impl GaugeOptions {
    /// Fixed wants, default priority.
    pub fn wants(w: f64) -> Self {
        GaugeOptions {
            wants: Wants::Fixed(w),
            ..Self::default()
        }
    }
}

/// A handle on a gauge resource. Clones share the resource; the last handle
/// dropped releases it on the server.
///
/// ```no_run
/// # async fn f(client: doorman_client::Client) -> Result<(), doorman_client::ClientError> {
/// use doorman_client::GaugeOptions;
/// let tx = client.gauge_resource("db/transactions", GaugeOptions::wants(8.0))?;
/// let permit = tx.mark().await;
/// // … the transaction …
/// drop(permit); // or permit.release()
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct GaugeResource {
    pub(crate) shared: Handle,
}

/// One operation in flight; released when dropped.
#[derive(Debug)]
#[must_use = "the permit is released as soon as it is dropped"]
pub struct GaugePermit {
    shared: Arc<Shared>,
}

impl GaugePermit {
    /// Releases the permit (same as dropping it).
    pub fn release(self) {}
}

impl Drop for GaugePermit {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            let level = if let Limiter::Gauge(g) = &mut st.limiter {
                g.in_flight = g.in_flight.saturating_sub(1);
                (g.in_flight + g.waiting) as f64
            } else {
                0.0
            };
            st.record_level(crate::clock::instant(), level);
        }
        self.shared.notify.notify_waiters();
    }
}

/// Counts a `mark` call as waiting until it gets its permit or is dropped.
struct Waiting<'a> {
    shared: &'a Shared,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Limiter::Gauge(g) = &mut self.shared.lock().limiter {
                g.waiting = g.waiting.saturating_sub(1);
            }
        }
    }
}

impl GaugeResource {
    crate::resource::handle_accessors!("permits");

    /// Permits in flight.
    pub fn in_flight(&self) -> u64 {
        match &self.shared.lock().limiter {
            Limiter::Gauge(g) => g.in_flight,
            Limiter::Rate(_) => 0,
        }
    }

    /// What the resource asks the server for now.
    pub fn current_wants(&self) -> f64 {
        self.shared.wants(crate::clock::instant())
    }

    /// Changes what is asked for.
    pub fn set_wants(&self, wants: Wants) {
        self.shared.set_wants(wants);
    }

    fn take(&self, st: &mut crate::resource::LimiterState, now: Instant) -> bool {
        let Limiter::Gauge(g) = &mut st.limiter else {
            return false;
        };
        let free = g.in_flight < g.capacity;
        let shadowed = !free && self.shared.shadow_applies();
        let ok = free || shadowed;
        if ok {
            g.in_flight += 1;
        }
        let level = (g.in_flight + g.waiting) as f64;
        st.record_level(now, level);
        if shadowed {
            self.shared.would_have_refused();
        }
        ok
    }

    /// Takes a permit if one is free now. Never blocks. A refusal is
    /// counted in `doorman_client_refused_total`; in shadow mode the
    /// permit is given and counted in [`would_refuse`](Self::would_refuse)
    /// instead.
    pub fn try_mark(&self) -> Option<GaugePermit> {
        let permit = self.take_now();
        if permit.is_none() {
            self.shared.refused();
        }
        permit
    }

    fn take_now(&self) -> Option<GaugePermit> {
        let now = crate::clock::instant();
        let mut st = self.shared.limiter();
        if self.take(&mut st, now) {
            drop(st);
            Some(GaugePermit {
                shared: self.shared.0.clone(),
            })
        } else {
            None
        }
    }

    /// Waits for a permit, however long (also while the server refuses the
    /// resource; [`mark_timeout`](Self::mark_timeout) says why).
    /// Cancellation-safe: dropping the future takes nothing.
    pub async fn mark(&self) -> GaugePermit {
        // Without a deadline `acquire` fails never; loop rather than trust it.
        loop {
            if let Ok(p) = self.acquire(None).await {
                return p;
            }
        }
    }

    /// Waits at most `timeout` for a permit.
    pub async fn mark_timeout(&self, timeout: Duration) -> Result<GaugePermit, AcquireError> {
        self.mark_until(deadline_after(timeout)).await
    }

    /// Waits until `deadline` for a permit; fails at once when the server
    /// refuses the resource or the client is closed. Cancellation-safe.
    pub async fn mark_until(&self, deadline: Instant) -> Result<GaugePermit, AcquireError> {
        self.acquire(Some(deadline)).await
    }

    async fn acquire(&self, deadline: Option<Instant>) -> Result<GaugePermit, AcquireError> {
        let start = crate::clock::instant();
        if let Some(p) = self.take_now() {
            self.shared.waited(0.0);
            return Ok(p);
        }
        let mut waiting = Waiting {
            shared: &self.shared,
            done: false,
        };
        self.queue(start);
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(p) = self.take_queued(start, &mut waiting) {
                return Ok(p);
            }
            let Some(dl) = deadline else {
                notified.await;
                continue;
            };
            if let Some(e) = self.shared.give_up(dl, crate::clock::instant()) {
                return Err(e);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(dl) => {}
                _ = &mut notified => {}
            }
        }
    }

    /// Counts this caller as waiting.
    fn queue(&self, now: Instant) {
        let mut st = self.shared.lock();
        let level = match &mut st.limiter {
            Limiter::Gauge(g) => {
                g.waiting += 1;
                (g.in_flight + g.waiting) as f64
            }
            Limiter::Rate(_) => 0.0,
        };
        st.record_level(now, level);
    }

    /// A waiting caller's permit, if one is free now.
    fn take_queued(&self, start: Instant, waiting: &mut Waiting<'_>) -> Option<GaugePermit> {
        let now = crate::clock::instant();
        let mut st = self.shared.limiter();
        let Limiter::Gauge(g) = &mut st.limiter else {
            return None;
        };
        let shadowed = g.in_flight >= g.capacity && self.shared.shadow_applies();
        if g.in_flight >= g.capacity && !shadowed {
            return None;
        }
        g.in_flight += 1;
        g.waiting = g.waiting.saturating_sub(1);
        waiting.done = true;
        let level = (g.in_flight + g.waiting) as f64;
        st.record_level(now, level);
        drop(st);
        if shadowed {
            self.shared.would_have_refused();
        }
        self.shared
            .waited(now.saturating_duration_since(start).as_secs_f64());
        Some(GaugePermit {
            shared: self.shared.0.clone(),
        })
    }
}

#[cfg(test)]
#[path = "gauge_tests.rs"]
mod tests;
