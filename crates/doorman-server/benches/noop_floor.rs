//! The floor for our stack: a `doorman.Capacity` service on plain tonic
//! that decides nothing. GetCapacity answers every resource asked for with
//! one fixed lease (the same shape and size as a real answer), so a load
//! test against it costs HTTP/2, protobuf and tonic, and nothing of ours.
//! `scripts/bench-compare.sh` runs it next to a real server and prints
//! the ratio of their CPU per request (BENCHMARKS.md).
//!
//! `noop_floor --listen 127.0.0.1:PORT [--nodelay]` serves until killed
//! (`--nodelay`: TCP_NODELAY on every connection, as our server sets it;
//! plain tonic leaves Nagle on). Run without `--listen` (as `cargo bench`
//! does) it says so and exits.
//!
//! Must not: bind anything but the address given.

use std::net::SocketAddr;

use doorman_proto::doorman as pb;
use doorman_proto::{Capacity, CapacityServer};
use tonic::{Request, Response, Status};

/// Answers without deciding.
struct Floor;

fn fixed_lease() -> pb::Lease {
    pb::Lease {
        expiry_time: 4_000_000_000,
        refresh_interval: 5,
        capacity: 1.0,
        remaining_ms: None,
    }
}

#[tonic::async_trait]
impl Capacity for Floor {
    async fn discovery(
        &self,
        _: Request<pb::DiscoveryRequest>,
    ) -> Result<Response<pb::DiscoveryResponse>, Status> {
        Ok(Response::new(pb::DiscoveryResponse {
            mastership: pb::Mastership {
                master_address: None,
            },
            is_master: true,
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<pb::GetCapacityRequest>,
    ) -> Result<Response<pb::GetCapacityResponse>, Status> {
        let response = request
            .into_inner()
            .resource
            .into_iter()
            .map(|r| pb::ResourceResponse {
                resource_id: r.resource_id,
                gets: fixed_lease(),
                safe_capacity: Some(1.0),
                shadow: None,
            })
            .collect();
        Ok(Response::new(pb::GetCapacityResponse {
            response,
            mastership: None,
            pushed: None,
            note: None,
        }))
    }

    async fn get_server_capacity(
        &self,
        _: Request<pb::GetServerCapacityRequest>,
    ) -> Result<Response<pb::GetServerCapacityResponse>, Status> {
        Ok(Response::new(pb::GetServerCapacityResponse::default()))
    }

    async fn release_capacity(
        &self,
        _: Request<pb::ReleaseCapacityRequest>,
    ) -> Result<Response<pb::ReleaseCapacityResponse>, Status> {
        Ok(Response::new(pb::ReleaseCapacityResponse::default()))
    }

    type CapacityStreamStream =
        tokio_stream::wrappers::ReceiverStream<Result<pb::GetCapacityResponse, Status>>;

    /// Each request on the stream answered as `get_capacity` answers it.
    async fn capacity_stream(
        &self,
        request: Request<tonic::Streaming<pb::GetCapacityRequest>>,
    ) -> Result<Response<Self::CapacityStreamStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            while let Ok(Some(req)) = inbound.message().await {
                let answer = Floor.get_capacity(Request::new(req)).await;
                if tx.send(answer.map(Response::into_inner)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }

    type ServerCapacityStreamStream =
        tokio_stream::wrappers::ReceiverStream<Result<pb::GetServerCapacityResponse, Status>>;

    async fn server_capacity_stream(
        &self,
        _: Request<tonic::Streaming<pb::GetServerCapacityRequest>>,
    ) -> Result<Response<Self::ServerCapacityStreamStream>, Status> {
        Err(Status::unimplemented("the floor serves end clients only"))
    }
}

fn listen_arg() -> Result<Option<SocketAddr>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(i) = args.iter().position(|a| a == "--listen") else {
        return Ok(None);
    };
    let addr = args.get(i + 1).ok_or("--listen needs ADDR")?;
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| format!("--listen {addr:?}: {e}"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("--listen {addr}: only a loopback address"));
    }
    Ok(Some(addr))
}

#[tokio::main]
async fn main() {
    let addr = match listen_arg() {
        Ok(Some(addr)) => addr,
        Ok(None) => {
            println!("noop_floor: a no-op server for scripts/bench-compare.sh (--listen ADDR)");
            return;
        }
        Err(e) => {
            eprintln!("noop_floor: {e}");
            std::process::exit(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("noop_floor: cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    let local = listener.local_addr().map_or(addr, |a| a);
    println!("noop_floor listening on {local}");
    let nodelay = std::env::args().any(|a| a == "--nodelay");
    let incoming =
        tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(nodelay));
    let served = tonic::transport::Server::builder()
        .add_service(CapacityServer::new(Floor))
        .serve_with_incoming(incoming)
        .await;
    if let Err(e) = served {
        eprintln!("noop_floor: {e}");
        std::process::exit(1);
    }
}
