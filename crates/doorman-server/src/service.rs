//! The tonic `doorman.Capacity` service: a thin adapter that validates the
//! protobuf, reads the clock once, calls the core under its lock and turns
//! the result back into protobuf. Metrics are recorded here.
//!
//! Must not: contain decisions (they belong to the core).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use doorman_algorithms::Time;
use doorman_proto::doorman as pb;
use tonic::{Request, Response, Status};

use crate::core::{Grant, NotMaster, ServerCore};
use crate::metrics::Metrics;
use crate::validate;

/// Where the service gets the time from (the wall clock in production).
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// State shared by the gRPC service, the HTTP endpoints and background tasks.
pub struct ServerState {
    core: Mutex<ServerCore>,
    /// Wakes the upstream task (a new resource must be asked for at once).
    pub upstream_wake: tokio::sync::Notify,
    /// The server's metrics.
    pub metrics: Metrics,
    /// The clock.
    pub clock: Clock,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState").finish_non_exhaustive()
    }
}

impl ServerState {
    /// Wraps a core.
    pub fn new(core: ServerCore, metrics: Metrics, clock: Clock) -> Self {
        ServerState {
            core: Mutex::new(core),
            upstream_wake: tokio::sync::Notify::new(),
            metrics,
            clock,
        }
    }

    /// Locks the core. A panic while holding the lock is a bug; the state is
    /// still served rather than failing every later request.
    pub fn core(&self) -> MutexGuard<'_, ServerCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current time.
    pub fn now(&self) -> Time {
        (self.clock)()
    }

    /// Runs a capacity request through the core and wakes the upstream task
    /// if it created a resource the parent must be asked about.
    fn decide(&self, req: &crate::core::CapacityRequest) -> Result<Vec<Grant>, NotMaster> {
        let now = self.now();
        let mut core = self.core();
        let out = core.get_capacity(now, req);
        if core.take_upstream_wake() {
            self.upstream_wake.notify_one();
        }
        out
    }
}

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct CapacityService {
    state: Arc<ServerState>,
}

impl CapacityService {
    /// A service over shared state.
    pub fn new(state: Arc<ServerState>) -> Self {
        CapacityService { state }
    }

    fn finish<T>(
        &self,
        method: &str,
        start: Instant,
        r: Result<T, Status>,
    ) -> Result<Response<T>, Status> {
        let code = r.as_ref().err().map(|s| s.code());
        self.state
            .metrics
            .observe(method, start.elapsed().as_secs_f64(), code);
        r.map(Response::new)
    }
}

fn redirect(n: NotMaster) -> Option<pb::Mastership> {
    Some(pb::Mastership {
        master_address: n.master_address,
    })
}

fn client_response(r: Result<Vec<Grant>, NotMaster>) -> pb::GetCapacityResponse {
    match r {
        Ok(grants) => pb::GetCapacityResponse {
            response: grants
                .iter()
                .map(|g| pb::ResourceResponse {
                    resource_id: g.resource_id.clone(),
                    gets: doorman_proto::lease_to_wire(&g.lease),
                    safe_capacity: Some(g.safe_capacity),
                })
                .collect(),
            mastership: None,
        },
        Err(n) => pb::GetCapacityResponse {
            response: vec![],
            mastership: redirect(n),
        },
    }
}

fn server_response(r: Result<Vec<Grant>, NotMaster>) -> pb::GetServerCapacityResponse {
    match r {
        Ok(grants) => pb::GetServerCapacityResponse {
            response: grants
                .iter()
                .map(|g| pb::ServerCapacityResourceResponse {
                    resource_id: g.resource_id.clone(),
                    gets: doorman_proto::lease_to_wire(&g.lease),
                    algorithm: g.algorithm_known.then(|| g.algorithm.to_proto()),
                    safe_capacity: Some(g.safe_capacity),
                })
                .collect(),
            mastership: None,
        },
        Err(n) => pb::GetServerCapacityResponse {
            response: vec![],
            mastership: redirect(n),
        },
    }
}

#[tonic::async_trait]
impl doorman_proto::Capacity for CapacityService {
    async fn discovery(
        &self,
        _request: Request<pb::DiscoveryRequest>,
    ) -> Result<Response<pb::DiscoveryResponse>, Status> {
        let start = Instant::now();
        let core = self.state.core();
        let r = pb::DiscoveryResponse {
            mastership: pb::Mastership {
                master_address: core.master_address().map(str::to_string),
            },
            is_master: core.is_master(),
        };
        drop(core);
        self.finish("Discovery", start, Ok(r))
    }

    async fn get_capacity(
        &self,
        request: Request<pb::GetCapacityRequest>,
    ) -> Result<Response<pb::GetCapacityResponse>, Status> {
        let start = Instant::now();
        let r = validate::get_capacity(request.get_ref())
            .map(|req| client_response(self.state.decide(&req)));
        self.finish("GetCapacity", start, r)
    }

    async fn get_server_capacity(
        &self,
        request: Request<pb::GetServerCapacityRequest>,
    ) -> Result<Response<pb::GetServerCapacityResponse>, Status> {
        let start = Instant::now();
        let r = validate::get_server_capacity(request.get_ref())
            .map(|req| server_response(self.state.decide(&req)));
        self.finish("GetServerCapacity", start, r)
    }

    async fn release_capacity(
        &self,
        request: Request<pb::ReleaseCapacityRequest>,
    ) -> Result<Response<pb::ReleaseCapacityResponse>, Status> {
        let start = Instant::now();
        let r = validate::release_capacity(request.get_ref()).map(|(who, ids)| {
            match self.state.core().release(&who, &ids) {
                Ok(_) => pb::ReleaseCapacityResponse { mastership: None },
                Err(n) => pb::ReleaseCapacityResponse {
                    mastership: redirect(n),
                },
            }
        });
        self.finish("ReleaseCapacity", start, r)
    }
}

/// Exposed for the status page and tests: the lock-free bits of a core.
pub fn core_of(state: &ServerState) -> MutexGuard<'_, ServerCore> {
    state.core()
}
