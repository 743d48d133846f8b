//! The gRPC boundary: the tonic `doorman.Capacity` service, a thin adapter
//! that validates the protobuf ([`validate`]), reads the clock once, calls
//! the core under its lock and turns the result back into protobuf
//! ([`convert`]). Request metrics are recorded here. A new front-end (such
//! as Envoy's rate limit services) is another service in this folder over
//! the same [`ServerState`].
//!
//! Must not: contain decisions (they belong to the core).

pub mod convert;
pub mod layers;
pub mod legacy;
pub mod transport;
pub mod validate;

use doorman_core::server::Sharded;
use std::sync::Arc;

use doorman_proto::doorman as pb;
use tonic::{Request, Response, Status};

use crate::state::ServerState;
use convert::{client_response, redirect, served, server_response};
use doorman_core::config::Action;
use doorman_core::server::{CapacityRequest, Grant, NotMaster};

use crate::tls::PeerInfo;

/// The identity of a caller of a capacity RPC (Doorman's or Envoy's):
/// its token's, else its client certificate's; a bad token, or none where
/// one is required, is UNAUTHENTICATED (`ServerState::identify_rpc`).
pub fn caller<T>(state: &ServerState, req: &Request<T>) -> Result<Option<Arc<str>>, Status> {
    let peer = req.extensions().get::<PeerInfo>();
    let peer = peer.and_then(|p| p.identity.as_ref());
    let header = req.metadata().get("authorization").map(|v| v.as_bytes());
    state
        .identify_rpc(peer, header)
        .map_err(|e| Status::unauthenticated(e.to_string()))
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

    /// The core's part of a validated request; each entry left out is
    /// logged and counted by reason.
    fn checked(
        &self,
        method: &str,
        r: Result<validate::Checked, Status>,
    ) -> Result<CapacityRequest, Status> {
        let checked = r?;
        for x in &checked.rejected {
            self.state.metrics.rejected(method, x.reason);
        }
        if !checked.rejected.is_empty() {
            let who = &checked.request.who;
            let n = checked.rejected.len();
            let what = validate::summary(&checked.rejected);
            tracing::warn!(%who, left_out = n, "resource entries left out of the request: {what}");
        }
        Ok(checked.request)
    }

    fn caller<T>(&self, req: &Request<T>) -> Result<Option<Arc<str>>, Status> {
        caller(&self.state, req)
    }

    /// A validated request, owned by its caller, decided if the access
    /// rules allow `action` (else PERMISSION_DENIED, counted).
    fn decide(
        &self,
        method: &str,
        caller: Option<&str>,
        action: Action,
        checked: Result<validate::Checked, Status>,
    ) -> Result<Result<Vec<Grant>, NotMaster>, Status> {
        let mut req = self.checked(method, checked)?;
        req.who = req.who.owned_by(caller);
        match self.state.decide(caller, action, &req) {
            Ok(out) => served(out),
            Err(why) => {
                self.state.metrics.denied(action.name());
                Err(Status::permission_denied(why))
            }
        }
    }

    /// Runs a handler, timing it and counting its outcome.
    fn timed<T>(
        &self,
        method: &str,
        handler: impl FnOnce() -> Result<T, Status>,
    ) -> Result<Response<T>, Status> {
        let start = crate::clock::instant();
        let r = handler();
        let code = r.as_ref().err().map(|s| s.code());
        self.state
            .metrics
            .observe(method, crate::clock::since(start).as_secs_f64(), code);
        r.map(Response::new)
    }

    /// Says this server's level in the tree (`doorman-level`), so the
    /// servers below know theirs.
    fn with_level<T>(&self, r: Result<Response<T>, Status>) -> Result<Response<T>, Status> {
        r.map(|mut resp| {
            if let Some(level) = self.state.level() {
                resp.metadata_mut()
                    .insert(doorman_proto::LEVEL_HEADER, level.into());
            }
            resp
        })
    }
}

#[tonic::async_trait]
impl doorman_proto::Capacity for CapacityService {
    async fn discovery(
        &self,
        _request: Request<pb::DiscoveryRequest>,
    ) -> Result<Response<pb::DiscoveryResponse>, Status> {
        self.with_level(self.timed("Discovery", || {
            let (is_master, master_address) = self.state.core().mastership_at(self.state.now());
            Ok(pb::DiscoveryResponse {
                mastership: pb::Mastership { master_address },
                is_master,
            })
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<pb::GetCapacityRequest>,
    ) -> Result<Response<pb::GetCapacityResponse>, Status> {
        let req = request.get_ref();
        let mut note = None;
        let answer = self.timed("GetCapacity", || {
            let caller = self.caller(&request)?;
            let checked = validate::get_capacity(req);
            let grants = self.decide("GetCapacity", caller.as_deref(), Action::Acquire, checked)?;
            note = convert::note_header(&grants);
            Ok(client_response(grants))
        });
        answer.map(|mut r| {
            if let Some(n) = note {
                r.metadata_mut().insert(convert::NOTE_HEADER, n);
            }
            r
        })
    }

    async fn get_server_capacity(
        &self,
        request: Request<pb::GetServerCapacityRequest>,
    ) -> Result<Response<pb::GetServerCapacityResponse>, Status> {
        let req = request.get_ref();
        let answer = self.timed("GetServerCapacity", || {
            let caller = self.caller(&request)?;
            let checked = validate::get_server_capacity(req);
            let method = "GetServerCapacity";
            let grants = self.decide(method, caller.as_deref(), Action::Serve, checked)?;
            Ok(server_response(grants))
        });
        self.with_level(answer)
    }

    async fn release_capacity(
        &self,
        request: Request<pb::ReleaseCapacityRequest>,
    ) -> Result<Response<pb::ReleaseCapacityResponse>, Status> {
        let req = request.get_ref();
        self.timed("ReleaseCapacity", || {
            let caller = self.caller(&request)?;
            let (who, ids) = validate::release_capacity(req)?;
            // Only the caller's own leases: owned ids never name another's.
            let who = who.owned_by(caller.as_deref());
            let released = self.state.core().release(&who, &ids).map(|_| Vec::new());
            let mastership = served(released)?.err().and_then(redirect);
            Ok(pb::ReleaseCapacityResponse { mastership })
        })
    }
}
