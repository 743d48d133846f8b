//! `tower` layers: make any tower service (a tonic client or server, an
//! axum router, reqwest through tower) take capacity from a
//! [`RateResource`] or hold a [`GaugePermit`] for each call. One generic
//! [`LimitLayer`] does both, in one of three [`Mode`]s: wait for capacity,
//! wait at most a while, or reject at once with [`ResourceExhausted`]
//! (which maps to gRPC `RESOURCE_EXHAUSTED` and HTTP 429). A call may weigh
//! more than one permit of a rate resource ([`LimitLayer::weighted`]).
//!
//! ```no_run
//! use doorman_client::tower::{Mode, RateLimitLayer};
//! use tower_layer::Layer;
//! # fn f<S: Clone>(rate: doorman_client::RateResource, service: S) {
//! let limited = RateLimitLayer::new(rate).mode(Mode::Reject).layer(service);
//! # }
//! ```
//!
//! The layered service's error is a [`BoxError`]: the inner service's
//! error, or a [`ResourceExhausted`] ([`ResourceExhausted::find`] tells
//! them apart).
//!
//! Must not: decide capacity (the resource applies what it was granted).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use crate::acquire::AcquireError;
use crate::gauge::{GaugePermit, GaugeResource};
use crate::rate::RateResource;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The error type of the layered service.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a call obtains its capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Wait as long as it takes (the default).
    #[default]
    Wait,
    /// Wait at most this long, then fail with [`ResourceExhausted`].
    WaitWithTimeout(Duration),
    /// Take capacity only if it is there now, else fail at once with
    /// [`ResourceExhausted`] (load shedding).
    Reject,
}

/// A call got no capacity: rejected, its deadline passed, or the server
/// refuses the resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource {resource:?} exhausted: {why}")]
pub struct ResourceExhausted {
    /// The resource.
    pub resource: String,
    /// Why: "no capacity now", or the acquisition error.
    pub why: String,
}

impl ResourceExhausted {
    fn now(resource: &str) -> Self {
        ResourceExhausted {
            resource: resource.to_string(),
            why: "no capacity now".into(),
        }
    }

    fn from_acquire(resource: &str, e: AcquireError) -> Self {
        ResourceExhausted {
            resource: resource.to_string(),
            why: e.to_string(),
        }
    }

    /// The `ResourceExhausted` inside a layered service's error, if that is
    /// what it is.
    pub fn find(e: &BoxError) -> Option<&ResourceExhausted> {
        e.downcast_ref::<ResourceExhausted>()
    }

    /// As a gRPC status: `RESOURCE_EXHAUSTED` with this message.
    pub fn to_status(&self) -> tonic::Status {
        tonic::Status::resource_exhausted(self.to_string())
    }

    /// The HTTP status to answer with: 429 Too Many Requests.
    pub const HTTP_STATUS: u16 = 429;
}

/// What a call must obtain before it runs, and hold until it finishes.
pub trait Admission: Clone + Send + Sync + 'static {
    /// Held for the duration of the call.
    type Guard: Send + 'static;
    /// Obtains capacity for a call of `weight` permits in `mode`.
    fn admit(&self, weight: u32, mode: Mode) -> BoxFuture<Result<Self::Guard, ResourceExhausted>>;
}

impl Admission for RateResource {
    type Guard = ();
    fn admit(&self, weight: u32, mode: Mode) -> BoxFuture<Result<(), ResourceExhausted>> {
        let r = self.clone();
        Box::pin(async move {
            match mode {
                Mode::Wait => {
                    r.wait_n(weight).await;
                    Ok(())
                }
                Mode::WaitWithTimeout(d) => r
                    .wait_n_timeout(weight, d)
                    .await
                    .map_err(|e| ResourceExhausted::from_acquire(r.id(), e)),
                Mode::Reject if r.try_acquire_n(weight) => Ok(()),
                Mode::Reject => Err(ResourceExhausted::now(r.id())),
            }
        })
    }
}

/// A gauge holds one permit per call, whatever the call's weight.
impl Admission for GaugeResource {
    type Guard = GaugePermit;
    fn admit(&self, _weight: u32, mode: Mode) -> BoxFuture<Result<GaugePermit, ResourceExhausted>> {
        let g = self.clone();
        Box::pin(async move {
            match mode {
                Mode::Wait => Ok(g.mark().await),
                Mode::WaitWithTimeout(d) => g
                    .mark_timeout(d)
                    .await
                    .map_err(|e| ResourceExhausted::from_acquire(g.id(), e)),
                Mode::Reject => g.try_mark().ok_or_else(|| ResourceExhausted::now(g.id())),
            }
        })
    }
}

/// How many permits a request takes.
pub trait Weigh<Req>: Clone + Send + Sync + 'static {
    /// The permits `req` takes.
    fn weigh(&self, req: &Req) -> u32;
}

/// Every request takes one permit.
#[derive(Debug, Clone, Copy, Default)]
pub struct One;

impl<Req> Weigh<Req> for One {
    fn weigh(&self, _: &Req) -> u32 {
        1
    }
}

impl<Req, F: Fn(&Req) -> u32 + Clone + Send + Sync + 'static> Weigh<Req> for F {
    fn weigh(&self, req: &Req) -> u32 {
        self(req)
    }
}

/// Admits each call through a resource before passing it on.
#[derive(Debug, Clone)]
pub struct LimitLayer<A, W = One> {
    admission: A,
    mode: Mode,
    weight: W,
}

/// Takes permits of a rate resource for each call.
pub type RateLimitLayer = LimitLayer<RateResource>;
/// Holds a gauge permit for the duration of each call.
pub type GaugeLayer = LimitLayer<GaugeResource>;

impl<A: Admission> LimitLayer<A> {
    /// A layer over `resource`: one permit per call, waiting for it.
    pub fn new(resource: A) -> Self {
        LimitLayer {
            admission: resource,
            mode: Mode::Wait,
            weight: One,
        }
    }
}

impl<A: Admission, W> LimitLayer<A, W> {
    /// How calls obtain capacity.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Weighs each request with `weight` (e.g. by its size).
    pub fn weighted<W2>(self, weight: W2) -> LimitLayer<A, W2> {
        LimitLayer {
            admission: self.admission,
            mode: self.mode,
            weight,
        }
    }
}

impl<S, A: Admission, W: Clone> Layer<S> for LimitLayer<A, W> {
    type Service = Limited<S, A, W>;
    fn layer(&self, inner: S) -> Self::Service {
        Limited {
            inner,
            admission: self.admission.clone(),
            mode: self.mode,
            weight: self.weight.clone(),
        }
    }
}

/// The service made by [`LimitLayer`].
#[derive(Debug, Clone)]
pub struct Limited<S, A, W = One> {
    inner: S,
    admission: A,
    mode: Mode,
    weight: W,
}

impl<S, A, W, Req> Service<Req> for Limited<S, A, W>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    A: Admission,
    W: Weigh<Req>,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The clone that was driven to readiness makes the call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let admitted = self.admission.admit(self.weight.weigh(&req), self.mode);
        Box::pin(async move {
            let _guard = admitted.await?;
            inner.call(req).await.map_err(Into::into)
        })
    }
}
