//! The gRPC boundary: the tonic `doorman.Capacity` service, a thin adapter
//! that validates the protobuf ([`validate`]), reads the clock once, calls
//! the core under its lock and turns the result back into protobuf
//! ([`convert`]). Request metrics are recorded here. A new front-end (such
//! as Envoy's rate limit services) is another service in this folder over
//! the same [`ServerState`].
//!
//! Must not: contain decisions (they belong to the core).

pub mod convert;
pub mod validate;

use std::sync::Arc;
use std::time::Instant;

use doorman_proto::doorman as pb;
use tonic::{Request, Response, Status};

use crate::state::ServerState;
use convert::{client_response, redirect, server_response};

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
