//! Who calls an RPC, resolved once for Doorman's and Envoy's services
//! alike: the bearer token's identity, else the client certificate's
//! (the TLS layer's `PeerInfo`), else anonymous (`ServerState::identify_rpc`,
//! which counts failures). The handler reads it with [`Caller::of`]. A bad
//! token, or none where callers can authenticate and anonymous ones are
//! not allowed, is UNAUTHENTICATED and never reaches the handler.
//!
//! Must not: decide what an identity may do (the access rules do), or
//! print a token.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::Status;
use tower::{Layer, Service};

use super::method_in;
use doorman_state::ServerState;
use doorman_transport::tls::PeerInfo;

/// The identity of an RPC's caller (`None`: anonymous), in the request's
/// extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub Option<Arc<str>>);

impl Caller {
    /// The caller of `req` as [`CallerLayer`] resolved it. Without the
    /// layer (a wiring bug, never the request's doing) the RPC fails
    /// INTERNAL rather than serve an unidentified caller.
    pub fn of<T>(req: &tonic::Request<T>) -> Result<Option<Arc<str>>, Status> {
        match req.extensions().get::<Caller>() {
            Some(Caller(who)) => Ok(who.clone()),
            None => {
                tracing::error!("an RPC reached its handler without the caller layer");
                Err(Status::internal("the caller was not identified"))
            }
        }
    }
}

/// Identifies the callers of `methods` (their names, the last segment of
/// the path); other paths pass as they are.
#[derive(Debug, Clone)]
pub struct CallerLayer {
    state: Arc<ServerState>,
    methods: &'static [&'static str],
}

impl CallerLayer {
    /// Identifies callers of `methods` by `state`'s tokens and rules.
    pub fn new(state: Arc<ServerState>, methods: &'static [&'static str]) -> Self {
        CallerLayer { state, methods }
    }
}

impl<S> Layer<S> for CallerLayer {
    type Service = Identified<S>;

    fn layer(&self, inner: S) -> Identified<S> {
        Identified {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose requests carry their [`Caller`].
#[derive(Debug, Clone)]
pub struct Identified<S> {
    inner: S,
    layer: CallerLayer,
}

impl<S: NamedService> NamedService for Identified<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Identified<S> {
    /// The caller of `req`, or UNAUTHENTICATED.
    fn identify<B>(&self, req: &http::Request<B>) -> Result<Option<Arc<str>>, Status> {
        let peer = req.extensions().get::<PeerInfo>();
        let peer = peer.and_then(|p| p.identity.as_ref());
        let header = req.headers().get(http::header::AUTHORIZATION);
        let header = header.map(|v| v.as_bytes());
        let state = &self.layer.state;
        state
            .identify_rpc(peer, header)
            .map_err(|e| Status::unauthenticated(e.to_string()))
    }
}

impl<S, ReqB, ResB> Service<http::Request<ReqB>> for Identified<S>
where
    S: Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Unpin,
    ResB: Default,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Identify<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqB>) -> Self::Future {
        if method_in(req.uri().path(), self.layer.methods).is_none() {
            return Identify::Call(self.inner.call(req));
        }
        match self.identify(&req) {
            Ok(who) => {
                req.extensions_mut().insert(Caller(who));
                Identify::Call(self.inner.call(req))
            }
            // The inner service is not called: tonic's services keep
            // nothing reserved by `poll_ready`.
            Err(status) => Identify::Refused(Some(status.into_http())),
        }
    }
}

/// The inner service's answer, or the refusal of an unidentified caller.
#[derive(Debug)]
pub enum Identify<F, B> {
    /// The caller is known: the service answers.
    Call(F),
    /// UNAUTHENTICATED (taken when polled).
    Refused(Option<http::Response<B>>),
}

// The response body is only ever moved out, never pinned.
impl<F: Unpin, B> Unpin for Identify<F, B> {}

impl<F, B, E> Future for Identify<F, B>
where
    F: Future<Output = Result<http::Response<B>, E>> + Unpin,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.get_mut() {
            Identify::Call(f) => Pin::new(f).poll(cx),
            Identify::Refused(r) => match r.take() {
                Some(resp) => Poll::Ready(Ok(resp)),
                None => Poll::Pending,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{call, counter, echo_caller, state_with_tokens};
    use super::*;

    #[tokio::test]
    async fn the_caller_is_resolved_once_and_a_bad_one_refused() {
        let state = state_with_tokens(true);
        let mut svc = CallerLayer::new(state.clone(), &["Get"]).layer(echo_caller());
        let get = "/s.S/Get";
        let r = call(&mut svc, get, Some("Bearer 0123456789abcdef-batch")).await;
        assert_eq!(r.headers()["caller"], "batch");
        // No identity where callers authenticate: refused before the handler.
        let r = call(&mut svc, get, None).await;
        assert_eq!(r.headers()["grpc-status"], "16");
        assert!(r.headers().get("caller").is_none());
        let r = call(&mut svc, get, Some("Bearer wrong-wrong-wrong")).await;
        assert_eq!(r.headers()["grpc-status"], "16");
        let failures = |reason| {
            counter(
                &state,
                "doorman_server_auth_failures_total",
                &[("reason", reason)],
            )
        };
        assert_eq!(
            (failures("anonymous"), failures("unknown_token")),
            (1.0, 1.0)
        );
        // A method not listed is neither identified nor refused.
        let r = call(&mut svc, "/s.S/Open", Some("Bearer wrong-wrong-wrong")).await;
        assert_eq!(r.headers()["caller"], "(no layer)");
        assert_eq!(failures("unknown_token"), 1.0);
    }

    #[tokio::test]
    async fn anonymous_callers_pass_where_allowed() {
        let state = state_with_tokens(false);
        let mut svc = CallerLayer::new(state, &["Get"]).layer(echo_caller());
        let r = call(&mut svc, "/s.S/Get", None).await;
        assert_eq!(r.headers()["caller"], "(anonymous)");
    }

    #[test]
    fn a_handler_without_the_layer_is_refused() {
        let req = tonic::Request::new(());
        assert_eq!(Caller::of(&req).unwrap_err().code(), tonic::Code::Internal);
    }
}
