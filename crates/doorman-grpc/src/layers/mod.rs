//! What every RPC of the gRPC port goes through besides its handler, as
//! tower layers applied where the tonic server is built
//! (`server.rs::spawn_grpc`, through [`capacity`], [`rls`] and [`rlqs`]),
//! as linkerd2-proxy does:
//!
//! * [`caller`]: who the caller is (bearer token, else client
//!   certificate, else anonymous), resolved once per RPC and handed to
//!   the handler as a [`Caller`] in the request's extensions; a bad token,
//!   or none where one is required, is UNAUTHENTICATED before the handler
//!   runs.
//! * [`timing`]: each RPC counted and timed by method, its error counted
//!   by code (`doorman_server_requests_total` and its siblings).
//! * [`level`]: this server's level in the tree (`doorman-level`) on every
//!   response of `doorman.Capacity`.
//!
//! Outermost first: level, timing, caller, then the service (the timing
//! sees the caller's refusals, as a client does). The port-wide rewrite of
//! an undecodable request (`transport.rs`) is outside all of them.
//!
//! Must not: look into a request's message, or decide anything.

pub mod caller;
pub mod level;
pub mod timing;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use caller::{Caller, CallerLayer};
pub use level::LevelLayer;
pub use timing::TimingLayer;
use tonic::codegen::http;
use tower::Layer;

use doorman_state::ServerState;

/// `doorman.Capacity`'s methods, as metrics name them.
pub const CAPACITY_METHODS: &[&str] = &[
    "Discovery",
    "GetCapacity",
    "GetServerCapacity",
    "ReleaseCapacity",
];
/// The methods of `doorman.Capacity` that need to know their caller
/// (anyone may ask who the master is).
pub const CAPACITY_IDENTIFIED: &[&str] = &[
    "GetCapacity",
    "GetServerCapacity",
    "ReleaseCapacity",
    "CapacityStream",
    "ServerCapacityStream",
];
/// The methods of `doorman.Capacity` whose answers say the level (what a
/// server below asks).
pub const CAPACITY_LEVELLED: &[&str] = &["Discovery", "GetServerCapacity", "ServerCapacityStream"];
/// Envoy's RLS method.
pub const RLS_METHODS: &[&str] = &["ShouldRateLimit"];
/// Envoy's RLQS method (a stream: identified, not timed).
pub const RLQS_METHODS: &[&str] = &["StreamRateLimitQuotas"];

/// `doorman.Capacity` with its layers.
pub fn capacity<S>(
    state: &Arc<ServerState>,
    svc: S,
) -> level::WithLevel<timing::Timed<caller::Identified<S>>> {
    let svc = CallerLayer::new(state.clone(), CAPACITY_IDENTIFIED).layer(svc);
    let svc = TimingLayer::new(state.clone(), CAPACITY_METHODS).layer(svc);
    LevelLayer::new(state.clone(), CAPACITY_LEVELLED).layer(svc)
}

/// Envoy's RLS service with its layers.
pub fn rls<S>(state: &Arc<ServerState>, svc: S) -> timing::Timed<caller::Identified<S>> {
    let svc = CallerLayer::new(state.clone(), RLS_METHODS).layer(svc);
    TimingLayer::new(state.clone(), RLS_METHODS).layer(svc)
}

/// Envoy's RLQS service with its layer (a stream's life is not a
/// request's latency, so it is not timed).
pub fn rlqs<S>(state: &Arc<ServerState>, svc: S) -> caller::Identified<S> {
    CallerLayer::new(state.clone(), RLQS_METHODS).layer(svc)
}

/// The method of a gRPC path (`/package.Service/Method`) if it is one of
/// `methods`. Compared from the end, without searching for the last `/`
/// (on every RPC, in each layer, that search was a measurable part of the
/// layers' cost: callgrind, 1 000 clients).
fn method_in(path: &str, methods: &'static [&'static str]) -> Option<&'static str> {
    methods.iter().copied().find(|m| {
        path.len() > m.len()
            && path.ends_with(m)
            && path.as_bytes()[path.len() - m.len() - 1] == b'/'
    })
}

/// What a layer does to a response when its service yields one.
pub trait OnResponse<B> {
    /// Looks at or changes `resp`.
    fn on_response(self, resp: &mut http::Response<B>);
}

/// The inner service's future, then `A` on its response (not on an
/// error: tonic's services have none, failures are responses).
#[derive(Debug)]
pub struct Then<F, A> {
    inner: F,
    after: Option<A>,
}

impl<F, A> Then<F, A> {
    fn new(inner: F, after: Option<A>) -> Self {
        Then { inner, after }
    }
}

impl<F, A, B, E> Future for Then<F, A>
where
    F: Future<Output = Result<http::Response<B>, E>> + Unpin,
    A: OnResponse<B> + Unpin,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut out = std::task::ready!(Pin::new(&mut this.inner).poll(cx));
        if let (Ok(resp), Some(after)) = (&mut out, this.after.take()) {
            after.on_response(resp);
        }
        Poll::Ready(out)
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_the_paths_last_segment_if_listed() {
        let path = "/doorman.Capacity/GetCapacity";
        assert_eq!(method_in(path, CAPACITY_METHODS), Some("GetCapacity"));
        assert_eq!(method_in("/doorman.Capacity/Nope", CAPACITY_METHODS), None);
        assert_eq!(
            method_in("/doorman.Capacity/Discovery", CAPACITY_IDENTIFIED),
            None
        );
        assert_eq!(method_in("", CAPACITY_METHODS), None);
        assert_eq!(method_in("GetCapacity", CAPACITY_METHODS), None);
        assert_eq!(
            method_in("/doorman.Capacity/XGetCapacity", CAPACITY_METHODS),
            None
        );
        assert_eq!(
            method_in("/GetCapacity", CAPACITY_METHODS),
            Some("GetCapacity")
        );
    }
}
