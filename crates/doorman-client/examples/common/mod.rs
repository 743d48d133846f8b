//! Shared by the examples: a server to talk to. With `DOORMAN_SERVER=host:port`
//! the examples use that server; otherwise they start one in-process on
//! 127.0.0.1 with the given config.

use std::sync::Arc;
use std::time::Duration;

use doorman_client::Mode;

use doorman_core::config::Config;
use doorman_server::server::{start, ConfigSource, RunningServer, ServerOptions};

pub async fn server(config: &str) -> (String, Option<RunningServer>) {
    if let Ok(addr) = std::env::var("DOORMAN_SERVER") {
        return (addr, None);
    }
    let cfg = Arc::new(Config::parse(config, "example").expect("example config is valid"));
    let opts = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    let s = start(opts).await.expect("in-process server starts");
    (s.grpc_addr.to_string(), Some(s))
}

pub fn config(glob: &str, kind: &str, capacity: f64) -> String {
    format!(
        "[[resources]]\nidentifier_glob = \"{glob}\"\ncapacity = {capacity}\n[resources.algorithm]\nkind = \"{kind}\"\nlease_length = 10\nrefresh_interval = 2\nlearning_mode_duration = 0\n"
    )
}

/// Waits for a lease with capacity, printing why there is none meanwhile
/// (the server's note: "learning mode, 42 s left", "no valid lease from the
/// parent"). `now` reads the resource's mode, capacity and note.
pub async fn wait_for_capacity(now: impl Fn() -> (Mode, f64, Option<String>)) {
    let mut said = None;
    loop {
        let (mode, capacity, note) = now();
        if mode == Mode::Lease && capacity > 0.0 {
            return;
        }
        if mode == Mode::Lease && note != said {
            let why = note.as_deref().unwrap_or("the server gave no reason");
            println!("capacity 0 for now: {why}");
            said = note;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
