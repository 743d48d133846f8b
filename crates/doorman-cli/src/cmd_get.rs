//! `doorman get`: one GetCapacity against a server, following a mastership
//! redirect once, printing the lease.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;
use tonic::transport::Endpoint;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Server address (host:port).
    #[arg(long)]
    server: String,
    /// Resource id.
    #[arg(long)]
    resource: String,
    /// Capacity wanted.
    #[arg(long)]
    wants: f64,
    /// Client id (default: <hostname>:<pid>).
    #[arg(long)]
    client_id: Option<String>,
    /// Priority band (higher = more important).
    #[arg(long, default_value_t = 0)]
    priority: i64,
    /// Capacity currently held (sent as `has`).
    #[arg(long)]
    has: Option<f64>,
    /// Deadline for each RPC, in seconds.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

async fn ask(
    addr: &str,
    req: &pb::GetCapacityRequest,
    timeout: Duration,
) -> anyhow::Result<pb::GetCapacityResponse> {
    let ep = Endpoint::from_shared(doorman_client::connection::uri(addr))
        .with_context(|| format!("bad server address {addr:?}"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let channel = ep
        .connect()
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let resp = CapacityClient::new(channel)
        .get_capacity(req.clone())
        .await
        .map_err(|s| anyhow::anyhow!("{addr} answered {:?}: {}", s.code(), s.message()))?;
    Ok(resp.into_inner())
}

pub async fn run(a: Args) -> anyhow::Result<ExitCode> {
    if !a.timeout.is_finite() || a.timeout <= 0.0 {
        bail!("--timeout must be > 0 seconds");
    }
    let timeout = Duration::from_secs_f64(a.timeout);
    let req = pb::GetCapacityRequest {
        client_id: a
            .client_id
            .clone()
            .unwrap_or_else(|| format!("{}:{}", doorman_client::hostname(), std::process::id())),
        resource: vec![pb::ResourceRequest {
            resource_id: a.resource.clone(),
            priority: a.priority,
            has: a.has.map(|c| pb::Lease {
                expiry_time: 0,
                refresh_interval: 0,
                capacity: c,
            }),
            wants: a.wants,
        }],
    };
    let mut server = a.server.clone();
    let mut resp = ask(&server, &req, timeout).await?;
    if let Some(m) = resp.mastership.take() {
        let Some(master) = m.master_address else {
            bail!("{server} is not the master and does not know who is; retry later");
        };
        eprintln!("{server} is not the master; asking {master}");
        server = master;
        resp = ask(&server, &req, timeout).await?;
        if resp.mastership.is_some() {
            bail!("{server} redirected again; giving up after one redirect");
        }
    }
    let Some(r) = resp.response.iter().find(|r| r.resource_id == a.resource) else {
        bail!("{server} returned no lease for {:?}", a.resource);
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if a.json {
        let v = serde_json::json!({
            "server": server,
            "client_id": req.client_id,
            "resource_id": r.resource_id,
            "capacity": r.gets.capacity,
            "expiry_time": r.gets.expiry_time,
            "refresh_interval": r.gets.refresh_interval,
            "safe_capacity": r.safe_capacity,
        });
        println!("{v}");
    } else {
        println!("resource          {}", r.resource_id);
        println!("capacity          {}", r.gets.capacity);
        println!(
            "expiry_time       {} (in {} s)",
            r.gets.expiry_time,
            r.gets.expiry_time - now
        );
        println!("refresh_interval  {} s", r.gets.refresh_interval);
        match r.safe_capacity {
            Some(s) => println!("safe_capacity     {s}"),
            None => println!("safe_capacity     (not sent)"),
        }
        println!("server            {server}");
    }
    Ok(ExitCode::SUCCESS)
}
