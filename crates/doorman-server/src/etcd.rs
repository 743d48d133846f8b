//! The connection to etcd shared by the etcd election and the etcd config
//! source: short connect timeouts and keep-alives, so a dead etcd is
//! noticed in seconds.
//!
//! Must not: hold state or retry (callers back off themselves).

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::time::timeout;

/// Connects to etcd with short timeouts (campaigns block, so no request
/// timeout is set; callers bound each call themselves).
pub async fn connect(endpoints: &[String], connect_timeout: Duration) -> Result<Client, String> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(connect_timeout)
        .with_keep_alive(Duration::from_secs(2), connect_timeout)
        .with_require_leader(true);
    match timeout(connect_timeout * 2, Client::connect(endpoints, Some(opts))).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("cannot connect to etcd {endpoints:?}: {e}")),
        Err(_) => Err(format!("cannot connect to etcd {endpoints:?}: timed out")),
    }
}
