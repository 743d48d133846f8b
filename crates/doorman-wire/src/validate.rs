//! Turns protobuf requests into validated core requests.
//!
//! A request whose requester id or size is wrong is refused whole with
//! `INVALID_ARGUMENT`. Otherwise each resource entry is checked alone: the
//! valid ones go to the core and the invalid ones are left out, each with
//! its reason (the original Doorman server answers the valid entries too);
//! only when no entry is valid is the request refused, naming every bad
//! entry, e.g. `resource[2].wants: must be a finite number from 0 to 1e15,
//! got NaN`, in the status details as well as its message
//! (`doorman_net::refusal`). ReleaseCapacity ignores empty, over-long and repeated ids, as
//! the original server does (the original Go client's `Close()` sends one
//! empty id per resource before the real ones).
//!
//! Must not: touch server state. Nothing here can panic on any input.

use std::collections::HashSet;
use std::sync::Arc;

use doorman_lease::{Amount, Demand};
use doorman_proto::doorman as pb;
use tonic::Status;

use doorman_core::limits::{
    id_length_problem, MAX_AMOUNT, MAX_BANDS, MAX_ID_BYTES, MAX_RESOURCES_PER_REQUEST,
    MAX_RESOURCE_ID_BYTES,
};
use doorman_core::refusal::{Reason, RequestRefusal, ResourceRefusal};
use doorman_core::server::{CapacityRequest, Claim, ResourceAsk, Who};
use doorman_net::refusal::to_status;

/// A resource entry left out of a request, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// What was wrong, as a metrics label: `resource_id`, `duplicate`,
    /// `wants`, `has`, `bands`, `num_clients` or `outstanding`.
    pub reason: &'static str,
    /// The entry, its field and what is wrong with it.
    pub refusal: ResourceRefusal,
}

/// A request for the core (its valid entries) and the entries left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// What goes to the core.
    pub request: CapacityRequest,
    /// What was left out, in request order.
    pub rejected: Vec<Rejected>,
}

impl Checked {
    /// The index in the request as sent of `request.resources[i]` (the
    /// entries left out shift it; nothing is kept for it on the way).
    pub fn position(&self, i: usize) -> usize {
        let mut at = i;
        for r in &self.rejected {
            if r.refusal.index > at {
                break;
            }
            at += 1;
        }
        at
    }
}

/// A field of resource entry `entry` (`resource[2].wants[0].num_clients`),
/// formatted only when the entry is rejected: a valid entry costs no
/// string.
#[derive(Debug, Clone, Copy)]
struct Field {
    entry: usize,
    band: Option<usize>,
    leaf: &'static str,
}

impl Field {
    fn at(entry: usize, leaf: &'static str) -> Field {
        Field {
            entry,
            band: None,
            leaf,
        }
    }
}

impl Field {
    /// Its path inside the entry (`wants[1].num_clients`).
    fn path(&self) -> String {
        match self.band {
            Some(j) => format!("wants[{j}]{}", self.leaf),
            None => self.leaf.trim_start_matches('.').to_string(),
        }
    }
}

/// Ids seen so far in a request (none kept for a one-entry request, which
/// cannot repeat one).
type Seen<'a> = Option<HashSet<&'a str>>;

fn seen<'a>(entries: usize) -> Seen<'a> {
    (entries > 1).then(|| HashSet::with_capacity(entries))
}

/// INVALID_ARGUMENT for the request as a whole.
fn invalid(reason: Reason) -> Status {
    to_status(&RequestRefusal::whole(reason), "resource")
}

/// An id of `len` bytes at `field` is empty (invalid) or too long (over
/// the limit), if it is (the field's name is made only then).
fn id_problem(field: impl FnOnce() -> String, len: usize, max: usize) -> Option<Reason> {
    let problem = id_length_problem(len, max)?;
    let field = field();
    Some(if len == 0 {
        Reason::Invalid { field, problem }
    } else {
        Reason::OverLimit { field, problem }
    })
}

/// Entry `field.entry` is invalid (its id is filled in by the caller).
fn reject(label: &'static str, field: Field, why: impl std::fmt::Display) -> Rejected {
    let reason = Reason::Invalid {
        field: field.path(),
        problem: why.to_string(),
    };
    rejected(label, field.entry, reason)
}

fn rejected(label: &'static str, index: usize, reason: Reason) -> Rejected {
    Rejected {
        reason: label,
        refusal: ResourceRefusal {
            index,
            resource_id: String::new(),
            reason,
        },
    }
}

/// `r` with the id of the entry it rejects.
fn of_entry(id: &str) -> impl FnOnce(Rejected) -> Rejected + '_ {
    move |mut r| {
        r.refusal.resource_id = id.to_string();
        r
    }
}

/// The requester's id and the number of entries: wrong ones refuse the
/// whole request.
fn check_request(id_field: &str, id: &str, entries: usize) -> Result<(), Status> {
    if let Some(reason) = id_problem(|| id_field.into(), id.len(), MAX_ID_BYTES) {
        return Err(invalid(reason));
    }
    if doorman_core::limits::has_control_chars(id) {
        return Err(invalid(Reason::Invalid {
            field: id_field.into(),
            problem: "must not contain control characters".into(),
        }));
    }
    if entries > MAX_RESOURCES_PER_REQUEST {
        return Err(invalid(Reason::OverLimit {
            field: "resource".into(),
            problem: format!(
                "must be at most {MAX_RESOURCES_PER_REQUEST} resources per request, got {entries}"
            ),
        }));
    }
    Ok(())
}

fn check_resource_id<'a>(field: Field, id: &'a str, seen: &mut Seen<'a>) -> Result<(), Rejected> {
    if let Some(reason) = id_problem(|| field.path(), id.len(), MAX_RESOURCE_ID_BYTES) {
        return Err(rejected("resource_id", field.entry, reason));
    }
    if seen.as_mut().is_some_and(|s| !s.insert(id)) {
        let why = format!("resource {id:?} appears more than once in the request");
        return Err(reject("duplicate", field, why));
    }
    Ok(())
}

fn amount(reason: &'static str, field: Field, value: f64) -> Result<Amount, Rejected> {
    match Amount::new("value", value) {
        Ok(a) if a.get() <= MAX_AMOUNT => Ok(a),
        _ => Err(reject(
            reason,
            field,
            format!("must be a finite number from 0 to {MAX_AMOUNT:e}, got {value}"),
        )),
    }
}

/// The lease an entry claims: its capacity checked, its refresh interval,
/// end and remaining length as sent (the end in whole seconds on the
/// wire, any value, saturating; the remaining length from the entry's
/// `has_remaining_ms`, never from the lease, which the original client
/// sends back as it got it; negative as zero; the interval is bounded
/// where it is used).
fn claim(
    entry: usize,
    (lease, remaining_ms): (Option<&pb::Lease>, Option<i64>),
) -> Result<Option<Claim>, Rejected> {
    lease
        .map(|l| {
            let has = amount("has", Field::at(entry, ".has.capacity"), l.capacity)?;
            Ok(Claim {
                has,
                refresh: l.refresh_interval,
                expiry: doorman_lease::Time::from_secs(l.expiry_time),
                remaining: doorman_proto::millis(remaining_ms),
            })
        })
        .transpose()
}

/// The valid entries go to the core; none valid (but some given) refuses
/// the request, naming every bad entry.
fn collect(
    who: Who,
    entries: impl Iterator<Item = Result<ResourceAsk, Rejected>>,
) -> Result<Checked, Status> {
    let mut resources = Vec::with_capacity(entries.size_hint().0);
    let mut rejected = Vec::new();
    for e in entries {
        match e {
            Ok(ask) => resources.push(ask),
            Err(r) => rejected.push(r),
        }
    }
    if resources.is_empty() && !rejected.is_empty() {
        let each = rejected.into_iter().map(|r| r.refusal).collect();
        let refusal = RequestRefusal::of(each).unwrap_or_default();
        return Err(to_status(&refusal, "resource"));
    }
    Ok(Checked {
        request: CapacityRequest { who, resources },
        rejected,
    })
}

/// The entries' problems for people: each named (cut at 300 bytes) while
/// the text stays within [`doorman_core::refusal::MESSAGE_BYTES`], then
/// how many more, so that a log line stays small whatever the request.
pub fn summary(rejected: &[Rejected]) -> String {
    let each = rejected.iter().map(|r| r.refusal.clone()).collect();
    RequestRefusal::of(each).unwrap_or_default().message()
}

fn client_entry<'a>(
    i: usize,
    r: &'a pb::ResourceRequest,
    seen: &mut Seen<'a>,
) -> Result<ResourceAsk, Rejected> {
    check_resource_id(Field::at(i, ".resource_id"), &r.resource_id, seen)?;
    let wants = amount("wants", Field::at(i, ".wants"), r.wants)?;
    Ok(ResourceAsk {
        resource_id: r.resource_id.clone(),
        demands: vec![Demand::client(r.priority, wants)],
        claim: claim(i, (r.has.as_ref(), r.has_remaining_ms))?,
        outstanding: None,
    })
}

/// Validates a GetCapacity request.
pub fn get_capacity<'a>(req: &'a pb::GetCapacityRequest) -> Result<Checked, Status> {
    check_request("client_id", &req.client_id, req.resource.len())?;
    let mut seen = seen(req.resource.len());
    let who = Who::Client(Arc::from(req.client_id.as_str()));
    let entries = req.resource.iter().enumerate();
    let each = |(i, r): (usize, &'a pb::ResourceRequest)| {
        client_entry(i, r, &mut seen).map_err(of_entry(&r.resource_id))
    };
    collect(who, entries.map(each))
}

fn bands(i: usize, r: &pb::ServerCapacityResourceRequest) -> Result<Vec<Demand>, Rejected> {
    if r.wants.len() > MAX_BANDS {
        let problem = format!(
            "must be at most {MAX_BANDS} priority bands, got {}",
            r.wants.len()
        );
        let field = "wants".to_string();
        return Err(rejected("bands", i, Reason::OverLimit { field, problem }));
    }
    let mut demands = Vec::with_capacity(r.wants.len());
    for (j, band) in r.wants.iter().enumerate() {
        let bf = |leaf| Field {
            entry: i,
            band: Some(j),
            leaf,
        };
        if band.num_clients < 1 {
            let why = format!("must be >= 1, got {}", band.num_clients);
            return Err(reject("num_clients", bf(".num_clients"), why));
        }
        let wants = amount("wants", bf(".wants"), band.wants)?;
        let d = Demand::new(band.priority, band.num_clients, wants.get())
            .map_err(|e| reject("bands", bf(""), e))?;
        demands.push(d);
    }
    Ok(demands)
}

fn server_entry<'a>(
    i: usize,
    r: &'a pb::ServerCapacityResourceRequest,
    seen: &mut Seen<'a>,
) -> Result<ResourceAsk, Rejected> {
    check_resource_id(Field::at(i, ".resource_id"), &r.resource_id, seen)?;
    let demands = crate::legacy::demands(bands(i, r)?, r.outstanding.is_some());
    let outstanding = r
        .outstanding
        .map(|o| amount("outstanding", Field::at(i, ".outstanding"), o))
        .transpose()?;
    Ok(ResourceAsk {
        resource_id: r.resource_id.clone(),
        demands,
        claim: claim(i, (r.has.as_ref(), r.has_remaining_ms))?,
        outstanding,
    })
}

/// Validates a GetServerCapacity request.
pub fn get_server_capacity<'a>(req: &'a pb::GetServerCapacityRequest) -> Result<Checked, Status> {
    check_request("server_id", &req.server_id, req.resource.len())?;
    let mut seen = seen(req.resource.len());
    let who = Who::Server(Arc::from(req.server_id.as_str()));
    let entries = req.resource.iter().enumerate();
    let each = |(i, r): (usize, &'a pb::ServerCapacityResourceRequest)| {
        server_entry(i, r, &mut seen).map_err(of_entry(&r.resource_id))
    };
    collect(who, entries.map(each))
}

/// Validates a ReleaseCapacity request: the ids to release, each once.
/// Empty and over-long ids name no resource and are ignored.
pub fn release_capacity(req: &pb::ReleaseCapacityRequest) -> Result<(Who, Vec<String>), Status> {
    // The original Go client sends one empty id per resource before the
    // real ones: only the others count toward the limit.
    let named = req.resource_id.iter().filter(|id| !id.is_empty()).count();
    check_request("client_id", &req.client_id, named)?;
    let mut seen = HashSet::with_capacity(req.resource_id.len());
    let ids = req
        .resource_id
        .iter()
        .filter(|id| id_length_problem(id.len(), MAX_RESOURCE_ID_BYTES).is_none())
        .filter(|id| seen.insert(id.as_str()))
        .cloned()
        .collect();
    Ok((Who::Client(Arc::from(req.client_id.as_str())), ids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use doorman_lease::Span;
    use doorman_lease::Time;

    fn req(client: &str, resources: Vec<pb::ResourceRequest>) -> pb::GetCapacityRequest {
        pb::GetCapacityRequest {
            client_id: client.into(),
            resource: resources,
        }
    }

    fn rr(id: &str, wants: f64) -> pb::ResourceRequest {
        pb::ResourceRequest {
            resource_id: id.into(),
            priority: 0,
            has: None,
            wants,
            has_remaining_ms: None,
        }
    }

    fn msg(r: Result<Checked, Status>) -> String {
        let s = r.unwrap_err();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        s.message().to_string()
    }

    #[test]
    fn accepts_a_good_request() {
        let r = get_capacity(&req("c", vec![rr("a", 1.0), rr("b", 0.0)])).unwrap();
        assert_eq!(r.request.resources.len(), 2);
        assert_eq!(r.request.who, Who::Client(Arc::from("c")));
        assert!(r.rejected.is_empty());
        // A claimed lease: its amount, refresh interval and end (whole
        // seconds on the wire; any end saturates).
        let mut claim = rr("a", 1.0);
        for (secs, end) in [
            (1_700_000_090, Time::from_secs(1_700_000_090)),
            (i64::MAX, Time::from_millis(i64::MAX)),
        ] {
            claim.has = Some(pb::Lease {
                expiry_time: secs,
                refresh_interval: 4,
                capacity: 3.0,
                remaining_ms: None,
            });
            let r = get_capacity(&req("c", vec![claim.clone()])).unwrap();
            let ask = &r.request.resources[0];
            let c = ask.claim.unwrap();
            assert_eq!((c.has.get(), c.refresh, c.expiry), (3.0, 4, end));
        }
        // What the claim has left comes from the entry, never from the
        // lease: the original client sends the lease back as it got it,
        // with a stale copy of the server's `remaining_ms` in it.
        let mut stale = rr("a", 1.0);
        stale.has = Some(pb::Lease {
            expiry_time: 1_700_000_090,
            refresh_interval: 4,
            capacity: 3.0,
            remaining_ms: Some(9_000),
        });
        let r = get_capacity(&req("c", vec![stale.clone()])).unwrap();
        assert_eq!(r.request.resources[0].claim.unwrap().remaining, None);
        stale.has_remaining_ms = Some(2_500);
        let r = get_capacity(&req("c", vec![stale])).unwrap();
        let c = r.request.resources[0].claim.unwrap();
        assert_eq!(c.remaining, Some(Span::from_millis(2_500)));
    }

    #[test]
    fn names_field_and_reason() {
        assert_eq!(
            msg(get_capacity(&req("", vec![]))),
            "client_id: must not be empty"
        );
        assert!(msg(get_capacity(&req(&"x".repeat(257), vec![])))
            .starts_with("client_id: must be at most 256 bytes"));
        assert_eq!(
            msg(get_capacity(&req("c", vec![rr("", 1.0)]))),
            "resource[0].resource_id: must not be empty"
        );
        assert!(
            msg(get_capacity(&req("c", vec![rr(&"r".repeat(1025), 1.0)])))
                .starts_with("resource[0].resource_id: must be at most 1024 bytes")
        );
        assert_eq!(
            msg(get_capacity(&req("c", vec![rr("a", f64::NAN)]))),
            "resource[0].wants: must be a finite number from 0 to 1e15, got NaN"
        );
        assert_eq!(
            msg(get_capacity(&req("c", vec![rr("a", -1.0)]))),
            "resource[0].wants: must be a finite number from 0 to 1e15, got -1"
        );
        assert!(msg(get_capacity(&req("c", vec![rr("a", f64::INFINITY)]))).contains("got inf"));
        assert!(msg(get_capacity(&req("c", vec![rr("a", 1.7e308)]))).contains("from 0 to 1e15"));
        assert!(get_capacity(&req("c", vec![rr("a", 1e15)])).is_ok());
        let mut with_has = rr("a", 1.0);
        with_has.has = Some(pb::Lease {
            expiry_time: 0,
            refresh_interval: 0,
            capacity: -5.0,
            remaining_ms: None,
        });
        assert_eq!(
            msg(get_capacity(&req("c", vec![with_has]))),
            "resource[0].has.capacity: must be a finite number from 0 to 1e15, got -5"
        );

        let many: Vec<_> = (0..10_001).map(|i| rr(&i.to_string(), 1.0)).collect();
        assert_eq!(
            msg(get_capacity(&req("c", many))),
            "resource: must be at most 10000 resources per request, got 10001"
        );
    }

    #[test]
    fn server_bands_are_checked() {
        let band = |n, w| pb::PriorityBandAggregate {
            priority: 1,
            num_clients: n,
            wants: w,
        };
        let sreq = |bands| pb::GetServerCapacityRequest {
            report: None,
            server_id: "s".into(),
            resource: vec![pb::ServerCapacityResourceRequest {
                resource_id: "r".into(),
                has: None,
                wants: bands,
                outstanding: None,
                has_remaining_ms: None,
            }],
        };
        let ok = get_server_capacity(&sreq(vec![band(3, 4.0)])).unwrap();
        assert_eq!(ok.request.resources[0].demands[0].subclients(), 3);
        let e = get_server_capacity(&sreq(vec![band(2, 1.0), band(0, 4.0)])).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "resource[0].wants[1].num_clients: must be >= 1, got 0"
        );
        let back = doorman_net::refusal::from_status(&e, &["r".to_string()]).unwrap();
        assert_eq!(
            back.refusal.resources[0].reason.field(),
            Some("wants[1].num_clients")
        );
        let e = get_server_capacity(&sreq(vec![band(1, f64::NAN)])).unwrap_err();
        assert_eq!(
            e.message(),
            "resource[0].wants[0].wants: must be a finite number from 0 to 1e15, got NaN"
        );
        let e = get_server_capacity(&pb::GetServerCapacityRequest {
            report: None,
            server_id: String::new(),
            resource: vec![],
        })
        .unwrap_err();
        assert_eq!(e.message(), "server_id: must not be empty");
    }

    proptest::proptest! {
        /// Any request either validates or is INVALID_ARGUMENT; never a panic.
        #[test]
        fn arbitrary_requests_never_panic(
            client in "\\PC{0,300}",
            ids in proptest::collection::vec("\\PC{0,20}", 0..20),
            wants in proptest::collection::vec(proptest::num::f64::ANY, 0..20),
            bands in proptest::collection::vec((proptest::num::i64::ANY, proptest::num::i64::ANY, proptest::num::f64::ANY), 0..5),
        ) {
            let resources: Vec<pb::ResourceRequest> = ids.iter().zip(wants.iter().cycle())
                .map(|(id, w)| pb::ResourceRequest { resource_id: id.clone(), priority: 0, has: Some(pb::Lease { expiry_time: -1, refresh_interval: -1, capacity: *w, remaining_ms: None }), wants: *w, has_remaining_ms: None })
                .collect();
            if let Err(e) = get_capacity(&req(&client, resources)) {
                proptest::prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
            }
            let sreq = pb::GetServerCapacityRequest {
                report: None,
                server_id: client.clone(),
                resource: ids.iter().map(|id| pb::ServerCapacityResourceRequest {
                    resource_id: id.clone(),
                    has: None,
                    wants: bands.iter().map(|b| pb::PriorityBandAggregate { priority: b.0, num_clients: b.1, wants: b.2 }).collect(),
                    outstanding: wants.first().copied(),
                    has_remaining_ms: None,
                }).collect(),
            };
            if let Err(e) = get_server_capacity(&sreq) {
                proptest::prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
            }
        }
    }

    #[test]
    fn bad_entries_are_left_out_when_others_are_valid() {
        let mut bad_has = rr("c", 1.0);
        bad_has.has = Some(pb::Lease {
            expiry_time: 0,
            refresh_interval: 0,
            capacity: f64::NAN,
            remaining_ms: None,
        });
        let entries = vec![
            rr("a", 1.0),
            rr("", 1.0),
            rr("a", 2.0),
            bad_has,
            rr("b", -1.0),
            rr("d", 3.0),
        ];
        let r = get_capacity(&req("c", entries)).unwrap();
        let ids: Vec<&str> = r
            .request
            .resources
            .iter()
            .map(|a| a.resource_id.as_str())
            .collect();
        assert_eq!(ids, ["a", "d"]);
        assert_eq!(
            r.request.resources[0].demands[0].wants(),
            1.0,
            "the first of a repeated id"
        );
        let reasons: Vec<&str> = r.rejected.iter().map(|x| x.reason).collect();
        assert_eq!(reasons, ["resource_id", "duplicate", "has", "wants"]);
        assert_eq!(
            r.rejected[1].refusal.to_string(),
            "resource[2].resource_id: resource \"a\" appears more than once in the request"
        );
        let ids: Vec<&str> = r
            .rejected
            .iter()
            .map(|x| x.refusal.resource_id.as_str())
            .collect();
        assert_eq!(ids, ["", "a", "c", "b"]);
        let at: Vec<usize> = (0..2).map(|i| r.position(i)).collect();
        assert_eq!(at, [0, 5]);
    }

    #[test]
    fn no_valid_entry_names_every_bad_one() {
        assert_eq!(
            msg(get_capacity(&req(
                "c",
                vec![rr("", 1.0), rr("x", f64::NAN)]
            ))),
            "resource[0].resource_id: must not be empty; \
             resource[1].wants: must be a finite number from 0 to 1e15, got NaN"
        );
        let none = get_capacity(&req("c", vec![])).unwrap();
        assert!(none.request.resources.is_empty() && none.rejected.is_empty());
        // Thirty bad entries: each is named in the details, with its field.
        let bad: Vec<_> = (0..30).map(|i| rr(&format!("r{i}"), -1.0)).collect();
        let ids: Vec<String> = bad.iter().map(|r| r.resource_id.clone()).collect();
        let s = get_capacity(&req("c", bad)).unwrap_err();
        let back = doorman_net::refusal::from_status(&s, &ids).unwrap();
        assert_eq!(back.unnamed, 0);
        for (i, r) in back.refusal.resources.iter().enumerate() {
            assert_eq!((r.index, r.resource_id.as_str()), (i, ids[i].as_str()));
            assert_eq!(r.reason.field(), Some("wants"));
        }
        assert_eq!(back.refusal.resources.len(), 30);
        // Ten thousand: the message stays within its budget and says how
        // many it left out.
        let bad: Vec<_> = (0..10_000).map(|i| rr(&format!("r{i}"), -1.0)).collect();
        let m = msg(get_capacity(&req("c", bad)));
        assert!(
            m.len() <= doorman_core::refusal::MESSAGE_BYTES,
            "{}",
            m.len()
        );
        assert!(m.ends_with(" more") && m.contains("; and "), "{m}");
    }

    #[test]
    fn release_ignores_empty_long_and_repeated_ids() {
        // The original Go client's Close(): one empty id per resource first.
        let (who, ids) = release_capacity(&pb::ReleaseCapacityRequest {
            client_id: "go".into(),
            resource_id: vec![
                String::new(),
                String::new(),
                "a".into(),
                "b".into(),
                "a".into(),
                "r".repeat(1025),
            ],
        })
        .unwrap();
        assert_eq!(who, Who::Client(Arc::from("go")));
        assert_eq!(ids, ["a", "b"]);
        let e = release_capacity(&pb::ReleaseCapacityRequest {
            client_id: String::new(),
            resource_id: vec!["a".into()],
        })
        .unwrap_err();
        assert_eq!(e.message(), "client_id: must not be empty");
    }
}
