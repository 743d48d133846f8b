//! `tower` layers: make any tower service (a tonic client, an axum handler
//! stack, reqwest through tower) wait on a [`RateResource`] or hold a
//! [`GaugePermit`] for each call.
//!
//! ```no_run
//! use doorman_client::tower::RateLimitLayer;
//! use tower_layer::Layer;
//! # fn f<S: Clone>(rate: doorman_client::RateResource, service: S) {
//! let limited = RateLimitLayer::new(rate).layer(service);
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::gauge::GaugeResource;
use crate::rate::RateResource;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Waits for one permit of a rate resource before each call.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    resource: RateResource,
}

impl RateLimitLayer {
    /// A layer over `resource`.
    pub fn new(resource: RateResource) -> Self {
        RateLimitLayer { resource }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            resource: self.resource.clone(),
        }
    }
}

/// The service made by [`RateLimitLayer`].
#[derive(Debug, Clone)]
pub struct RateLimited<S> {
    inner: S,
    resource: RateResource,
}

impl<S, Req> Service<Req> for RateLimited<S>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
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
        let resource = self.resource.clone();
        Box::pin(async move {
            resource.wait().await;
            inner.call(req).await
        })
    }
}

/// Holds a gauge permit for the duration of each call.
#[derive(Debug, Clone)]
pub struct GaugeLayer {
    resource: GaugeResource,
}

impl GaugeLayer {
    /// A layer over `resource`.
    pub fn new(resource: GaugeResource) -> Self {
        GaugeLayer { resource }
    }
}

impl<S> Layer<S> for GaugeLayer {
    type Service = GaugeLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        GaugeLimited {
            inner,
            resource: self.resource.clone(),
        }
    }
}

/// The service made by [`GaugeLayer`].
#[derive(Debug, Clone)]
pub struct GaugeLimited<S> {
    inner: S,
    resource: GaugeResource,
}

impl<S, Req> Service<Req> for GaugeLimited<S>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let resource = self.resource.clone();
        Box::pin(async move {
            let _permit = resource.mark().await;
            inner.call(req).await
        })
    }
}
