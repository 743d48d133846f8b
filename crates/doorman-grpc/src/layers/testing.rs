//! What the layers' tests share: a server state, trivial services to wrap
//! and a way to call them and read a counter.
//!
//! Must not: be compiled outside tests.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::Arc;

use doorman_core::config::Config;
use doorman_core::server::CoreOptions;
use tonic::codegen::http;
use tower::{Service, ServiceExt};

use super::Caller;
use doorman_state::core_locks::LockedCore;
use doorman_state::metrics::Metrics;
use doorman_state::ServerState;
use doorman_transport::auth::{Auth, TokenFile, Tokens};

const CONFIG: &str = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 10\n[resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 5\n";

/// A server state; its callers authenticate with one token (`batch`) and
/// anonymous ones are refused unless `allow_anonymous`.
pub fn state_with_tokens(refuse_anonymous: bool) -> Arc<ServerState> {
    let config = Arc::new(Config::parse(CONFIG, "t").expect("test config"));
    let core = LockedCore::new(CoreOptions::default(), config, 2);
    let mut state = ServerState::new(
        core,
        Metrics::new(),
        Arc::new(doorman_net::clock::lease_clock),
    );
    let t = "[[token]]\nidentity = \"batch\"\ntoken = \"0123456789abcdef-batch\"\n";
    let tokens = Tokens::parse(t).expect("test tokens");
    state.auth = Auth {
        tokens: Some(Arc::new(TokenFile::fixed(tokens))),
        authenticating: true,
        allow_anonymous: !refuse_anonymous,
        ..Auth::default()
    };
    Arc::new(state)
}

type Echo = fn(http::Request<()>) -> Ready<Result<http::Response<()>, Infallible>>;

/// A service answering OK with its request's caller in the `caller`
/// header (`(anonymous)`, or `(no layer)` without a [`Caller`]).
pub fn echo_caller() -> tower::util::ServiceFn<Echo> {
    tower::service_fn(|req: http::Request<()>| {
        let who = match req.extensions().get::<Caller>() {
            Some(Caller(Some(who))) => who.to_string(),
            Some(Caller(None)) => "(anonymous)".to_string(),
            None => "(no layer)".to_string(),
        };
        let resp = http::Response::builder().header("caller", who).body(());
        ready(Ok(resp.expect("a valid header")))
    })
}

/// A service answering with `grpc-status: code` in its headers (a
/// trailers-only gRPC answer), none for 0.
pub fn answering(
    code: i32,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<()>,
    Error = Infallible,
    Future = Ready<Result<http::Response<()>, Infallible>>,
> + Clone {
    tower::service_fn(move |_req: http::Request<()>| {
        let mut resp = http::Response::new(());
        if code != 0 {
            resp.headers_mut().insert("grpc-status", code.into());
        }
        ready(Ok(resp))
    })
}

/// Calls `svc` at `path`, with an `authorization` header if given.
pub async fn call<S>(svc: &mut S, path: &str, authorization: Option<&str>) -> http::Response<()>
where
    S: Service<http::Request<()>, Response = http::Response<()>, Error = Infallible>,
{
    let mut req = http::Request::builder().uri(path);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let req = req.body(()).expect("a valid request");
    let Ok(resp) = svc.ready().await.expect("ready").call(req).await;
    resp
}

/// The value of the counter `name` whose labels include `labels`.
pub fn counter(state: &ServerState, name: &str, labels: &[(&str, &str)]) -> f64 {
    let families = state.metrics.registry().gather();
    let Some(family) = families.iter().find(|f| f.name() == name) else {
        return 0.0;
    };
    let has = |m: &prometheus::proto::Metric, (k, v): &(&str, &str)| {
        m.get_label()
            .iter()
            .any(|l| l.name() == *k && l.value() == *v)
    };
    family
        .get_metric()
        .iter()
        .filter(|m| labels.iter().all(|l| has(m, l)))
        .map(|m| m.get_counter().get_value())
        .sum()
}
