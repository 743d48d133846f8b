//! The push budget against a mass arrival: 200 holders open lease streams
//! to a saturated resource one after another. Each arrival lowers the
//! fair level, so everyone's grant moves every time; without a budget the
//! server pushes to every holder after every arrival (the pushes grow in
//! the square of the holders, and took a server down from 11 700
//! renewals a second to 1 100 at 150 000 holders, BENCHMARKS.md). With
//! `--push-budget 100` it pushes no more than the budget holds (400) and
//! 100 a second after that, and still pushes: the lowerings go out a
//! part at a time. Each holder acknowledges a push at once, as the
//! client library does, so what it frees goes to the newcomers.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use doorman_core::server::PushBudgetRule;
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::IsolatedServer;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

const HOLDERS: usize = 200;

fn server(budget: f64) -> IsolatedServer {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(60).refresh(30))
        .parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.push_budget = PushBudgetRule::per_second(budget);
    IsolatedServer::start(o).expect("server starts")
}

/// Holder `i`'s request, claiming the lease it `has`.
fn request(i: usize, has: Option<pb::Lease>) -> pb::GetCapacityRequest {
    pb::GetCapacityRequest {
        client_id: format!("holder-{i}"),
        resource: vec![pb::ResourceRequest {
            resource_id: "r".into(),
            priority: 1,
            wants: 10.0,
            has_remaining_ms: has.as_ref().and_then(|l| l.remaining_ms),
            has,
        }],
    }
}

/// Holder `i` reads its stream to the end, acknowledging each push.
async fn hold(
    i: usize,
    mut answers: tonic::Streaming<pb::GetCapacityResponse>,
    tx: mpsc::Sender<pb::GetCapacityRequest>,
) {
    while let Ok(Some(m)) = answers.message().await {
        let lease = m.response.into_iter().next().map(|r| r.gets);
        if m.pushed == Some(true) && tx.send(request(i, lease)).await.is_err() {
            return;
        }
    }
}

/// Opens the holders' streams one after another, each asking once and
/// reading on until the test ends; returns how long the arrivals took.
async fn arrive(s: &IsolatedServer) -> (Duration, Vec<mpsc::Sender<pb::GetCapacityRequest>>) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", s.addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let start = Instant::now();
    let mut keep = Vec::new();
    for i in 0..HOLDERS {
        let (tx, rx) = mpsc::channel(4);
        tx.send(request(i, None)).await.unwrap();
        let mut answers = CapacityClient::new(channel.clone())
            .capacity_stream(ReceiverStream::new(rx))
            .await
            .expect("stream opens")
            .into_inner();
        let first = answers.message().await.unwrap().expect("an answer");
        assert_eq!(first.pushed, None, "the answer to its request");
        tokio::spawn(hold(i, answers, tx.clone()));
        keep.push(tx);
    }
    (start.elapsed(), keep)
}

/// Pushes over the arrivals and one second after, against what a budget
/// of `per_second` allows in that time.
async fn pushes(per_second: f64) -> (f64, f64) {
    let s = server(per_second);
    let (took, _streams) = arrive(&s).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let elapsed = took + Duration::from_secs(1);
    let allowed = per_second * 4.0 + per_second * elapsed.as_secs_f64();
    let pushed = s.pushes();
    println!("{per_second}/s: {pushed} pushes in {elapsed:?} (the budget allows {allowed:.0})");
    (pushed, allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mass_arrival_pushes_within_the_budget() {
    let (pushed, allowed) = pushes(100.0).await;
    assert!(pushed <= allowed, "{pushed} pushes, {allowed:.0} allowed");
    assert!(pushed >= 100.0, "lowerings still go out: {pushed}");
    // The same arrivals with a budget too large to bind: far more pushes
    // (so the bound above is the budget's doing, not the arrivals').
    let (unbound, _) = pushes(1e7).await;
    assert!(unbound > 4.0 * allowed, "{unbound} pushes without a bound");
}
