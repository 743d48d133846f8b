//! Conversions between the wire messages (`doorman.proto`) and the core's
//! own request and answer types: grants into responses, redirects into
//! `Mastership`, algorithms both ways, and the upstream request and answer
//! of an intermediate server.
//!
//! Must not: decide anything or touch state.

use doorman_algorithms::Kind;
use doorman_core::config::AlgorithmConfig;
use doorman_core::convert::UpstreamAnswer;
use doorman_core::refusal::join_bounded;
use doorman_core::server::{Grant, NotMaster, Refusal, UpstreamAsk, UpstreamGrant};
use doorman_lease::{Span, Time};
use doorman_proto::doorman as pb;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::Status;

/// The `mastership` field of a redirect.
pub fn redirect(n: NotMaster) -> Option<pb::Mastership> {
    Some(pb::Mastership {
        master_address: n.master_address,
    })
}

/// The core's answer for the wire: grants or a redirect to the master (both
/// answered OK), or `UNAVAILABLE` when the server cannot serve at all: a
/// root still waiting for its config, or a standby that does not know the
/// master (a redirect to nowhere, or to a master it can no longer observe,
/// would send the client in circles).
pub fn served(r: Result<Vec<Grant>, Refusal>) -> Result<Result<Vec<Grant>, NotMaster>, Status> {
    match r {
        Ok(grants) => Ok(Ok(grants)),
        Err(Refusal::NotMaster(NotMaster {
            master_address: None,
        })) => Err(Status::unavailable(
            "not the master, and the master is unknown (an election in progress, or etcd \
             unreachable); retry with another server of the node",
        )),
        Err(Refusal::NotMaster(n)) => Ok(Err(n)),
        Err(Refusal::NoConfig(why)) => Err(Status::unavailable(format!("no config yet: {why}"))),
    }
}

/// The grants to answer with, or none and a redirect.
fn answer(r: Result<Vec<Grant>, NotMaster>) -> (Vec<Grant>, Option<pb::Mastership>) {
    match r {
        Ok(grants) => (grants, None),
        Err(n) => (Vec::new(), redirect(n)),
    }
}

/// A GetCapacity answer.
pub fn client_response(r: Result<Vec<Grant>, NotMaster>) -> pb::GetCapacityResponse {
    let (grants, mastership) = answer(r);
    let response = grants
        .into_iter()
        .map(|g| pb::ResourceResponse {
            gets: doorman_proto::lease_to_wire(&g.lease, g.at),
            safe_capacity: Some(g.safe_capacity),
            shadow: g.shadow.then_some(true),
            resource_id: g.resource_id,
        })
        .collect();
    pb::GetCapacityResponse {
        response,
        mastership,
        pushed: None,
        note: None,
    }
}

/// The response header telling people why grants may be small
/// (`doorman-note: db/users: learning mode, 42 s left`), one
/// `RESOURCE: NOTE` per noted resource, joined by `; ` within
/// [`MAX_NOTE_BYTES`] and then `; and N more` (the core's one joiner,
/// `join_bounded`); none if no grant has a note (or the text is not valid
/// in a header).
pub fn note_header(r: &Result<Vec<Grant>, NotMaster>) -> Option<MetadataValue<Ascii>> {
    MetadataValue::try_from(note_text(r)?).ok()
}

/// The text of [`note_header`] (a lease stream's answers carry it in
/// their `note` field); none if no grant has a note.
pub fn note_text(r: &Result<Vec<Grant>, NotMaster>) -> Option<String> {
    let grants = r.as_ref().ok()?;
    if grants.iter().all(|g| g.note.is_none()) {
        return None;
    }
    let entries: Vec<String> = grants
        .iter()
        .filter_map(|g| Some(format!("{}: {}", g.resource_id, g.note?)))
        .collect();
    // Clients refuse answers whose headers pass 16 KB (h2's default).
    let text = join_bounded(entries.into_iter(), "; ", MAX_NOTE_BYTES);
    (!text.is_empty()).then_some(text)
}

/// Most bytes of notes in one answer's header (the rest are counted, not
/// listed), well under the 16 KB header list a client accepts by default.
pub const MAX_NOTE_BYTES: usize = 4096;

/// The name of [`note_header`]'s header.
pub use doorman_proto::NOTE_HEADER;

/// A GetServerCapacity answer: like GetCapacity's, plus the algorithm once
/// this server knows it (each grant as the core sends it,
/// [`UpstreamAnswer::sent`]).
pub fn server_response(r: Result<Vec<Grant>, NotMaster>) -> pb::GetServerCapacityResponse {
    let (grants, mastership) = answer(r);
    let response = grants
        .iter()
        .map(|g| answer_to_wire(UpstreamAnswer::sent(g)))
        .collect();
    pb::GetServerCapacityResponse {
        response,
        mastership,
        pushed: None,
    }
}

/// One resource of a GetServerCapacity answer, field by field.
fn answer_to_wire(a: UpstreamAnswer) -> pb::ServerCapacityResourceResponse {
    pb::ServerCapacityResourceResponse {
        resource_id: a.resource_id,
        gets: doorman_proto::wire_lease_to_pb(a.lease),
        algorithm: a.algorithm.as_ref().map(algorithm_to_proto),
        safe_capacity: a.safe_capacity,
        next_refresh_interval: a.next_refresh_interval,
        predecessor_outstanding: a.predecessor_out,
        predecessor_remaining_ms: a.predecessor_left.map(Span::as_millis),
        shadow: a.shadow.then_some(true),
    }
}

/// One resource of a GetServerCapacity answer as the core's
/// [`UpstreamAnswer`], field by field.
fn answer_from_wire(r: &pb::ServerCapacityResourceResponse) -> UpstreamAnswer {
    UpstreamAnswer {
        resource_id: r.resource_id.clone(),
        lease: doorman_proto::wire_lease_from_pb(&r.gets),
        algorithm: r.algorithm.as_ref().map(algorithm_from_proto),
        safe_capacity: r.safe_capacity,
        next_refresh_interval: r.next_refresh_interval,
        predecessor_out: r.predecessor_outstanding,
        predecessor_left: doorman_proto::millis(r.predecessor_remaining_ms),
        shadow: r.shadow == Some(true),
    }
}

/// The wire form of an algorithm, sent to downstream servers.
pub fn algorithm_to_proto(a: &AlgorithmConfig) -> pb::Algorithm {
    let kind = match a.kind {
        Kind::NoAlgorithm => pb::algorithm::Kind::NoAlgorithm,
        Kind::Static => pb::algorithm::Kind::Static,
        Kind::ProportionalShare => pb::algorithm::Kind::ProportionalShare,
        Kind::FairShare => pb::algorithm::Kind::FairShare,
    };
    pb::Algorithm {
        kind: kind as i32,
        lease_length: a.lease_length,
        refresh_interval: a.refresh_interval,
        parameters: a
            .parameters
            .iter()
            .map(|(n, v)| pb::NamedParameter {
                name: n.clone(),
                value: Some(v.clone()),
            })
            .collect(),
        learning_mode_duration: Some(a.learning_mode_duration),
    }
}

/// The algorithm a parent sent (see [`AlgorithmConfig::from_parent`]).
pub fn algorithm_from_proto(a: &pb::Algorithm) -> AlgorithmConfig {
    let kind = match pb::algorithm::Kind::try_from(a.kind) {
        Ok(pb::algorithm::Kind::NoAlgorithm) => Some(Kind::NoAlgorithm),
        Ok(pb::algorithm::Kind::Static) => Some(Kind::Static),
        Ok(pb::algorithm::Kind::ProportionalShare) => Some(Kind::ProportionalShare),
        Ok(pb::algorithm::Kind::FairShare) => Some(Kind::FairShare),
        Err(_) => {
            tracing::warn!(
                kind = a.kind,
                "parent sent an unknown algorithm kind; using FAIR_SHARE"
            );
            None
        }
    };
    let parameters = a
        .parameters
        .iter()
        .map(|p| (p.name.clone(), p.value.clone().unwrap_or_default()))
        .collect();
    AlgorithmConfig::from_parent(
        kind,
        a.lease_length,
        a.refresh_interval,
        a.learning_mode_duration,
        parameters,
    )
}

/// One entry's demand bands, `(priority, clients, wants)` each, as the
/// wire's `PriorityBandAggregate`s.
pub fn bands_to_wire(bands: &[(i64, i64, f64)]) -> Vec<pb::PriorityBandAggregate> {
    bands
        .iter()
        .map(
            |&(priority, num_clients, wants)| pb::PriorityBandAggregate {
                priority,
                num_clients,
                wants,
            },
        )
        .collect()
}

/// An intermediate server's bulk request to its parent, sent at `now`,
/// with its tree report (`crate::tree::report_to_wire`) if it sends one.
pub fn upstream_request(
    node_id: &str,
    asks: &[UpstreamAsk],
    (now, report): (Time, Option<pb::NodeReport>),
) -> pb::GetServerCapacityRequest {
    pb::GetServerCapacityRequest {
        server_id: node_id.to_string(),
        report,
        resource: asks
            .iter()
            .map(|a| {
                let claim = a.has.as_ref().map(|l| doorman_proto::claim_to_wire(l, now));
                pb::ServerCapacityResourceRequest {
                    resource_id: a.resource_id.clone(),
                    has: claim.map(|c| c.0),
                    has_remaining_ms: claim.map(|c| c.1),
                    wants: bands_to_wire(&a.bands),
                    outstanding: Some(a.outstanding),
                }
            })
            .collect(),
    }
}

/// The parent's answer to the request sent at `sent_at` and answered at
/// `received_at`, for the core ([`UpstreamAnswer::received`], the rule
/// the simulator's intermediates follow too).
pub fn upstream_grants(
    resp: &pb::GetServerCapacityResponse,
    at: (Time, Time),
) -> Vec<UpstreamGrant> {
    resp.response
        .iter()
        .map(|r| answer_from_wire(r).received(at))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use doorman_core::config::Config;

    #[test]
    fn the_note_header_stays_small_however_many_resources_are_noted() {
        use doorman_core::server::{Decision, GrantNote};
        let grant = |i: usize| Grant {
            resource_id: format!("resource/with/a/long/enough/id/{i}"),
            lease: doorman_lease::Lease {
                capacity: 0.0,
                expiry: doorman_lease::Time::from_secs(10),
                refresh_interval: 1,
            },
            at: doorman_lease::Time::ZERO,
            safe_capacity: 0.0,
            algorithm: AlgorithmConfig::unmatched(),
            algorithm_known: true,
            decision: Decision::Learning,
            shadow: false,
            note: Some(GrantNote::Learning { seconds_left: 42.0 }),
            next_refresh_interval: None,
            predecessor_out: None,
            predecessor_until: None,
        };
        let grants: Vec<Grant> = (0..1000).map(grant).collect();
        let h = note_header(&Ok(grants)).unwrap();
        let text = h.to_str().unwrap();
        assert!(text.len() <= MAX_NOTE_BYTES, "{} bytes", text.len());
        assert!(text.starts_with("resource/with/a/long/enough/id/0: learning mode, 42 s left; "));
        assert!(text.ends_with(" more"), "{text}");
        let one = note_header(&Ok(vec![grant(7)])).unwrap();
        assert_eq!(
            one.to_str().unwrap(),
            "resource/with/a/long/enough/id/7: learning mode, 42 s left"
        );
    }

    #[test]
    fn the_extensions_for_downstream_servers_cross_the_wire() {
        use doorman_core::server::Decision;
        let grant = Grant {
            resource_id: "r".into(),
            lease: doorman_lease::Lease {
                capacity: 5.0,
                expiry: doorman_lease::Time::from_secs(10),
                refresh_interval: 8,
            },
            at: doorman_lease::Time::from_secs(4),
            safe_capacity: 1.0,
            algorithm: AlgorithmConfig::unmatched(),
            algorithm_known: true,
            decision: Decision::Algorithm,
            shadow: true,
            note: None,
            next_refresh_interval: Some(2),
            predecessor_out: Some(60.0),
            predecessor_until: Some(doorman_lease::Time::from_secs(9)),
        };
        let mut wire = server_response(Ok(vec![grant.clone()]));
        // The lease's 6 s left cross too, and count from when the
        // downstream server sent its request, on its own clock (an hour
        // behind the parent's here), less the clock-rate margin.
        assert_eq!(wire.response[0].gets.remaining_ms, Some(6_000));
        let sent_at = doorman_lease::Time::from_secs(4) - doorman_lease::Span::secs(3600);
        let received_at = sent_at + doorman_lease::Span::from_millis(700);
        let g = &upstream_grants(&wire, (sent_at, received_at))[0];
        let held = doorman_lease::held_for(doorman_lease::Span::secs(6));
        assert_eq!(g.lease.expiry, sent_at + held);
        // The predecessors' word holds 5 s more, on the receiver's clock,
        // counted from when it arrived, plus the clock-rate margin.
        assert_eq!(wire.response[0].predecessor_remaining_ms, Some(5_000));
        assert_eq!(
            g.predecessor_until,
            Some(received_at + doorman_lease::Span::from_millis(5_050))
        );
        assert_eq!(
            (g.next_refresh_interval, g.predecessor_out),
            (Some(2), Some(60.0))
        );
        // Shadow mode crosses too, to clients as to downstream servers,
        // and is left off the wire when off.
        assert_eq!(wire.response[0].shadow, Some(true));
        assert!(g.shadow);
        let to_client = client_response(Ok(vec![grant.clone()]));
        assert_eq!(to_client.response[0].shadow, Some(true));
        let plain = Grant {
            shadow: false,
            ..grant.clone()
        };
        assert_eq!(client_response(Ok(vec![plain])).response[0].shadow, None);
        // The simulator, which has no wire, gets the same by the core's
        // rule alone.
        let direct = UpstreamAnswer::sent(&grant).received((sent_at, received_at));
        assert_eq!(&direct, g);
        // Nonsense from a parent is dropped, not acted on.
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            wire.response[0].predecessor_outstanding = Some(bad);
            assert_eq!(
                upstream_grants(&wire, (sent_at, sent_at))[0].predecessor_out,
                None,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_client_lease_through_the_wire_is_what_the_simulator_keeps() {
        use doorman_lease::{Lease, Span, Time};
        let l = Lease {
            capacity: 3.0,
            expiry: Time::from_millis(40_750),
            refresh_interval: 8,
        };
        for (at, sent) in [(10_250, 10_240), (40_000, 39_000), (41_000, 40_000)] {
            let (at, sent) = (Time::from_millis(at), Time::from_millis(sent));
            let wire = doorman_proto::lease_to_wire(&l, at);
            let held = doorman_proto::lease_from_wire(&wire, sent);
            assert_eq!(held, l.through_wire(at, sent), "decided at {at:?}");
        }
        // 30.5 s left, held 1 % less from when the request left.
        let held = l.through_wire(Time::from_millis(10_250), Time::from_millis(10_240));
        assert_eq!(
            held.expiry,
            Time::from_millis(10_240) + Span::from_millis(30_195)
        );
    }

    #[test]
    fn algorithms_cross_the_wire_unchanged() {
        let text = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 5\n\
                    [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\n\
                    refresh_interval = 5\nparameters = { decay_factor = \"0.25\" }\n";
        let c = Config::parse(text, "t.toml").unwrap();
        let a = &c.templates()[0].algorithm;
        let p = algorithm_to_proto(a);
        assert_eq!(p.kind, pb::algorithm::Kind::FairShare as i32);
        assert_eq!((p.lease_length, p.refresh_interval), (60, 5));
        assert_eq!(p.learning_mode_duration, Some(60));
        assert_eq!(p.parameters[0].name, "decay_factor");
        assert_eq!(&algorithm_from_proto(&p), &**a);
    }

    #[test]
    fn a_parents_odd_algorithm_is_clamped() {
        let p = pb::Algorithm {
            kind: 99,
            lease_length: -5,
            refresh_interval: 1_000,
            parameters: vec![],
            learning_mode_duration: None,
        };
        let a = algorithm_from_proto(&p);
        assert_eq!(a.kind, Kind::FairShare);
        assert_eq!((a.lease_length, a.refresh_interval), (1, 1));
        assert_eq!(a.learning_mode_duration, 1);
    }
}
