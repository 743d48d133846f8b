//! A server on its own tokio runtime and thread, so it can be killed like a
//! crashed process: every task ends and every socket closes at once (a
//! `RunningServer` sharing the caller's runtime would keep serving open
//! connections). For tests, demos and experiments.
//!
//! Must not: be used by production code (it is a dev-dependency only).

use std::net::SocketAddr;
use std::sync::Arc;

use doorman_server::server::{start, RunningServer, ServerOptions, StartError};
use doorman_state::ServerState;

/// A server running on a dedicated runtime.
#[derive(Debug)]
pub struct IsolatedServer {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address, if any.
    pub http_addr: Option<SocketAddr>,
    /// The server's shared state (core, metrics).
    pub state: Arc<ServerState>,
    kill: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IsolatedServer {
    /// Starts a server on a new one-worker runtime; `setup` runs on the
    /// server's state before the first request is accepted.
    pub fn start_with(
        opts: ServerOptions,
        setup: impl FnOnce(&RunningServer) + Send + 'static,
    ) -> Result<IsolatedServer, StartError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("doorman-server-{}", opts.listen))
            .spawn(move || serve(opts, setup, tx, kill_rx))
            .map_err(|source| StartError::Bind {
                addr: "0.0.0.0:0".parse().expect("literal address"),
                source,
            })?;
        let (grpc_addr, http_addr, state) = rx.recv().map_err(|_| StartError::Bind {
            addr: "0.0.0.0:0".parse().expect("literal address"),
            source: std::io::Error::other("server thread ended before starting"),
        })??;
        Ok(IsolatedServer {
            grpc_addr,
            http_addr,
            state,
            kill: Some(kill_tx),
            thread: Some(thread),
        })
    }

    /// Starts a server on a new runtime.
    pub fn start(opts: ServerOptions) -> Result<IsolatedServer, StartError> {
        Self::start_with(opts, |_| {})
    }

    /// The gRPC address as `host:port`.
    pub fn addr(&self) -> String {
        self.grpc_addr.to_string()
    }

    /// Kills the server: its runtime is dropped with every task and socket.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The number of RPCs of `method` served so far.
    pub fn requests(&self, method: &str) -> u64 {
        self.state.metrics.requests(method)
    }

    /// Lease streams open now (`doorman_server_lease_streams`).
    pub fn lease_streams(&self) -> f64 {
        self.metric("doorman_server_lease_streams")
    }

    /// Grants pushed so far (`doorman_server_pushed_grants_total`).
    pub fn pushes(&self) -> f64 {
        self.metric("doorman_server_pushed_grants_total")
    }

    /// Metric `name`, one without labels, as `/metrics` shows it now.
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.state.metrics_text();
        let value = text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(' ')?;
            rest.parse().ok()
        });
        value.unwrap_or_else(|| panic!("no {name} in /metrics"))
    }

    /// GetCapacity requests served so far, as calls or on lease streams.
    pub fn capacity_requests(&self) -> u64 {
        self.requests("GetCapacity") + self.state.metrics.stream_requests_seen()
    }
}

impl Drop for IsolatedServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a server's thread sends back once it started (or why it did not).
type Started = Result<(SocketAddr, Option<SocketAddr>, Arc<ServerState>), StartError>;

/// The body of a server's thread: its own runtime, the server on it, its
/// addresses sent back on `tx`, then kept until `kill_rx` fires or its
/// sender goes.
fn serve(
    opts: ServerOptions,
    setup: impl FnOnce(&RunningServer),
    tx: std::sync::mpsc::Sender<Started>,
    kill_rx: std::sync::mpsc::Receiver<()>,
) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tx.send(Err(StartError::Bind {
                addr: opts.listen,
                source: e,
            }));
            return;
        }
    };
    match rt.block_on(start(opts)) {
        Ok(server) => {
            setup(&server);
            let _ = tx.send(Ok((
                server.grpc_addr,
                server.http_addr,
                server.state.clone(),
            )));
            let _ = kill_rx.recv();
            // Abort, not drop: dropping closes the stop channel, which the
            // tasks take as a graceful shutdown; the election then
            // sometimes resigned before the runtime went, and a successor
            // took over at once instead of after the TTL (a flaky election
            // test, 1 run in 3).
            server.kill();
        }
        Err(e) => {
            let _ = tx.send(Err(e));
        }
    }
    rt.shutdown_background();
}
