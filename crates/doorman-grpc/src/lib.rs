//! The gRPC boundary: the tonic `doorman.Capacity` service, a thin adapter
//! that validates the protobuf (`doorman_wire::validate`), reads the clock
//! once, calls the core under its lock and turns the result back into
//! protobuf (`doorman_wire::convert`). Who the caller is, request metrics and the level header
//! are [`layers`] around it (and around Envoy's services), applied where
//! the server is built. A new front-end (such as Envoy's rate limit
//! services) is another service over the same [`ServerState`].
//!
//! Must not: contain decisions (they belong to the core).

pub mod health;
pub mod layers;
pub mod stream;
pub mod transport;

use doorman_core::server::Sharded;
use std::sync::Arc;

use doorman_proto::doorman as pb;
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use doorman_core::action::Action;
use doorman_core::server::{Grant, NotMaster, Who};
use doorman_state::ServerState;
use doorman_wire::convert::{self, client_response, redirect, served, server_response};
use doorman_wire::tree::report_from_wire;
use doorman_wire::validate;
use layers::Caller;
use stream::hub::{Hub, Outbox};

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct CapacityService {
    state: Arc<ServerState>,
    hub: Arc<Hub>,
    /// Turns true when the server stops: its lease streams end then.
    stop: Option<watch::Receiver<bool>>,
}

impl CapacityService {
    /// A service over shared state; its lease streams' pusher is
    /// [`stream::push::run`] over [`CapacityService::hub`].
    pub fn new(state: Arc<ServerState>) -> Self {
        let hub = Arc::default();
        CapacityService {
            state,
            hub,
            stop: None,
        }
    }

    /// Ends its lease streams when `stop` turns true (a graceful shutdown
    /// waits for every open call, and a stream never ends by itself).
    pub fn stopping_with(mut self, stop: watch::Receiver<bool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The shared state.
    pub fn state(&self) -> &Arc<ServerState> {
        &self.state
    }

    /// The open lease streams.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// A GetCapacity request from `caller`, validated and decided: the
    /// requester (keyed by its owner) and its grants, or the redirect.
    fn get_capacity_grants(
        &self,
        caller: Option<&str>,
        req: &pb::GetCapacityRequest,
    ) -> Result<(Who, Result<Vec<Grant>, NotMaster>), Status> {
        let checked = validate::get_capacity(req);
        self.decide("GetCapacity", caller, Action::Acquire, checked)
    }

    /// A GetServerCapacity request from `caller`, validated and decided,
    /// as [`CapacityService::get_capacity_grants`]; the tree report it
    /// carries is kept once this master has answered (under the
    /// requester's owned id), or left out, logged and counted
    /// (`reason="report"`) when out of bounds: the request is answered
    /// all the same.
    fn get_server_capacity_grants(
        &self,
        caller: Option<&str>,
        req: &pb::GetServerCapacityRequest,
    ) -> Result<(Who, Result<Vec<Grant>, NotMaster>), Status> {
        let checked = validate::get_server_capacity(req);
        let out = self.decide("GetServerCapacity", caller, Action::Serve, checked)?;
        if let (Some(report), Ok(_)) = (&req.report, &out.1) {
            match report_from_wire(report) {
                Ok(r) => {
                    let now = self.state.now();
                    self.state.subtree.record(r, &out.0.display_id(), now);
                }
                Err(why) => {
                    self.state.metrics.rejected("GetServerCapacity", "report");
                    tracing::warn!(who = %out.0, "tree report left out: {why}");
                }
            }
        }
        Ok(out)
    }

    /// A validated request; each entry left out is logged and counted by
    /// reason.
    fn checked(
        &self,
        method: &str,
        r: Result<validate::Checked, Status>,
    ) -> Result<validate::Checked, Status> {
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
        Ok(checked)
    }

    /// A validated request, owned by its caller, decided if the access
    /// rules allow `action` (else PERMISSION_DENIED naming each resource
    /// refused, counted).
    fn decide(
        &self,
        method: &str,
        caller: Option<&str>,
        action: Action,
        checked: Result<validate::Checked, Status>,
    ) -> Result<(Who, Result<Vec<Grant>, NotMaster>), Status> {
        let mut checked = self.checked(method, checked)?;
        checked.request.who = checked.request.who.owned_by(caller);
        match self.state.decide(caller, action, &checked.request) {
            Ok(out) => Ok((checked.request.who, served(out)?)),
            Err(why) => {
                self.state.metrics.denied(action.name());
                let why = why.reindex(|i| checked.position(i));
                Err(doorman_net::refusal::to_status(&why, "resource"))
            }
        }
    }
}

#[tonic::async_trait]
impl doorman_proto::Capacity for CapacityService {
    async fn discovery(
        &self,
        _request: Request<pb::DiscoveryRequest>,
    ) -> Result<Response<pb::DiscoveryResponse>, Status> {
        let (is_master, master_address) = self.state.core().mastership_at(self.state.now());
        Ok(Response::new(pb::DiscoveryResponse {
            mastership: pb::Mastership { master_address },
            is_master,
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<pb::GetCapacityRequest>,
    ) -> Result<Response<pb::GetCapacityResponse>, Status> {
        let caller = Caller::of(&request)?;
        let (_, grants) = self.get_capacity_grants(caller.as_deref(), request.get_ref())?;
        let note = convert::note_header(&grants);
        let mut answer = Response::new(client_response(grants));
        if let Some(n) = note {
            answer.metadata_mut().insert(convert::NOTE_HEADER, n);
        }
        Ok(answer)
    }

    async fn get_server_capacity(
        &self,
        request: Request<pb::GetServerCapacityRequest>,
    ) -> Result<Response<pb::GetServerCapacityResponse>, Status> {
        let caller = Caller::of(&request)?;
        let (_, grants) = self.get_server_capacity_grants(caller.as_deref(), request.get_ref())?;
        Ok(Response::new(server_response(grants)))
    }

    async fn release_capacity(
        &self,
        request: Request<pb::ReleaseCapacityRequest>,
    ) -> Result<Response<pb::ReleaseCapacityResponse>, Status> {
        let caller = Caller::of(&request)?;
        let (who, ids) = validate::release_capacity(request.get_ref())?;
        // Only the caller's own leases: owned ids never name another's.
        let who = who.owned_by(caller.as_deref());
        let released = self.state.core().release(&who, &ids).map(|_| Vec::new());
        self.state.moved.note(ids.iter().map(String::as_str));
        let mastership = served(released)?.err().and_then(redirect);
        Ok(Response::new(pb::ReleaseCapacityResponse { mastership }))
    }

    type CapacityStreamStream = stream::Answers<pb::GetCapacityResponse>;

    async fn capacity_stream(
        &self,
        request: Request<Streaming<pb::GetCapacityRequest>>,
    ) -> Result<Response<Self::CapacityStreamStream>, Status> {
        stream::start(self, request, Self::get_capacity_grants, Outbox::Client)
    }

    type ServerCapacityStreamStream = stream::Answers<pb::GetServerCapacityResponse>;

    async fn server_capacity_stream(
        &self,
        request: Request<Streaming<pb::GetServerCapacityRequest>>,
    ) -> Result<Response<Self::ServerCapacityStreamStream>, Status> {
        stream::start(
            self,
            request,
            Self::get_server_capacity_grants,
            Outbox::Server,
        )
    }
}
