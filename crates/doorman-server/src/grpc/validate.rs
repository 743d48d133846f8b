//! Turns protobuf requests into validated core requests. Every refusal is a
//! gRPC `INVALID_ARGUMENT` whose message names the field and the reason,
//! e.g. `resource[2].wants: must be a finite number from 0 to 1e15, got NaN`.
//!
//! Must not: touch server state. Nothing here can panic on any input.

use std::collections::HashSet;
use std::sync::Arc;

use doorman_algorithms::{Amount, Demand};
use doorman_proto::doorman as pb;
use tonic::Status;

use doorman_core::limits::{
    id_length_problem, MAX_AMOUNT, MAX_BANDS, MAX_ID_BYTES, MAX_RESOURCES_PER_REQUEST,
    MAX_RESOURCE_ID_BYTES,
};
use doorman_core::server::{CapacityRequest, ResourceAsk, Who};

fn invalid(field: impl std::fmt::Display, reason: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {reason}"))
}

fn check_id(field: &str, id: &str) -> Result<(), Status> {
    match id_length_problem(id.len(), MAX_ID_BYTES) {
        Some(reason) => Err(invalid(field, reason)),
        None => Ok(()),
    }
}

fn check_resource_id(field: &str, id: &str, seen: &mut HashSet<String>) -> Result<(), Status> {
    if let Some(reason) = id_length_problem(id.len(), MAX_RESOURCE_ID_BYTES) {
        return Err(invalid(field, reason));
    }
    if !seen.insert(id.to_string()) {
        return Err(invalid(
            field,
            format!("resource {id:?} appears more than once in the request"),
        ));
    }
    Ok(())
}

fn check_count(n: usize) -> Result<(), Status> {
    if n > MAX_RESOURCES_PER_REQUEST {
        return Err(invalid(
            "resource",
            format!("at most {MAX_RESOURCES_PER_REQUEST} resources per request, got {n}"),
        ));
    }
    Ok(())
}

fn amount(field: &str, value: f64) -> Result<Amount, Status> {
    match Amount::new("value", value) {
        Ok(a) if a.get() <= MAX_AMOUNT => Ok(a),
        _ => Err(invalid(
            field,
            format!("must be a finite number from 0 to {MAX_AMOUNT:e}, got {value}"),
        )),
    }
}

fn has(field: &str, lease: Option<&pb::Lease>) -> Result<Option<Amount>, Status> {
    lease
        .map(|l| amount(&format!("{field}.has.capacity"), l.capacity))
        .transpose()
}

/// Checks the requester's id and the number of resources; returns the set
/// that catches a resource named twice.
fn check_request(id_field: &str, id: &str, resources: usize) -> Result<HashSet<String>, Status> {
    check_id(id_field, id)?;
    check_count(resources)?;
    Ok(HashSet::with_capacity(resources))
}

/// Validates a GetCapacity request.
pub fn get_capacity(req: &pb::GetCapacityRequest) -> Result<CapacityRequest, Status> {
    let mut seen = check_request("client_id", &req.client_id, req.resource.len())?;
    let mut resources = Vec::with_capacity(req.resource.len());
    for (i, r) in req.resource.iter().enumerate() {
        let f = format!("resource[{i}]");
        check_resource_id(&format!("{f}.resource_id"), &r.resource_id, &mut seen)?;
        let wants = amount(&format!("{f}.wants"), r.wants)?;
        resources.push(ResourceAsk {
            resource_id: r.resource_id.clone(),
            demands: vec![Demand::client(r.priority, wants)],
            claimed_has: has(&f, r.has.as_ref())?,
            claimed_refresh: r.has.as_ref().map(|l| l.refresh_interval),
            outstanding: None,
        });
    }
    Ok(CapacityRequest {
        who: Who::Client(Arc::from(req.client_id.as_str())),
        resources,
    })
}

/// Validates a GetServerCapacity request.
pub fn get_server_capacity(req: &pb::GetServerCapacityRequest) -> Result<CapacityRequest, Status> {
    let mut seen = check_request("server_id", &req.server_id, req.resource.len())?;
    let mut resources = Vec::with_capacity(req.resource.len());
    for (i, r) in req.resource.iter().enumerate() {
        let f = format!("resource[{i}]");
        check_resource_id(&format!("{f}.resource_id"), &r.resource_id, &mut seen)?;
        if r.wants.len() > MAX_BANDS {
            return Err(invalid(
                format!("{f}.wants"),
                format!("at most {MAX_BANDS} priority bands, got {}", r.wants.len()),
            ));
        }
        let mut demands = Vec::with_capacity(r.wants.len());
        for (j, band) in r.wants.iter().enumerate() {
            let bf = format!("{f}.wants[{j}]");
            if band.num_clients < 1 {
                return Err(invalid(
                    format!("{bf}.num_clients"),
                    format!("must be >= 1, got {}", band.num_clients),
                ));
            }
            let wants = amount(&format!("{bf}.wants"), band.wants)?;
            let d = Demand::new(band.priority, band.num_clients, wants.get())
                .map_err(|e| invalid(&bf, e))?;
            demands.push(d);
        }
        let outstanding = r
            .outstanding
            .map(|o| amount(&format!("{f}.outstanding"), o))
            .transpose()?;
        resources.push(ResourceAsk {
            resource_id: r.resource_id.clone(),
            demands,
            claimed_has: has(&f, r.has.as_ref())?,
            claimed_refresh: r.has.as_ref().map(|l| l.refresh_interval),
            outstanding,
        });
    }
    Ok(CapacityRequest {
        who: Who::Server(Arc::from(req.server_id.as_str())),
        resources,
    })
}

/// Validates a ReleaseCapacity request.
pub fn release_capacity(req: &pb::ReleaseCapacityRequest) -> Result<(Who, Vec<String>), Status> {
    let mut seen = check_request("client_id", &req.client_id, req.resource_id.len())?;
    for (i, r) in req.resource_id.iter().enumerate() {
        check_resource_id(&format!("resource_id[{i}]"), r, &mut seen)?;
    }
    Ok((
        Who::Client(Arc::from(req.client_id.as_str())),
        req.resource_id.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    fn msg(r: Result<CapacityRequest, Status>) -> String {
        let s = r.unwrap_err();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        s.message().to_string()
    }

    #[test]
    fn accepts_a_good_request() {
        let r = get_capacity(&req("c", vec![rr("a", 1.0), rr("b", 0.0)])).unwrap();
        assert_eq!(r.resources.len(), 2);
        assert_eq!(r.who, Who::Client(Arc::from("c")));
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
            msg(get_capacity(&req("c", vec![rr("a", 1.0), rr("", 1.0)]))),
            "resource[1].resource_id: must not be empty"
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
        });
        assert_eq!(
            msg(get_capacity(&req("c", vec![with_has]))),
            "resource[0].has.capacity: must be a finite number from 0 to 1e15, got -5"
        );
        assert_eq!(
            msg(get_capacity(&req("c", vec![rr("a", 1.0), rr("a", 2.0)]))),
            "resource[1].resource_id: resource \"a\" appears more than once in the request"
        );
        let many: Vec<_> = (0..10_001).map(|i| rr(&i.to_string(), 1.0)).collect();
        assert_eq!(
            msg(get_capacity(&req("c", many))),
            "resource: at most 10000 resources per request, got 10001"
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
            server_id: "s".into(),
            resource: vec![pb::ServerCapacityResourceRequest {
                resource_id: "r".into(),
                has: None,
                wants: bands,
                outstanding: None,
            }],
        };
        let ok = get_server_capacity(&sreq(vec![band(3, 4.0)])).unwrap();
        assert_eq!(ok.resources[0].demands[0].subclients(), 3);
        let e = get_server_capacity(&sreq(vec![band(2, 1.0), band(0, 4.0)])).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "resource[0].wants[1].num_clients: must be >= 1, got 0"
        );
        let e = get_server_capacity(&sreq(vec![band(1, f64::NAN)])).unwrap_err();
        assert_eq!(
            e.message(),
            "resource[0].wants[0].wants: must be a finite number from 0 to 1e15, got NaN"
        );
        let e = get_server_capacity(&pb::GetServerCapacityRequest {
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
                .map(|(id, w)| pb::ResourceRequest { resource_id: id.clone(), priority: 0, has: Some(pb::Lease { expiry_time: -1, refresh_interval: -1, capacity: *w }), wants: *w })
                .collect();
            if let Err(e) = get_capacity(&req(&client, resources)) {
                proptest::prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
            }
            let sreq = pb::GetServerCapacityRequest {
                server_id: client.clone(),
                resource: ids.iter().map(|id| pb::ServerCapacityResourceRequest {
                    resource_id: id.clone(),
                    has: None,
                    wants: bands.iter().map(|b| pb::PriorityBandAggregate { priority: b.0, num_clients: b.1, wants: b.2 }).collect(),
                    outstanding: wants.first().copied(),
                }).collect(),
            };
            if let Err(e) = get_server_capacity(&sreq) {
                proptest::prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
            }
        }
    }

    #[test]
    fn release_is_checked() {
        let e = release_capacity(&pb::ReleaseCapacityRequest {
            client_id: "c".into(),
            resource_id: vec!["a".into(), "a".into()],
        })
        .unwrap_err();
        assert!(e
            .message()
            .starts_with("resource_id[1]: resource \"a\" appears more than once"));
    }
}
