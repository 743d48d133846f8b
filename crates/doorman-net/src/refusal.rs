//! A refused request on the wire, both ways: the server writes a
//! [`RequestRefusal`] as a gRPC status ([`to_status`]) and our clients
//! read it back ([`from_status`]) from the status details, never from the
//! message. The status carries:
//!
//! * the code: `PERMISSION_DENIED` for a denial by the access rules,
//!   `INVALID_ARGUMENT` otherwise, and the short human message
//!   ([`RequestRefusal::message`]) — all an original Doorman client reads;
//! * a `google.rpc.ErrorInfo` (domain [`DOMAIN`]): reason `ACCESS_DENIED`
//!   or `INVALID_REQUEST`, metadata `identity` and `action` for a denial,
//!   `unnamed`, how many refused resources the details leave out, and
//!   `pad`, filler that keeps the details' base64 free of padding;
//! * a `google.rpc.BadRequest` with one field violation per refused
//!   resource (`resource[3]` for a denial, `resource[3].wants` for a bad
//!   field) or for the request (`client_id`), its reason (`ACCESS_DENIED`,
//!   `INVALID_FIELD`, `OVER_LIMIT`) and the problem for people.
//!
//! The status travels in the response's headers (trailers), and a tonic
//! (hyper) client accepts 16 KiB of them (h2 counts name + value + 32
//! bytes per header): the message percent-encoded in `grpc-message`, the
//! details (with the message again) in base64 in `grpc-status-details-bin`.
//! The details name resources while all of it stays within
//! [`HEADER_BYTES`] and count the rest in `unnamed`.
//!
//! Must not: decide what is refused (the core and validation do).

use std::collections::HashMap;
use std::sync::Arc;

use doorman_core::action::Action;
use doorman_core::refusal::{Reason, RequestRefusal, ResourceRefusal};
use prost::Message;
use tonic::{Code, Status};
use tonic_types::{BadRequest, ErrorDetail, ErrorInfo, FieldViolation, StatusExt};

/// The `ErrorInfo` domain of Doorman's refusals.
pub const DOMAIN: &str = "doorman";

/// Most bytes of response headers a refusal takes, as h2 counts them:
/// under the 16 KiB a tonic client accepts by default (hyper's
/// `max_header_list_size`; grpc-go and Envoy accept more), with room for
/// the others (`:status`, `content-type`, `grpc-status`, `date`).
pub const HEADER_BYTES: usize = 15 * 1024;

/// Room for the status's code and message tags, the details' type URLs,
/// and the `ErrorInfo` but for its identity.
const OVERHEAD_BYTES: usize = 320;

/// Bytes of the encoded `google.rpc.Status` that `message` leaves for the
/// field violations within [`HEADER_BYTES`].
fn violations_budget(message: &str, identity: usize) -> usize {
    // tonic's percent-encoding of `grpc-message`: controls, non-ASCII,
    // space and " # % < > ` ? { } take three bytes.
    let encoded: usize = message
        .bytes()
        .map(|b| match b {
            0x21..=0x7e if !b" \"#%<>`?{}".contains(&b) => 1,
            _ => 3,
        })
        .sum();
    let headers = "grpc-message".len() + "grpc-status-details-bin".len() + 2 * 32;
    let base64 = HEADER_BYTES.saturating_sub(headers + encoded);
    let binary = base64 / 4 * 3;
    binary.saturating_sub(message.len() + identity + OVERHEAD_BYTES)
}

const ACCESS_DENIED: &str = "ACCESS_DENIED";
const INVALID_REQUEST: &str = "INVALID_REQUEST";
const INVALID_FIELD: &str = "INVALID_FIELD";
const OVER_LIMIT: &str = "OVER_LIMIT";

fn violation(entries: &str, r: &ResourceRefusal) -> FieldViolation {
    let field = match r.reason.field().filter(|f| !f.is_empty()) {
        Some(f) => format!("{entries}[{}].{f}", r.index),
        None => format!("{entries}[{}]", r.index),
    };
    with_reason(field, &r.reason)
}

fn with_reason(field: String, reason: &Reason) -> FieldViolation {
    let code = match reason {
        Reason::Denied { .. } => ACCESS_DENIED,
        Reason::Invalid { .. } => INVALID_FIELD,
        Reason::OverLimit { .. } => OVER_LIMIT,
    };
    FieldViolation {
        field,
        description: reason.problem(),
        reason: code.to_string(),
        localized_message: None,
    }
}

fn encoded_len(v: &FieldViolation) -> usize {
    let pb = tonic_types::pb::bad_request::FieldViolation {
        field: v.field.clone(),
        description: v.description.clone(),
        reason: v.reason.clone(),
        localized_message: None,
    };
    let len = pb.encoded_len();
    // Its tag and length inside BadRequest.
    len + 1 + prost::length_delimiter_len(len)
}

/// `refusal` as a status for a request whose entries are the repeated
/// field `entries` (`resource` for Doorman's RPCs, `descriptors` for
/// Envoy's rate limit service).
pub fn to_status(refusal: &RequestRefusal, entries: &str) -> Status {
    let message = refusal.message();
    let identity = match refusal.first() {
        Some(Reason::Denied { identity, .. }) => identity.as_deref().map_or(0, str::len),
        _ => 0,
    };
    let mut budget = violations_budget(&message, identity);
    let mut violations = Vec::new();
    if let Some(r) = &refusal.request {
        violations.push(with_reason(r.field().unwrap_or("").to_string(), r));
    }
    let mut named = 0;
    for r in &refusal.resources {
        let v = violation(entries, r);
        let len = encoded_len(&v);
        if len > budget {
            break;
        }
        budget -= len;
        violations.push(v);
        named += 1;
    }
    let denial = refusal.is_denial();
    let mut metadata = HashMap::new();
    if let Some(Reason::Denied { identity, action }) = refusal.first() {
        if let Some(id) = identity {
            metadata.insert("identity".to_string(), id.to_string());
        }
        metadata.insert("action".to_string(), action.name().to_string());
    }
    let unnamed = refusal.resources.len() - named;
    if unnamed > 0 {
        metadata.insert("unnamed".to_string(), unnamed.to_string());
    }
    let reason = if denial {
        ACCESS_DENIED
    } else {
        INVALID_REQUEST
    };
    let code = if denial {
        Code::PermissionDenied
    } else {
        Code::InvalidArgument
    };
    let bad = BadRequest::new(violations);
    padded(|pad| {
        let mut metadata = metadata.clone();
        if pad > 0 {
            metadata.insert("pad".to_string(), "_".repeat(pad));
        }
        let info = ErrorInfo::new(reason, DOMAIN, metadata);
        let details: [ErrorDetail; 2] = [info.into(), bad.clone().into()];
        Status::with_error_details_vec(code, message.clone(), details)
    })
}

/// The first of `status(0)`, `status(1)`, … whose details take a multiple
/// of 3 bytes, so that their base64 needs no padding: tonic sends it
/// without, and the grpc-go of the original Go client (2016) decodes a
/// `-bin` header only with it (it logs "Failed to decode" otherwise,
/// though it still reads the code and message).
fn padded(status: impl Fn(usize) -> Status) -> Status {
    let first = status(0);
    if first.details().len().is_multiple_of(3) {
        return first;
    }
    (1..6)
        .map(&status)
        .find(|s| s.details().len().is_multiple_of(3))
        .unwrap_or(first)
}

/// A refusal read back from a status, for a request of `ids`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The refusal: each resource named (its id taken from `ids` by
    /// index), or the request as a whole.
    pub refusal: RequestRefusal,
    /// How many refused resources the status did not name.
    pub unnamed: usize,
}

/// The refusal a status carries, if it carries one in its details
/// (`None` for any other status, or a refusal without details, as from
/// a server that sends none). Field violations naming no entry of `ids`
/// are left out.
pub fn from_status(status: &Status, ids: &[String]) -> Option<Refused> {
    if !matches!(
        status.code(),
        Code::PermissionDenied | Code::InvalidArgument
    ) {
        return None;
    }
    let info = status
        .get_details_error_info()
        .filter(|i| i.domain == DOMAIN)?;
    let violations = status.get_details_bad_request()?.field_violations;
    let meta = |k: &str| info.metadata.get(k);
    let denied = Reason::Denied {
        identity: meta("identity").map(|s| Arc::from(s.as_str())),
        action: meta("action")
            .and_then(|a| Action::from_name(a))
            .unwrap_or(Action::Acquire),
    };
    let mut refusal = RequestRefusal::default();
    for v in violations {
        match entry(&v.field) {
            Some((index, sub)) => {
                let Some(id) = ids.get(index) else { continue };
                refusal.resources.push(ResourceRefusal {
                    index,
                    resource_id: id.clone(),
                    reason: reason(&v, sub, &denied),
                });
            }
            None => refusal.request = Some(reason(&v, &v.field, &denied)),
        }
    }
    let unnamed = meta("unnamed").and_then(|n| n.parse().ok()).unwrap_or(0);
    Some(Refused { refusal, unnamed })
}

fn reason(v: &FieldViolation, field: &str, denied: &Reason) -> Reason {
    let field = field.to_string();
    let problem = v.description.clone();
    match v.reason.as_str() {
        ACCESS_DENIED => denied.clone(),
        OVER_LIMIT => Reason::OverLimit { field, problem },
        _ => Reason::Invalid { field, problem },
    }
}

/// `entries[3].wants` as (3, `wants`); `None` for a field of the request
/// itself (no index).
fn entry(field: &str) -> Option<(usize, &str)> {
    let (_, rest) = field.split_once('[')?;
    let (index, rest) = rest.split_once(']')?;
    let index = index.parse().ok()?;
    Some((index, rest.strip_prefix('.').unwrap_or(rest)))
}

#[cfg(test)]
mod tests;
