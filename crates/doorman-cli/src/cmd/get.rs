//! `doorman get`: one GetCapacity against a server, following a mastership
//! redirect once, printing the lease.
//!
//! Must not: follow more than one redirect or wait past `--timeout`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use doorman_client::connection;
use doorman_client::tls::endpoint;
use doorman_client::{BearerToken, ClientTls};
use doorman_proto::doorman as pb;
use doorman_proto::CapacityClient;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Server address (host:port).
    #[arg(long)]
    server: String,
    /// Resource id.
    #[arg(long)]
    resource: String,
    /// Capacity wanted.
    #[arg(long, value_parser = crate::args::amount)]
    wants: f64,
    /// Client id (default: HOSTNAME:PID).
    #[arg(long)]
    client_id: Option<String>,
    /// Priority band (higher = more important).
    #[arg(long, default_value_t = 0)]
    priority: i64,
    /// Capacity currently held (sent as `has`).
    #[arg(long, value_parser = crate::args::amount)]
    has: Option<f64>,
    /// Deadline for each RPC, in seconds (0.001 to 3600).
    #[arg(long, default_value = "5", value_parser = crate::args::seconds(0.001, 3600.0))]
    timeout: Duration,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tls: crate::tls_args::ClientTlsArgs,
}

/// One GetCapacity as the command sends it: the request, the deadline,
/// and the TLS files and token, if any.
struct Call<'a> {
    req: &'a pb::GetCapacityRequest,
    timeout: Duration,
    tls: Option<&'a ClientTls>,
    token: Option<&'a BearerToken>,
}

async fn ask(
    addr: &str,
    Call {
        req,
        timeout,
        tls,
        token,
    }: &Call<'_>,
) -> anyhow::Result<(pb::GetCapacityResponse, Option<String>)> {
    let (timeout, tls, token) = (*timeout, *tls, *token);
    let ep = endpoint(addr, tls)
        .map_err(anyhow::Error::msg)?
        .connect_timeout(timeout)
        .timeout(timeout);
    let channel = ep.connect().await.map_err(|e| {
        let why = crate::tls_args::explain(&e, tls);
        anyhow::anyhow!("cannot connect to {addr}: {why}")
    })?;
    let mut request = tonic::Request::new((*req).clone());
    if let Some(t) = token {
        t.attach(&mut request);
    }
    let resp = CapacityClient::new(channel)
        .get_capacity(request)
        .await
        .map_err(|s| {
            let why = crate::tls_args::explain(&s, tls);
            anyhow::anyhow!("{addr} answered {:?}: {why}", s.code())
        })?;
    let note = resp.metadata().get(connection::NOTE_HEADER);
    let note = note.and_then(|v| v.to_str().ok()).map(str::to_string);
    Ok((resp.into_inner(), note))
}

fn request(a: &Args) -> pb::GetCapacityRequest {
    pb::GetCapacityRequest {
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
                remaining_ms: None,
            }),
            wants: a.wants,
            has_remaining_ms: None,
        }],
    }
}

/// Asks `server`, following one mastership redirect. Returns who answered.
async fn ask_master(
    server: &str,
    call: &Call<'_>,
) -> anyhow::Result<(String, pb::GetCapacityResponse, Option<String>)> {
    let (mut resp, note) = ask(server, call).await?;
    let Some(m) = resp.mastership.take() else {
        return Ok((server.to_string(), resp, note));
    };
    let Some(master) = m.master_address else {
        bail!("{server} is not the master and does not know who is; retry later");
    };
    eprintln!("{server} is not the master; asking {master}");
    let (resp, note) = ask(&master, call).await?;
    if resp.mastership.is_some() {
        bail!("{master} redirected again; giving up after one redirect");
    }
    Ok((master, resp, note))
}

fn print(server: &str, client_id: &str, r: &pb::ResourceResponse, note: Option<&str>, json: bool) {
    if json {
        let v = serde_json::json!({
            "note": note,
            "server": server,
            "client_id": client_id,
            "resource_id": r.resource_id,
            "capacity": r.gets.capacity,
            "expiry_time": r.gets.expiry_time,
            "remaining_ms": r.gets.remaining_ms,
            "refresh_interval": r.gets.refresh_interval,
            "safe_capacity": r.safe_capacity,
            "shadow": r.shadow == Some(true),
        });
        println!("{v}");
        return;
    }
    // How long the lease lasts: as the server measured it if it said (a
    // doorman-rs server), else its absolute end against this host's clock.
    let left = match r.gets.remaining_ms {
        Some(ms) => ms as f64 / 1000.0,
        None => (r.gets.expiry_time - doorman_client::wall_clock().whole_secs()) as f64,
    };
    println!("resource          {}", r.resource_id);
    match note {
        Some(n) => println!("capacity          {} ({n})", r.gets.capacity),
        None => println!("capacity          {}", r.gets.capacity),
    }
    println!("expiry_time       {} (in {left} s)", r.gets.expiry_time);
    println!("refresh_interval  {} s", r.gets.refresh_interval);
    match r.safe_capacity {
        Some(s) => println!("safe_capacity     {s}"),
        None => println!("safe_capacity     (not sent)"),
    }
    if r.shadow == Some(true) {
        println!("shadow            yes: granted as usual, enforced by nobody");
    }
    println!("server            {server}");
}

/// Runs `doorman get`.
pub async fn run(a: Args) -> anyhow::Result<ExitCode> {
    let req = request(&a);
    let tls = a.tls.client_tls()?;
    let token = a.tls.token()?;
    let call = Call {
        req: &req,
        timeout: a.timeout,
        tls: tls.as_ref(),
        token: token.as_ref(),
    };
    let (server, resp, notes) = ask_master(&a.server, &call).await?;
    let Some(r) = resp.response.iter().find(|r| r.resource_id == a.resource) else {
        let why = if a.has.is_some() {
            " (an intermediate server that has not heard from its parent yet \
             does not honour a claimed --has without a local template; try again shortly)"
        } else {
            ""
        };
        bail!("{server} returned no lease for {:?}{why}", a.resource);
    };
    let note = connection::note_for(notes.as_deref(), &a.resource);
    print(&server, &req.client_id, r, note.as_deref(), a.json);
    Ok(ExitCode::SUCCESS)
}
