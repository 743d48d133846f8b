//! The client task's lease stream: what a pushed grant does (the core's
//! `on_push`). Whether one is open, and when to try again, is
//! `doorman_net::StreamLink`'s; requests on the stream are the task's.
//!
//! Must not: decide what a grant means (the client core does).

use doorman_core::client::GrantItem;
use doorman_lease::Time;
use doorman_net::StreamLink;
use doorman_proto::doorman as pb;

use crate::registry::ClientShared;

/// The task's stream, if it uses one.
pub(crate) type Streaming = StreamLink<pb::GetCapacityRequest>;

/// Applies pushed grants (`asking`: a request's answer is still to come;
/// `ClientCore::on_push`); a lowered one wakes the task to acknowledge it.
pub(crate) fn apply_push(shared: &ClientShared, m: &pb::GetCapacityResponse, asking: bool) {
    let now = shared.now();
    let items = grants(m, now);
    let mut st = shared.lock();
    if st.core.on_push(now, &items, asking) {
        shared.wake.notify_one();
    }
    shared.publish(&st, now);
    if let Some(m) = &shared.metrics {
        m.pushed(items.len());
    }
}

/// The grants of an answer to a request sent at `sent_at`.
pub(crate) fn grants(resp: &pb::GetCapacityResponse, sent_at: Time) -> Vec<GrantItem> {
    resp.response
        .iter()
        .map(|r| GrantItem {
            resource_id: r.resource_id.clone(),
            lease: doorman_proto::lease_from_wire(&r.gets, sent_at),
            safe_capacity: r.safe_capacity,
            shadow: r.shadow == Some(true),
        })
        .collect()
}
