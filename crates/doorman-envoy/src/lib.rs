//! Envoy's two rate limit protocols, served on the server's gRPC port next
//! to `doorman.Capacity`, with the same TLS, tokens and access rules:
//!
//! * `rls.rs`: `ShouldRateLimit` (RLS). The server admits each hit itself
//!   from capacity it leases from its own core (`local.rs`).
//! * `rlqs.rs`: `StreamRateLimitQuotas` (RLQS). Each stream is one client
//!   (an Envoy instance); Envoy limits by itself from the token-bucket
//!   assignment built from the client's lease.
//!
//! Descriptors and bucket ids name resources by `[envoy]` in the config
//! (`doorman_core::config::EnvoyConfig`); both front-ends are clients of
//! the server's core like any other, so a leaf passes their demand up to
//! its parent and the status page and metrics show them.
//!
//! Must not: decide capacity (the core does).

pub mod local;
pub mod rlqs;
pub mod rls;

use doorman_core::action::Action;
use doorman_core::client::{ClientCore, GrantItem};
use doorman_core::config::Config;
use doorman_core::convert;
use doorman_core::limits::{has_control_chars, id_length_problem, MAX_RESOURCE_ID_BYTES};
use doorman_core::server::{CapacityRequest, Grant, Refusal, Who};
use doorman_lease::Span;
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tonic::Status;

use doorman_state::ServerState;

/// Retry delay after the core refused (not the master, no config).
const REFUSED_RETRY: Span = Span::secs(1);

/// PERMISSION_DENIED (counted) unless the access rules let `caller`
/// acquire each of `ids` (the descriptors' resources, in order).
pub fn may_acquire<'a>(
    state: &ServerState,
    config: &Config,
    caller: Option<&str>,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<(), Status> {
    match config.acl().denials(caller, Action::Acquire, ids) {
        None => Ok(()),
        Some(why) => {
            state.metrics.denied(Action::Acquire.name());
            Err(doorman_net::refusal::to_status(&why, "descriptors"))
        }
    }
}

/// A protobuf duration of whole seconds (Envoy reads only the seconds).
pub fn whole_seconds(secs: u64) -> PbDuration {
    PbDuration {
        seconds: secs.min(i64::MAX as u64) as i64,
        nanos: 0,
    }
}

/// Why a resource id made from a descriptor cannot be used, if it can't.
pub fn resource_problem(id: &str) -> Option<String> {
    if let Some(why) = id_length_problem(id.len(), MAX_RESOURCE_ID_BYTES) {
        return Some(format!(
            "the resource id it names ({} bytes) {why}",
            id.len()
        ));
    }
    has_control_chars(id).then(|| "keys and values must not contain control characters".to_string())
}

/// Why the core would not answer, for Envoy's failure mode.
pub fn refusal_reason(r: &Refusal) -> String {
    match r {
        Refusal::NotMaster(n) => match &n.master_address {
            Some(m) => format!(
                "this server is not its node's master ({m} is): \
                 point Envoy's rate limit cluster at the master"
            ),
            None => "not the master, and the master is unknown (an election in progress)".into(),
        },
        Refusal::NoConfig(why) => format!("no config yet: {why}"),
    }
}

/// Sends what `core` has due through this server's core as `who` and
/// applies the answer to it. `None` when nothing was due; else the grants
/// (the core leaves out resources it cannot answer yet) or the refusal.
pub fn refresh(
    state: &ServerState,
    who: &Who,
    core: &mut ClientCore,
) -> Option<Result<Vec<Grant>, Refusal>> {
    let now = state.now();
    let items = core.poll_request(now)?;
    let ids: Vec<String> = items.iter().map(|i| i.resource_id.clone()).collect();
    let req = CapacityRequest {
        who: who.clone(),
        resources: items.iter().map(|i| convert::ask(i, now)).collect(),
    };
    let out = state.decide_in_process(&req);
    match &out {
        Ok(grants) => {
            let items: Vec<GrantItem> = grants.iter().map(convert::answer_item).collect();
            core.on_response(now, &ids, &items);
        }
        Err(_) => core.on_failure(now, &ids, REFUSED_RETRY),
    }
    Some(out)
}
