//! The `doorman` command: run a server or a demo tree, ask a server for
//! capacity, load-test one, check, push and read configs, convert an
//! original Doorman config. Each subcommand lives in `cmd/`; the config
//! conversion's logic, which does no I/O, in `import/`. Errors are reported with `anyhow`; exit status 1 on
//! failure, 2 on a usage error.
//!
//! Must not: hold a subcommand's logic.

mod args;
mod cmd;
mod etcd_args;
mod import;
mod tls_args;

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
    Server(Box<cmd::server::Args>),
    /// Run a whole tree (root, 2 parents, 4 leaves, 20 clients) in one
    /// process and print what happens.
    Demo(cmd::demo::Args),
    /// Ask a server for capacity once and print the lease.
    Get(cmd::get::Args),
    /// Load-test any server that speaks doorman.Capacity.
    Loadtest(cmd::loadtest::Options),
    /// Check configuration files; push, get, list or roll back them in etcd;
    /// import an original Doorman config.
    Config {
        #[command(subcommand)]
        command: cmd::config::Command,
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
            Command::Server(a) => cmd::server::run(*a).await,
            Command::Get(a) => cmd::get::run(a).await,
            Command::Demo(a) => cmd::demo::run(a).await,
            Command::Loadtest(o) => {
                let json = o.json;
                cmd::loadtest::run(o).await.map(|r| {
                    if json {
                        println!("{}", serde_json::to_string(&r).unwrap_or_default());
                    } else {
                        cmd::loadtest::print(&r);
                    }
                    std::process::ExitCode::SUCCESS
                })
            }
            Command::Config { command } => cmd::config::run(command).await,
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
