//! `tower` layers: make any tower service (a tonic client, an axum handler
//! stack, reqwest through tower) wait on a [`RateResource`] or hold a
//! [`GaugePermit`] for each call. One generic [`LimitLayer`] does both; what
//! it waits for is the resource's [`Admission`].
//!
//! ```no_run
//! use doorman_client::tower::RateLimitLayer;
//! use tower_layer::Layer;
//! # fn f<S: Clone>(rate: doorman_client::RateResource, service: S) {
//! let limited = RateLimitLayer::new(rate).layer(service);
//! # }
//! ```
//!
//! Must not: decide capacity (the resource applies what it was granted).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::gauge::{GaugePermit, GaugeResource};
use crate::rate::RateResource;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a call must obtain before it runs, and hold until it finishes.
pub trait Admission: Clone + Send + Sync + 'static {
    /// Held for the duration of the call.
    type Guard: Send + 'static;
    /// Waits until the call may proceed.
    fn admit(&self) -> BoxFuture<Self::Guard>;
}

impl Admission for RateResource {
    type Guard = ();
    fn admit(&self) -> BoxFuture<()> {
        let r = self.clone();
        Box::pin(async move { r.wait().await })
    }
}

impl Admission for GaugeResource {
    type Guard = GaugePermit;
    fn admit(&self) -> BoxFuture<GaugePermit> {
        let g = self.clone();
        Box::pin(async move { g.mark().await })
    }
}

/// Admits each call through a resource before passing it on.
#[derive(Debug, Clone)]
pub struct LimitLayer<A> {
    admission: A,
}

/// Waits for one permit of a rate resource before each call.
pub type RateLimitLayer = LimitLayer<RateResource>;
/// Holds a gauge permit for the duration of each call.
pub type GaugeLayer = LimitLayer<GaugeResource>;

impl<A: Admission> LimitLayer<A> {
    /// A layer over `resource`.
    pub fn new(resource: A) -> Self {
        LimitLayer {
            admission: resource,
        }
    }
}

impl<S, A: Admission> Layer<S> for LimitLayer<A> {
    type Service = Limited<S, A>;
    fn layer(&self, inner: S) -> Self::Service {
        Limited {
            inner,
            admission: self.admission.clone(),
        }
    }
}

/// The service made by [`LimitLayer`].
#[derive(Debug, Clone)]
pub struct Limited<S, A> {
    inner: S,
    admission: A,
}

impl<S, A, Req> Service<Req> for Limited<S, A>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    A: Admission,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The clone that was driven to readiness makes the call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let admitted = self.admission.admit();
        Box::pin(async move {
            let _guard = admitted.await;
            inner.call(req).await
        })
    }
}
