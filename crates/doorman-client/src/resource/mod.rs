//! The state a resource shares between its handles (top half) and the
//! client's background task (bottom half): the limiter (the core's token
//! bucket, or a gauge), wants, the current capacity and mode, and a
//! reference count (`handle.rs`).
//!
//! The top half only locks this resource's own mutex; the bottom half calls
//! [`Shared::apply`] when capacity changes. The resource knows its owner
//! (the client's registry) only as an [`Owner`] to tell when its last handle
//! is dropped.
//!
//! Must not: do I/O or know the client's internals.

mod feed;
mod handle;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

use crate::metrics::ResourceMetrics;
use doorman_core::client::{Mode, Refused};
use doorman_core::limiter::{TokenBucket, UsageWindow};
use doorman_lease::{Span, Time};

use crate::acquire::AcquireError;
use crate::observe::CapacityState;

use feed::Feed;
pub use feed::{CapacityChanges, CHANGES_KEPT};
#[cfg(test)]
use handle::NoOwner;
pub(crate) use handle::{handle_accessors, Handle, Owner};

/// What a resource asks the server for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wants {
    /// A fixed amount (change it with `set_wants`).
    Fixed(f64),
    /// Estimated from use over a sliding window
    /// ([`UsageWindow`](doorman_core::limiter::UsageWindow)).
    Auto,
}

#[derive(Debug)]
pub(crate) enum Limiter {
    Rate(TokenBucket),
    Gauge(Gauge),
}

/// A gauge of permits in flight.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    pub capacity: u64,
    pub in_flight: u64,
    pub waiting: u64,
}

#[derive(Debug)]
pub(crate) struct LimiterState {
    pub limiter: Limiter,
    pub window: UsageWindow,
    pub fixed_wants: Option<f64>,
    /// The instant the limiters' [`Time`] counts from.
    origin: Instant,
}

impl LimiterState {
    /// `now` on the limiters' time: milliseconds since the resource was
    /// made (tokio's clock, so a paused test clock drives them).
    pub fn at(&self, now: Instant) -> Time {
        Time::ZERO + Span::from_duration(now.saturating_duration_since(self.origin))
    }

    /// A rate acquisition attempt of `n` permits, into the usage window.
    pub fn record_call(&mut self, now: Instant, n: f64) {
        let t = self.at(now);
        self.window.record_call(t, n);
    }

    /// A `wait` call finished; `blocked` if it had to wait.
    pub fn record_wait(&mut self, now: Instant, blocked: bool) {
        let t = self.at(now);
        self.window.record_wait(t, blocked);
    }

    /// The level of a gauge (in flight + waiting) at `now`.
    pub fn record_level(&mut self, now: Instant, level: f64) {
        let t = self.at(now);
        self.window.record_level(t, level);
    }
}

/// The kind of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Operations per second.
    Rate,
    /// Operations in flight.
    Gauge,
}

/// The end of the lease a resource applies, on tokio's monotonic clock,
/// and what applies after it (the fallback, as the client core says).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LeaseEnd {
    /// When the lease ends.
    pub at: Instant,
    /// The capacity and mode after it.
    pub after: (f64, Mode),
}

/// `Shared::lease_end` without a lease that ends.
const NO_END: u64 = u64::MAX;

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
    /// What `capacity_watch()` and `capacity_changes()` receivers see.
    feed: Feed,
    /// When the applied lease ends, in milliseconds from `origin`
    /// ([`NO_END`]: no lease): every reader of the capacity and every
    /// acquisition checks it first ([`Shared::check_end`]), so a lease
    /// ends on time on this side even before the background task wakes
    /// (a process stopped past its lease and resumed).
    lease_end: AtomicU64,
    /// What applies after `lease_end`; its lock orders the switch with a
    /// new lease's publication.
    after_end: Mutex<(f64, Mode)>,
    /// Where `lease_end` counts from.
    origin: Instant,
    /// The server serves the resource in shadow mode: acquisitions never
    /// wait or fail for capacity; each that would have is counted in
    /// `would_refuse` instead.
    shadow: AtomicBool,
    /// Acquisitions that would have waited or been refused, had the
    /// resource not been in shadow mode.
    would_refuse: AtomicU64,
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
        let origin = crate::clock::instant();
        let limiter = match kind {
            Kind::Rate => Limiter::Rate(TokenBucket::new(Time::ZERO, burst_time)),
            Kind::Gauge => Limiter::Gauge(Gauge::default()),
        };
        let s = Shared {
            id,
            kind,
            state: Mutex::new(LimiterState {
                limiter,
                window: UsageWindow::new(Time::ZERO),
                fixed_wants: match wants {
                    Wants::Fixed(w) => Some(w),
                    Wants::Auto => None,
                },
                origin,
            }),
            notify: Notify::new(),
            capacity_bits: AtomicU64::new(0f64.to_bits()),
            mode: AtomicU8::new(mode_index(Mode::Pessimistic)),
            handles: AtomicUsize::new(0),
            client,
            metrics,
            note: Mutex::new(None),
            refusal: Mutex::new(None),
            feed: Feed::new(CapacityState::new(
                initial.0,
                initial.1,
                None,
                None,
                origin.into_std(),
            )),
            lease_end: AtomicU64::new(NO_END),
            after_end: Mutex::new((0.0, Mode::Pessimistic)),
            origin,
            shadow: AtomicBool::new(false),
            would_refuse: AtomicU64::new(0),
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
        self.check_end();
        f64::from_bits(self.capacity_bits.load(Ordering::Relaxed))
    }

    /// The limiter, for an acquisition: what applies now first (a lease
    /// that has ended no longer does).
    pub fn limiter(&self) -> MutexGuard<'_, LimiterState> {
        self.check_end();
        self.lock()
    }

    /// If the applied lease has ended, applies what comes after it at once
    /// (the background task publishes the same when it wakes).
    pub fn check_end(&self) {
        if crate::clock::instant() < self.end_instant() {
            return;
        }
        let after = self.after_end.lock().unwrap_or_else(|e| e.into_inner());
        let end = self.lease_end.load(Ordering::Acquire);
        if end == NO_END || crate::clock::instant() < self.origin + Duration::from_millis(end) {
            return;
        }
        let ended = self.end_instant().into_std();
        self.lease_end.store(NO_END, Ordering::Release);
        let (capacity, mode) = *after;
        self.apply(capacity, mode);
        if let Some(m) = &self.metrics {
            m.applied(capacity, mode);
        }
        let expiry = self.feed.lease_expiry();
        let mut state = CapacityState::new(self.capacity_now(), mode, None, self.note(), ended);
        state.lease_expiry = expiry.filter(|_| mode == Mode::Lease);
        self.feed.send(state);
    }

    /// When the applied lease ends (far in the future without one).
    fn end_instant(&self) -> Instant {
        match self.lease_end.load(Ordering::Acquire) {
            NO_END => self.origin + Duration::from_secs(86_400 * 365 * 30),
            ms => self.origin + Duration::from_millis(ms),
        }
    }

    /// The capacity applied, without checking the lease's end.
    fn capacity_now(&self) -> f64 {
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
    /// `capacity_watch()` and `capacity_changes()` receivers when anything
    /// they see changed.
    pub fn publish(
        &self,
        (capacity, mode): (f64, Mode),
        end: Option<LeaseEnd>,
        expiry_ms: Option<i64>,
        refused: Option<&Refused>,
    ) {
        self.set_refused(refused);
        {
            let mut after = self.after_end.lock().unwrap_or_else(|e| e.into_inner());
            let ms = end.map_or(NO_END, |e| {
                let since = e.at.saturating_duration_since(self.origin).as_millis();
                u64::try_from(since).unwrap_or(NO_END - 1)
            });
            *after = end.map_or((capacity, mode), |e| e.after);
            self.lease_end.store(ms, Ordering::Release);
            self.apply(capacity, mode);
        }
        // After applying: a reader of `capacity()` at any time before
        // `since` may have seen the old capacity, none after it.
        let since = crate::clock::instant().into_std();
        let state = CapacityState::new(self.capacity_now(), mode, expiry_ms, self.note(), since);
        self.feed.send(state);
    }

    /// A receiver of the resource's [`CapacityState`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<CapacityState> {
        self.feed.subscribe()
    }

    /// Its state now, then every change of its capacity or mode.
    pub fn changes(&self) -> CapacityChanges {
        self.feed.changes()
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
        let why = self.refusal()?;
        let reason = why.describe(&resource);
        Some(if why.is_denial() {
            AcquireError::PermissionDenied { resource, reason }
        } else {
            AcquireError::InvalidResource { resource, reason }
        })
    }

    /// Why the server refuses the resource, while it does.
    pub fn refusal(&self) -> Option<Refused> {
        self.refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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

    /// Whether the resource is in shadow mode (as the server last said).
    pub fn shadow(&self) -> bool {
        self.shadow.load(Ordering::Acquire)
    }

    /// Puts the resource in or out of shadow mode; waiters are woken to
    /// go on at once (into it) or wait as usual (out of it).
    pub fn set_shadow(&self, on: bool) {
        if self.shadow.swap(on, Ordering::AcqRel) != on {
            self.notify.notify_waiters();
        }
    }

    /// Whether an acquisition without capacity goes ahead anyway: in
    /// shadow mode, unless the acquisition is hopeless for another reason
    /// (the server refuses the resource, the client is closed), which
    /// shadow mode does not lift.
    pub fn shadow_applies(&self) -> bool {
        self.shadow() && self.hopeless().is_none()
    }

    /// Counts an acquisition shadow mode let through that would have
    /// waited or been refused.
    pub fn would_have_refused(&self) {
        self.would_refuse.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.shadow_refused.inc();
        }
    }

    /// Acquisitions shadow mode let through that would have waited or
    /// been refused, since the resource was made.
    pub fn would_refuse(&self) -> u64 {
        self.would_refuse.load(Ordering::Relaxed)
    }

    /// Records a permit's wait.
    pub fn waited(&self, seconds: f64) {
        if let Some(m) = &self.metrics {
            m.wait.observe(seconds);
        }
    }

    /// The mode currently applied.
    pub fn mode(&self) -> Mode {
        self.check_end();
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
            let now = st.at(crate::clock::instant());
            match &mut st.limiter {
                Limiter::Rate(b) => b.set_rate(capacity, now),
                Limiter::Gauge(g) => g.capacity = capacity.floor().min(u64::MAX as f64) as u64,
            }
        }
        self.notify.notify_waiters();
    }

    /// What to ask the server for now.
    pub fn wants(&self, now: Instant) -> f64 {
        let st = self.lock();
        let now = st.at(now);
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
