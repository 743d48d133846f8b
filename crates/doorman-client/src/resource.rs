//! The state a resource shares between its handles (top half) and the
//! client's background task (bottom half): the limiter (token bucket or
//! gauge), wants, the current capacity and mode, and a reference count.
//!
//! The top half only locks this resource's own mutex; the bottom half calls
//! [`Shared::apply`] when capacity changes. The resource knows its owner
//! (the client's registry) only as an [`Owner`] to tell when its last handle
//! is dropped.
//!
//! Must not: do I/O or know the client's internals.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

use crate::metrics::ResourceMetrics;
use crate::wants::Window;
use doorman_core::client::{Mode, Refused};

use crate::acquire::AcquireError;
use crate::observe::CapacityState;

/// What a resource asks the server for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wants {
    /// A fixed amount (change it with `set_wants`).
    Fixed(f64),
    /// Estimated from use over a sliding window (see the `wants` module).
    Auto,
}

/// Longest single sleep of a waiter; it re-checks afterwards.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// A token bucket refilled at the granted rate, holding at most
/// `burst_time` × rate tokens (at least one). It starts empty.
#[derive(Debug)]
pub struct Bucket {
    pub(crate) rate: f64,
    pub(crate) burst: f64,
    pub(crate) tokens: f64,
    pub(crate) last: Instant,
    pub(crate) burst_time: f64,
    pub(crate) min_burst: f64,
}

impl Bucket {
    /// An empty bucket with no rate; it will hold `burst_time` at its rate,
    /// and at least one permit.
    pub fn new(now: Instant, burst_time: Duration) -> Self {
        Bucket {
            rate: 0.0,
            burst: 0.0,
            tokens: 0.0,
            last: now,
            burst_time: burst_time.as_secs_f64(),
            min_burst: 1.0,
        }
    }

    /// Holds at least `permits` whatever the rate. A bucket that holds one
    /// permit loses, under demand above its rate, the time between that
    /// permit being earned and the next request arriving, every time:
    /// with requests at irregular gaps of 17 ms on average it admitted 89 %
    /// of its rate. With two, a permit earned meanwhile is kept.
    pub fn with_min_burst(mut self, permits: f64) -> Self {
        self.min_burst = permits.max(1.0);
        self
    }

    /// Adds the tokens earned since the last refill.
    pub fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + self.rate * dt).min(self.burst);
    }

    /// A new rate applies at once; tokens never exceed the new burst size.
    pub fn set_rate(&mut self, rate: f64, now: Instant) {
        self.refill(now);
        self.rate = rate;
        self.burst = if rate > 0.0 {
            (self.burst_time * rate).max(self.min_burst)
        } else {
            0.0
        };
        self.tokens = self.tokens.min(self.burst);
    }

    /// The rate (tokens per second).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The most tokens it holds.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Fills it to its burst (a bucket that has just received its first
    /// rate, so that its first request is not refused for want of time).
    pub fn fill(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = self.tokens.max(self.burst);
    }

    /// Tokens there now (negative while in debt).
    pub fn tokens(&mut self, now: Instant) -> f64 {
        self.refill(now);
        self.tokens
    }

    /// How long until the bucket is full again (zero when it is, or has no
    /// rate).
    pub fn until_full(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64((self.burst - self.tokens).max(0.0) / self.rate)
            .unwrap_or(MAX_WAIT)
    }

    /// Takes `n` permits if available. A request larger than the burst is
    /// allowed once a full burst is there, leaving the bucket in debt, so the
    /// long-run rate holds. Otherwise returns how long until it could.
    pub fn try_take(&mut self, n: f64, now: Instant) -> Result<(), Option<Duration>> {
        self.refill(now);
        let need = if self.burst > 0.0 {
            n.min(self.burst)
        } else {
            n
        };
        if self.tokens >= need && self.rate > 0.0 {
            self.tokens -= n;
            return Ok(());
        }
        if self.rate <= 0.0 {
            return Err(None);
        }
        // A tiny rate or a deep debt can ask for a wait longer than Duration
        // holds; waiters are woken on any capacity change anyway.
        let secs = (need - self.tokens) / self.rate;
        Err(Some(
            Duration::try_from_secs_f64(secs)
                .unwrap_or(MAX_WAIT)
                .min(MAX_WAIT),
        ))
    }
}

/// A gauge of permits in flight.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    pub capacity: u64,
    pub in_flight: u64,
    pub waiting: u64,
}

#[derive(Debug)]
pub(crate) enum Limiter {
    Rate(Bucket),
    Gauge(Gauge),
}

#[derive(Debug)]
pub(crate) struct LimiterState {
    pub limiter: Limiter,
    pub window: Window,
    pub fixed_wants: Option<f64>,
}

/// The kind of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Operations per second.
    Rate,
    /// Operations in flight.
    Gauge,
}

/// Shared state of one resource.
#[derive(Debug)]
pub(crate) struct Shared {
    pub id: String,
    pub kind: Kind,
    state: Mutex<LimiterState>,
    pub notify: Notify,
    capacity_bits: AtomicU64,
    mode: AtomicU8,
    pub handles: AtomicUsize,
    /// Told when the last handle is dropped.
    pub client: Weak<dyn Owner>,
    /// Its own metrics, when the client has a registry.
    pub metrics: Option<ResourceMetrics>,
    /// What the server last said about its grant (learning mode, no lease
    /// from the parent), if anything.
    note: Mutex<Option<String>>,
    /// Why the server refuses the resource, while it does.
    refusal: Mutex<Option<Refused>>,
    /// What `capacity_watch()` receivers see.
    watch: tokio::sync::watch::Sender<CapacityState>,
}

fn mode_index(m: Mode) -> u8 {
    Mode::ALL.iter().position(|x| *x == m).unwrap_or(0) as u8
}

impl Shared {
    pub fn new(
        id: String,
        kind: Kind,
        wants: Wants,
        burst_time: Duration,
        initial: (f64, Mode),
        client: Weak<dyn Owner>,
        metrics: Option<ResourceMetrics>,
    ) -> Self {
        let now = Instant::now();
        let limiter = match kind {
            Kind::Rate => Limiter::Rate(Bucket::new(now, burst_time)),
            Kind::Gauge => Limiter::Gauge(Gauge::default()),
        };
        let s = Shared {
            id,
            kind,
            state: Mutex::new(LimiterState {
                limiter,
                window: Window::new(now),
                fixed_wants: match wants {
                    Wants::Fixed(w) => Some(w),
                    Wants::Auto => None,
                },
            }),
            notify: Notify::new(),
            capacity_bits: AtomicU64::new(0f64.to_bits()),
            mode: AtomicU8::new(mode_index(Mode::Pessimistic)),
            handles: AtomicUsize::new(0),
            client,
            metrics,
            note: Mutex::new(None),
            refusal: Mutex::new(None),
            watch: tokio::sync::watch::Sender::new(CapacityState::new(
                0.0,
                Mode::Pessimistic,
                None,
                None,
            )),
        };
        s.apply(initial.0, initial.1);
        s
    }

    /// Locks the limiter. Nothing panics while holding it, but recover the
    /// guard anyway rather than propagate a poison.
    pub fn lock(&self) -> MutexGuard<'_, LimiterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The capacity currently applied.
    pub fn capacity(&self) -> f64 {
        f64::from_bits(self.capacity_bits.load(Ordering::Relaxed))
    }

    /// What the server last said about the grant.
    pub fn note(&self) -> Option<String> {
        self.note.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records what the server said about the grant.
    pub fn set_note(&self, note: Option<String>) {
        *self.note.lock().unwrap_or_else(|e| e.into_inner()) = note;
    }

    /// Applies what the client core says now: capacity and mode, the
    /// lease's expiry (ms since the epoch), the refusal if any; and tells
    /// `capacity_watch()` receivers when anything they see changed.
    pub fn publish(
        &self,
        capacity: f64,
        mode: Mode,
        expiry_ms: Option<i64>,
        refused: Option<&Refused>,
    ) {
        self.set_refused(refused);
        self.apply(capacity, mode);
        let state = CapacityState::new(self.capacity(), mode, expiry_ms, self.note());
        self.watch.send_if_modified(|s| {
            let changed = *s != state;
            *s = state;
            changed
        });
    }

    /// A receiver of the resource's [`CapacityState`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<CapacityState> {
        self.watch.subscribe()
    }

    /// Records whether the server refuses the resource; waiters with a
    /// deadline are woken to report it.
    fn set_refused(&self, why: Option<&Refused>) {
        let mut r = self.refusal.lock().unwrap_or_else(|e| e.into_inner());
        if r.as_ref() != why {
            *r = why.cloned();
            drop(r);
            self.notify.notify_waiters();
        }
    }

    /// Why an acquisition with a deadline cannot succeed now, if it
    /// cannot: the client closed, or the server refuses the resource.
    pub fn hopeless(&self) -> Option<AcquireError> {
        let resource = self.id.clone();
        if self.client.upgrade().is_some_and(|c| c.closed()) {
            return Some(AcquireError::ClientClosed { resource });
        }
        let r = self.refusal.lock().unwrap_or_else(|e| e.into_inner());
        r.as_ref().map(|why| match why {
            Refused::PermissionDenied(m) => AcquireError::PermissionDenied {
                resource,
                reason: m.clone(),
            },
            Refused::Invalid(m) => AcquireError::InvalidResource {
                resource,
                reason: m.clone(),
            },
        })
    }

    /// Why a waiter with `deadline` stops at `now` without its permits: the
    /// acquisition is hopeless, or the deadline passed.
    pub fn give_up(&self, deadline: Instant, now: Instant) -> Option<AcquireError> {
        self.hopeless().or_else(|| {
            (now >= deadline).then(|| AcquireError::Deadline {
                resource: self.id.clone(),
            })
        })
    }

    /// Counts an acquisition refused for lack of capacity.
    pub fn refused(&self) {
        if let Some(m) = &self.metrics {
            m.refused.inc();
        }
    }

    /// Records a permit's wait.
    pub fn waited(&self, seconds: f64) {
        if let Some(m) = &self.metrics {
            m.wait.observe(seconds);
        }
    }

    /// The mode currently applied.
    pub fn mode(&self) -> Mode {
        Mode::ALL[usize::from(self.mode.load(Ordering::Relaxed)).min(Mode::ALL.len() - 1)]
    }

    /// Applies a new capacity at once, waking waiters.
    pub fn apply(&self, capacity: f64, mode: Mode) {
        let capacity = if capacity.is_finite() && capacity > 0.0 {
            capacity
        } else {
            0.0
        };
        self.mode.store(mode_index(mode), Ordering::Relaxed);
        // capacity_bits mirrors what the limiter applies; both change only here.
        let old = self
            .capacity_bits
            .swap(capacity.to_bits(), Ordering::Relaxed);
        if f64::from_bits(old) == capacity {
            return;
        }
        {
            let mut st = self.lock();
            match &mut st.limiter {
                Limiter::Rate(b) => b.set_rate(capacity, Instant::now()),
                Limiter::Gauge(g) => g.capacity = capacity.floor().min(u64::MAX as f64) as u64,
            }
        }
        self.notify.notify_waiters();
    }

    /// What to ask the server for now.
    pub fn wants(&self, now: Instant) -> f64 {
        let st = self.lock();
        match st.fixed_wants {
            Some(w) => w,
            None => match &st.limiter {
                Limiter::Rate(_) => st.window.rate(now),
                Limiter::Gauge(g) => st.window.peak(now).max((g.in_flight + g.waiting) as f64),
            },
        }
    }

    /// Sets fixed wants and asks the client to refresh if it changed much.
    pub fn set_wants(&self, wants: Wants) {
        self.lock().fixed_wants = match wants {
            Wants::Fixed(w) => Some(w),
            Wants::Auto => None,
        };
        if let Some(c) = self.client.upgrade() {
            c.wake();
        }
    }
}

#[cfg(test)]
impl Shared {
    /// A resource with no client behind it, for limiter tests.
    pub fn detached(kind: Kind, wants: Wants, burst: Duration) -> std::sync::Arc<Shared> {
        let s = std::sync::Arc::new(Shared::new(
            "test".into(),
            kind,
            wants,
            burst,
            (0.0, Mode::Pessimistic),
            Weak::<NoOwner>::new(),
            None,
        ));
        s.handles.store(1, Ordering::Release);
        s
    }
}

/// The read-only accessors of `RateResource` and `GaugeResource`, written
/// once; `$unit` names what the capacity counts.
macro_rules! handle_accessors {
    ($unit:literal) => {
        /// The resource id.
        pub fn id(&self) -> &str {
            &self.shared.id
        }

        #[doc = concat!("The capacity applied now (", $unit, ").")]
        pub fn capacity(&self) -> f64 {
            self.shared.capacity()
        }

        /// Lease, which fallback, or refused by the server.
        pub fn mode(&self) -> doorman_core::client::Mode {
            self.shared.mode()
        }

        /// Capacity, lease expiry, mode and phase (leased, learning-zero,
        /// fallback, refused), sent whenever one of them changes.
        pub fn capacity_watch(
            &self,
        ) -> tokio::sync::watch::Receiver<crate::observe::CapacityState> {
            self.shared.subscribe()
        }

        /// Why the capacity may be small, as the server said with its last
        /// grant (e.g. "learning mode, 42 s left", "no valid lease from
        /// the parent"); none from an original Doorman server.
        pub fn note(&self) -> Option<String> {
            self.shared.note()
        }
    };
}
pub(crate) use handle_accessors;

/// Who registered a resource: told when its last handle is dropped.
pub(crate) trait Owner: Send + Sync {
    /// A handle of `shared` was dropped; the owner decrements the count
    /// under its own lock and forgets the resource at zero.
    fn release(&self, shared: &Arc<Shared>);
    /// Something the owner's background task acts on changed (wants).
    fn wake(&self);
    /// The owner was closed.
    fn closed(&self) -> bool;
}

/// The owner of a detached resource (limiter tests): nobody.
#[cfg(test)]
struct NoOwner;

#[cfg(test)]
impl Owner for NoOwner {
    fn release(&self, _: &Arc<Shared>) {}
    fn wake(&self) {}
    fn closed(&self) -> bool {
        false
    }
}

/// A counted reference to a resource: cloning retains it, dropping the last
/// one releases it on the server. Shared by `RateResource` and
/// `GaugeResource`.
#[derive(Debug)]
pub(crate) struct Handle(pub std::sync::Arc<Shared>);

impl Clone for Handle {
    fn clone(&self) -> Self {
        self.0.handles.fetch_add(1, Ordering::AcqRel);
        Handle(self.0.clone())
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(owner) = self.0.client.upgrade() {
            owner.release(&self.0);
        }
    }
}

impl std::ops::Deref for Handle {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}
