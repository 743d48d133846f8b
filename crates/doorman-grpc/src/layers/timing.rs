//! Each RPC of the listed methods counted and timed, from the moment the
//! service is called until its response (or its refusal) is ready, and
//! its error counted by the code the client sees
//! (`doorman_server_requests_total`, `…_request_errors_total`,
//! `…_request_duration_seconds` by method; `Metrics::observe`). Methods
//! not listed (an unknown path, a stream) are not counted, so a caller
//! cannot add label values.
//!
//! Must not: read the clock other than through `crate::clock`.

use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;
use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::Code;
use tower::{Layer, Service};

use super::{method_in, OnResponse, Then};
use crate::transport;
use doorman_state::ServerState;

/// Times the RPCs of `methods` (their names, the last segment of the
/// path) into `state`'s metrics.
#[derive(Debug, Clone)]
pub struct TimingLayer {
    state: Arc<ServerState>,
    methods: &'static [&'static str],
}

impl TimingLayer {
    /// Times `methods` into `state`'s metrics.
    pub fn new(state: Arc<ServerState>, methods: &'static [&'static str]) -> Self {
        TimingLayer { state, methods }
    }
}

impl<S> Layer<S> for TimingLayer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose RPCs are timed.
#[derive(Debug, Clone)]
pub struct Timed<S> {
    inner: S,
    layer: TimingLayer,
}

impl<S: NamedService> NamedService for Timed<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, ReqB, ResB> Service<http::Request<ReqB>> for Timed<S>
where
    S: Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Then<S::Future, Observe>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let observe = method_in(req.uri().path(), self.layer.methods).map(|method| Observe {
            state: self.layer.state.clone(),
            method,
            start: doorman_net::clock::instant(),
        });
        Then::new(self.inner.call(req), observe)
    }
}

/// Records one RPC when its response is ready.
#[derive(Debug)]
pub struct Observe {
    state: Arc<ServerState>,
    method: &'static str,
    start: Instant,
}

impl<B> OnResponse<B> for Observe {
    fn on_response(self, resp: &mut http::Response<B>) {
        let seconds = doorman_net::clock::since(self.start).as_secs_f64();
        let code = error_code(resp.headers());
        self.state.metrics.observe(self.method, seconds, code);
    }
}

/// The error a response carries in its headers (a trailers-only gRPC
/// answer), as the client will see it; `None` for a success, whose status
/// follows in the trailers.
fn error_code(headers: &http::HeaderMap) -> Option<Code> {
    match Code::from_bytes(headers.get(transport::GRPC_STATUS)?.as_bytes()) {
        Code::Ok => None,
        _ if transport::is_undecodable(headers) => Some(Code::InvalidArgument),
        code => Some(code),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{answering, call, counter, state_with_tokens};
    use super::*;

    #[tokio::test]
    async fn listed_rpcs_are_counted_with_their_error_code() {
        let state = state_with_tokens(true);
        let layer = TimingLayer::new(state.clone(), &["Get", "Put"]);
        let mut refused = layer.layer(answering(16));
        let mut served = layer.layer(answering(0));
        call(&mut refused, "/s.S/Get", None).await;
        call(&mut served, "/s.S/Get", None).await;
        call(&mut served, "/s.S/Put", None).await;
        call(&mut served, "/s.S/Unknown", None).await;
        assert_eq!(state.metrics.requests("Get"), 2);
        assert_eq!(state.metrics.requests("Put"), 1);
        assert_eq!(state.metrics.requests("Unknown"), 0);
        let errors = "doorman_server_request_errors_total";
        let get = [("method", "Get"), ("code", "Unauthenticated")];
        assert_eq!(counter(&state, errors, &get), 1.0);
        assert_eq!(counter(&state, errors, &[("method", "Put")]), 0.0);
        let families = state.metrics.registry().gather();
        let latency = families
            .iter()
            .find(|f| f.name() == "doorman_server_request_duration_seconds")
            .expect("the latency family");
        let samples: u64 = latency
            .get_metric()
            .iter()
            .map(|m| m.get_histogram().get_sample_count())
            .sum();
        assert_eq!(samples, 3);
    }

    #[test]
    fn the_code_is_the_one_the_client_sees() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, http::HeaderValue::from_static(v));
            }
            h
        };
        assert_eq!(error_code(&headers(&[])), None);
        assert_eq!(error_code(&headers(&[("grpc-status", "0")])), None);
        let denied = headers(&[("grpc-status", "7")]);
        assert_eq!(error_code(&denied), Some(Code::PermissionDenied));
        let decode = "failed%20to%20decode%20Protobuf%20message%3A%20x";
        let undecodable = headers(&[("grpc-status", "13"), ("grpc-message", decode)]);
        assert_eq!(error_code(&undecodable), Some(Code::InvalidArgument));
    }
}
