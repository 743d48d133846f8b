//! Allocations per GetCapacity in our part of the request path (the
//! handler: identity, validation, access check, the core's decision,
//! metrics, the protobuf answer), counted with dhat's global allocator
//! around direct calls of the tonic service (no network, so HTTP/2 and
//! protobuf framing are not counted). A regression here is a new
//! allocation on every request; BENCHMARKS.md has the figures.

use std::sync::Arc;

use doorman_core::server::{CoreOptions, Sharded};
use doorman_grpc::layers::Caller;
use doorman_grpc::CapacityService;
use doorman_proto::doorman as pb;
use doorman_proto::Capacity;
use doorman_server::Span;
use doorman_state::core_locks::LockedCore;
use doorman_state::metrics::Metrics;
use doorman_state::ServerState;
use doorman_testkit::config::{Resource, TestConfig};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn allocations() -> u64 {
    dhat::HeapStats::get().total_blocks
}

fn config() -> TestConfig {
    TestConfig::new().resource(Resource::fair("*", 1000.0).lease(60).refresh(5))
}

fn service() -> CapacityService {
    let config = config().parse();
    let opts = CoreOptions {
        min_request_interval: Span::ZERO,
        ..CoreOptions::default()
    };
    let core = LockedCore::new(opts, config, 8);
    (&core).become_master(doorman_server::lease_clock());
    let clock = Arc::new(doorman_server::lease_clock);
    CapacityService::new(Arc::new(ServerState::new(core, Metrics::new(), clock)))
}

/// A request as the caller layer hands it to the handler (an anonymous
/// caller: this server does not authenticate), built before counting.
fn identified(r: &pb::GetCapacityRequest) -> tonic::Request<pb::GetCapacityRequest> {
    let mut req = tonic::Request::new(r.clone());
    req.extensions_mut().insert(Caller(None));
    req
}

fn request(client: usize) -> pb::GetCapacityRequest {
    pb::GetCapacityRequest {
        client_id: format!("client-{client}"),
        resource: vec![pb::ResourceRequest {
            resource_id: "db".into(),
            priority: 0,
            has: None,
            wants: 10.0,
            has_remaining_ms: None,
        }],
    }
}

/// Mean allocations of one GetCapacity from `clients` clients in turn
/// (each already holding a lease, as in steady state), the request's own
/// protobuf built beforehand.
fn allocations_per_request(clients: usize) -> f64 {
    let svc = service();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let reqs: Vec<_> = (0..clients).map(request).collect();
    let call = |r: &pb::GetCapacityRequest| {
        let answer = rt.block_on(svc.get_capacity(identified(r)));
        assert_eq!(answer.unwrap().get_ref().response.len(), 1);
    };
    reqs.iter().for_each(call);
    let rounds = 20;
    let mut counted = 0;
    for _ in 0..rounds {
        for r in &reqs {
            let clone = identified(r);
            let before = allocations();
            let answer = rt.block_on(svc.get_capacity(clone));
            counted += allocations() - before;
            assert_eq!(answer.unwrap().get_ref().response.len(), 1);
        }
    }
    counted as f64 / (rounds * clients) as f64
}

#[test]
fn a_get_capacity_allocates_a_bounded_handful() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let per_request = allocations_per_request(100);
    println!("allocations per GetCapacity (handler only): {per_request:.1}");
    // 8 that stay: tonic's boxed handler future, the requester's id
    // (`Arc<str>`), the resource id and the demand list of the core's
    // request, the core's grant list and the grant's resource id, and the
    // protobuf answer's list (its resource id is moved, not copied). It
    // was 16 before the field names of a valid entry stopped being
    // formatted and a one-entry request stopped keeping a set of ids.
    assert!(
        per_request <= 9.0,
        "{per_request} allocations per GetCapacity"
    );
}
