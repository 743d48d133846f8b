//! A tonic gRPC server that sheds load with a Doorman rate resource: the
//! server is layered with `RateLimitLayer` in `Reject` mode, and a rejected
//! call is answered with the gRPC status `RESOURCE_EXHAUSTED` (tonic finds
//! the `Status` that `ResourceExhausted::to_status` makes). The service
//! here is a stand-in (doorman's own `Discovery`); any tonic service works
//! the same. Fires a burst of calls at itself and prints the codes.
//!
//!     cargo run --release -p doorman-client --example tonic_server

#[path = "common/mod.rs"]
mod common;

use doorman_client::tower::{BoxError, Mode, RateLimitLayer, ResourceExhausted};
use doorman_client::{Client, RateOptions};
use doorman_proto::doorman as pb;
use doorman_proto::{Capacity, CapacityClient, CapacityServer};
use tonic::{Code, Request, Response, Status};
use tower::ServiceBuilder;

/// The service being protected: answers Discovery, nothing else.
struct Service;

#[tonic::async_trait]
impl Capacity for Service {
    async fn discovery(
        &self,
        _: Request<pb::DiscoveryRequest>,
    ) -> Result<Response<pb::DiscoveryResponse>, Status> {
        Ok(Response::new(pb::DiscoveryResponse {
            is_master: true,
            mastership: pb::Mastership::default(),
        }))
    }

    async fn get_capacity(
        &self,
        _: Request<pb::GetCapacityRequest>,
    ) -> Result<Response<pb::GetCapacityResponse>, Status> {
        Err(Status::unimplemented("a stand-in service"))
    }

    async fn get_server_capacity(
        &self,
        _: Request<pb::GetServerCapacityRequest>,
    ) -> Result<Response<pb::GetServerCapacityResponse>, Status> {
        Err(Status::unimplemented("a stand-in service"))
    }

    async fn release_capacity(
        &self,
        _: Request<pb::ReleaseCapacityRequest>,
    ) -> Result<Response<pb::ReleaseCapacityResponse>, Status> {
        Err(Status::unimplemented("a stand-in service"))
    }

    type CapacityStreamStream =
        tokio_stream::wrappers::ReceiverStream<Result<pb::GetCapacityResponse, Status>>;

    async fn capacity_stream(
        &self,
        _: Request<tonic::Streaming<pb::GetCapacityRequest>>,
    ) -> Result<Response<Self::CapacityStreamStream>, Status> {
        Err(Status::unimplemented("a stand-in service"))
    }

    type ServerCapacityStreamStream =
        tokio_stream::wrappers::ReceiverStream<Result<pb::GetServerCapacityResponse, Status>>;

    async fn server_capacity_stream(
        &self,
        _: Request<tonic::Streaming<pb::GetServerCapacityRequest>>,
    ) -> Result<Response<Self::ServerCapacityStreamStream>, Status> {
        Err(Status::unimplemented("a stand-in service"))
    }
}

/// A shed call becomes its gRPC status; other errors pass unchanged.
fn as_status(e: BoxError) -> BoxError {
    match ResourceExhausted::find(&e).map(ResourceExhausted::to_status) {
        Some(status) => Box::new(status),
        None => e,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (addr, _server) = common::server(&common::config("example/*", "FAIR_SHARE", 10.0)).await;
    let client = Client::builder().servers([addr]).build().await?;
    let rate = client.rate_resource("example/grpc", RateOptions::wants(10.0))?;
    common::wait_for_capacity(|| (rate.mode(), rate.capacity(), rate.note())).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let grpc = listener.local_addr()?;
    let layers = ServiceBuilder::new()
        .map_err(as_status)
        .layer(RateLimitLayer::new(rate.clone()).mode(Mode::Reject));
    let serve = tonic::transport::Server::builder()
        .layer(layers)
        .add_service(CapacityServer::new(Service))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(serve);
    let mut caller = CapacityClient::connect(format!("http://{grpc}")).await?;
    let mut codes = Vec::new();
    // 30 calls 10 ms apart: 300 ms at 10/s leaves room for ~3.
    for _ in 0..30 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let r = caller.discovery(pb::DiscoveryRequest {}).await;
        codes.push(r.map(|_| Code::Ok).unwrap_or_else(|s| s.code()));
    }
    let served = codes.iter().filter(|c| **c == Code::Ok).count();
    let shed = codes
        .iter()
        .filter(|c| **c == Code::ResourceExhausted)
        .count();
    println!(
        "granted {} calls/s; 30 calls in 300 ms: {served} served, {shed} RESOURCE_EXHAUSTED",
        rate.capacity()
    );
    assert_eq!(served + shed, 30, "every call served or shed: {codes:?}");
    assert!(shed > 0 && served > 0, "{codes:?}");
    client.close().await;
    Ok(())
}
