//! This server's level in the tree (`doorman-level`,
//! `doorman_proto::LEVEL_HEADER`) on the responses of the listed methods
//! (`doorman.Capacity`'s Discovery and GetServerCapacity: what a server
//! below asks), once the level is known, so the servers below know
//! theirs. End clients' GetCapacity answers go without it: formatting and
//! encoding a header on each cost about a tenth of a request's server CPU
//! (measured with `scripts/bench-compare.sh`, 1 client).
//!
//! Must not: change anything else in a response.

use std::sync::Arc;
use std::task::{Context, Poll};

use doorman_proto::LEVEL_HEADER;
use tonic::codegen::http;
use tonic::server::NamedService;
use tower::{Layer, Service};

use super::{method_in, OnResponse, Then};
use doorman_state::ServerState;

/// Says `state`'s level on the responses of `methods`.
#[derive(Debug, Clone)]
pub struct LevelLayer {
    state: Arc<ServerState>,
    methods: &'static [&'static str],
}

impl LevelLayer {
    /// Says `state`'s level as it is when each response of `methods` is
    /// ready.
    pub fn new(state: Arc<ServerState>, methods: &'static [&'static str]) -> Self {
        LevelLayer { state, methods }
    }
}

impl<S> Layer<S> for LevelLayer {
    type Service = WithLevel<S>;

    fn layer(&self, inner: S) -> WithLevel<S> {
        WithLevel {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose responses say the server's level.
#[derive(Debug, Clone)]
pub struct WithLevel<S> {
    inner: S,
    layer: LevelLayer,
}

impl<S: NamedService> NamedService for WithLevel<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, ReqB, ResB> Service<http::Request<ReqB>> for WithLevel<S>
where
    S: Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Then<S::Future, Level>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let said = method_in(req.uri().path(), self.layer.methods).is_some();
        let level = said.then(|| Level(self.layer.state.clone()));
        Then::new(self.inner.call(req), level)
    }
}

/// Adds the server's level to a response.
#[derive(Debug)]
pub struct Level(Arc<ServerState>);

impl<B> OnResponse<B> for Level {
    fn on_response(self, resp: &mut http::Response<B>) {
        if let Some(level) = self.0.level() {
            resp.headers_mut().insert(LEVEL_HEADER, level.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{answering, call, state_with_tokens};
    use super::*;

    #[tokio::test]
    async fn the_listed_responses_say_the_level_once_it_is_known() {
        let state = state_with_tokens(true);
        let layer = LevelLayer::new(state.clone(), &["Get", "Other"]);
        let mut svc = layer.layer(answering(0));
        let r = call(&mut svc, "/s.S/Get", None).await;
        assert!(r.headers().get(LEVEL_HEADER).is_none(), "unknown yet");
        state.set_level(2);
        let r = call(&mut svc, "/s.S/Get", None).await;
        assert_eq!(r.headers()[LEVEL_HEADER], "2");
        let mut refusing = layer.layer(answering(7));
        let r = call(&mut refusing, "/s.S/Other", None).await;
        assert_eq!(r.headers()[LEVEL_HEADER], "2");
        let r = call(&mut svc, "/s.S/Unlisted", None).await;
        assert!(r.headers().get(LEVEL_HEADER).is_none(), "not listed");
    }
}
