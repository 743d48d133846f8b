//! `--protocol stream`: the load on lease streams (`CapacityStream`),
//! as our clients renew on it. Each client is a holder with a stream of
//! its own, opened at its first request; worker w serves the clients w,
//! w + K, w + 2K, … (K = `--concurrency`), in turn, one request in flight
//! each, timed from when it was due (as `pace.rs` says) to its answer.
//! Pushed grants are counted and recorded as the client's lease.
//!
//! Must not: answer a push (the server's acknowledgement rule is the
//! client library's; the load measures renewals).

use std::sync::Arc;
use std::time::Duration;

use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::report::histogram;
use super::{Shared, WorkerResult};

/// One client's open stream.
struct Holder {
    requests: mpsc::Sender<pb::GetCapacityRequest>,
    answers: tonic::Streaming<pb::GetCapacityResponse>,
}

/// Opens client `c`'s stream on channel `w`.
async fn open(shared: &Shared, w: usize) -> Result<Holder, tonic::Status> {
    let channel = shared.target().channel(w);
    let (requests, queued) = mpsc::channel(4);
    let mut req = tonic::Request::new(ReceiverStream::new(queued));
    if let Some(t) = &shared.token {
        t.attach(&mut req);
    }
    let answers = CapacityClient::new(channel)
        .capacity_stream(req)
        .await?
        .into_inner();
    Ok(Holder { requests, answers })
}

/// Sends client `c`'s request on its stream and waits for the answer
/// (recording pushes on the way); the stream is dropped on any failure.
async fn ask(
    shared: &Shared,
    holder: &mut Option<Holder>,
    (c, w): (usize, usize),
    pushes: &mut u64,
) -> Result<(), String> {
    if holder.is_none() {
        *holder = Some(
            open(shared, w)
                .await
                .map_err(|s| format!("{:?}", s.code()))?,
        );
    }
    let Some(h) = holder.as_mut() else {
        return Err("Unavailable".into());
    };
    if h.requests.send(shared.request(c)).await.is_err() {
        *holder = None;
        return Err("Unavailable".into());
    }
    loop {
        match h.answers.message().await {
            Ok(Some(m)) if m.pushed == Some(true) => {
                *pushes += 1;
                shared.record(c, &m);
            }
            Ok(Some(m)) if m.mastership.is_some() => {
                *holder = None;
                return Err("Redirect".into());
            }
            Ok(Some(m)) => {
                shared.record(c, &m);
                return Ok(());
            }
            Ok(None) => {
                *holder = None;
                return Err("Unavailable".into());
            }
            Err(s) => {
                *holder = None;
                return Err(format!("{:?}", s.code()));
            }
        }
    }
}

/// Worker `w`: its clients' renewals on their streams until the end.
pub(super) async fn worker(shared: Arc<Shared>, w: usize) -> anyhow::Result<WorkerResult> {
    let mut res = WorkerResult {
        hist: histogram(),
        rpcs: 0,
        over_limit: 0,
        errors: Default::default(),
    };
    let k = shared.opts.concurrency;
    let mine: Vec<usize> = (w..shared.ids.len()).step_by(k).collect();
    let mut holders: Vec<Option<Holder>> = mine.iter().map(|_| None).collect();
    let timeout = Duration::from_secs_f64(shared.opts.timeout);
    let mut turn = 0;
    // Pushes are counted as `over_limit` (the report names them).
    let mut pushes = 0;
    while !mine.is_empty() {
        let Some(start) = shared.pace.next(shared.end).await else {
            break;
        };
        let i = turn % mine.len();
        turn += 1;
        let asked = ask(&shared, &mut holders[i], (mine[i], w), &mut pushes);
        let measuring = start >= shared.measure_from;
        match tokio::time::timeout(timeout, asked).await {
            Ok(Ok(())) if measuring => res.answered(start.elapsed()),
            Ok(Err(code)) if measuring => res.failed(code),
            Err(_) => {
                holders[i] = None;
                if measuring {
                    res.failed("DeadlineExceeded".into());
                }
            }
            _ => {}
        }
    }
    res.over_limit = pushes;
    Ok(res)
}
