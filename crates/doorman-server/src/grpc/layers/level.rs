//! This server's level in the tree (`doorman-level`,
//! `doorman_proto::LEVEL_HEADER`) on every response of the service it
//! wraps (`doorman.Capacity`), once the level is known, so the servers
//! below know theirs.
//!
//! Must not: change anything else in a response.

use std::sync::Arc;
use std::task::{Context, Poll};

use doorman_proto::LEVEL_HEADER;
use tonic::codegen::http;
use tonic::server::NamedService;
use tower::{Layer, Service};

use super::{OnResponse, Then};
use crate::state::ServerState;

/// Says `state`'s level on every response.
#[derive(Debug, Clone)]
pub struct LevelLayer {
    state: Arc<ServerState>,
}

impl LevelLayer {
    /// Says `state`'s level as it is when each response is ready.
    pub fn new(state: Arc<ServerState>) -> Self {
        LevelLayer { state }
    }
}

impl<S> Layer<S> for LevelLayer {
    type Service = WithLevel<S>;

    fn layer(&self, inner: S) -> WithLevel<S> {
        WithLevel {
            inner,
            state: self.state.clone(),
        }
    }
}

/// A service whose responses say the server's level.
#[derive(Debug, Clone)]
pub struct WithLevel<S> {
    inner: S,
    state: Arc<ServerState>,
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
        Then::new(self.inner.call(req), Some(Level(self.state.clone())))
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
    async fn every_response_says_the_level_once_it_is_known() {
        let state = state_with_tokens(true);
        let layer = LevelLayer::new(state.clone());
        let mut svc = layer.layer(answering(0));
        let r = call(&mut svc, "/s.S/Get", None).await;
        assert!(r.headers().get(LEVEL_HEADER).is_none(), "unknown yet");
        state.set_level(2);
        let r = call(&mut svc, "/s.S/Get", None).await;
        assert_eq!(r.headers()[LEVEL_HEADER], "2");
        let mut refusing = layer.layer(answering(7));
        let r = call(&mut refusing, "/s.S/Other", None).await;
        assert_eq!(r.headers()[LEVEL_HEADER], "2");
    }
}
