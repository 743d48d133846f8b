//! The `doorman` command: run a server, ask one for capacity, check a
//! config. Errors are reported with `anyhow`; exit status 1 on failure.

mod cmd_config;
mod cmd_demo;
mod cmd_get;
mod cmd_server;
mod loadtest;

use clap::{Parser, Subcommand};

/// Doorman: global, distributed, client-side rate limiting.
#[derive(Debug, Parser)]
#[command(name = "doorman", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a lease server.
    Server(cmd_server::Args),
    /// Run a whole tree (root, 2 parents, 4 leaves, 20 clients) in one
    /// process and print what happens.
    Demo(cmd_demo::Args),
    /// Ask a server for capacity once and print the lease.
    Get(cmd_get::Args),
    /// Load-test any server that speaks doorman.Capacity.
    Loadtest(loadtest::Options),
    /// Check configuration files, or push / get them in etcd.
    Config {
        #[command(subcommand)]
        command: cmd_config::Command,
    },
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOORMAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Server(a) => cmd_server::run(a).await,
            Command::Get(a) => cmd_get::run(a).await,
            Command::Demo(a) => cmd_demo::run(a).await,
            Command::Loadtest(o) => {
                let json = o.json;
                loadtest::run(o).await.map(|r| {
                    if json {
                        println!("{}", serde_json::to_string(&r).unwrap_or_default());
                    } else {
                        loadtest::print(&r);
                    }
                    std::process::ExitCode::SUCCESS
                })
            }
            Command::Config { command } => cmd_config::run(command).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
