//! `doorman-faults`: the fault-injection harness. `run` starts a tree of
//! real `doorman` processes, a real etcd and real clients (our Rust
//! library, the Python package, the original Go client), each on its own
//! network namespace with its own (fakeable) wall clock, injects faults on
//! a seeded schedule, and audits from the clients' reports that Σ of what
//! they use never exceeds the capacity. `client` is the Rust client the
//! harness runs. See docs/faults.md.
//!
//! Must not: run anywhere but on its own namespaces and bridge.

mod argv;
mod audit;
mod checks;
mod client;
mod clock;
mod clocks;
mod etcd;
mod explain;
mod faults;
mod happened;
mod http;
mod interop;
mod leases;
mod net;
mod no_shadow;
mod probe;
mod procs;
mod proxy;
mod record;
mod report;
mod rng;
mod run;
mod scenario;
mod schedule;
mod secure;
mod slot_spec;
mod tree;
mod world;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "doorman-faults",
    about = "Fault-injection harness for a tree of real doorman processes"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Runs the tree under a schedule of faults and audits it (needs root:
    /// network namespaces; iproute2, nftables, faketime and etcd).
    Run(run::Args),
    /// Runs one client that ignores its lease's end, cut off from its
    /// leaf: passes only if the audit sees it exceed the capacity.
    Selftest(run::Args),
    /// Runs a simulator scenario's plan (`doorman-sim run`'s `plan.json`)
    /// on real processes and writes the simulator's files (needs root).
    Scenario(scenario::Args),
    /// One Rust client process of the tree (started by `run`).
    Client(client::Args),
    /// One TCP connection attempt (run on a host of the tree).
    Probe(probe::Args),
    /// Our servers next to the original Go Doorman's binaries: its client
    /// library against our leaf, and mixed trees (needs root).
    Interop(interop::Args),
    /// A TCP proxy that can delay (run on a host of the tree).
    Proxy(proxy::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("doorman-faults: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.cmd {
        Cmd::Run(a) => rt.block_on(run::run(a)),
        Cmd::Selftest(a) => rt.block_on(run::selftest(a)),
        Cmd::Scenario(a) => rt.block_on(scenario::run(a)),
        Cmd::Client(a) => rt.block_on(client::run(a)).map(|()| true),
        Cmd::Probe(a) => probe::run(a).map(|()| true),
        Cmd::Interop(a) => rt.block_on(interop::run(a)),
        Cmd::Proxy(a) => rt.block_on(proxy::run(a)).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("doorman-faults: {e:#}");
            ExitCode::FAILURE
        }
    }
}
