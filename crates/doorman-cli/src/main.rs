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
    /// Log lines as text (default) or as one JSON object per line. Text
    /// has colours only when stderr is a terminal and NO_COLOR is unset. The level comes from
    /// `DOORMAN_LOG` (default `info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, with the event's fields as keys.
    Json,
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
    /// Show the tree below a server (from the root: the whole tree), with
    /// late and missing nodes marked (exit 1 if any).
    Tree(cmd::tree::Args),
    /// Load-test any server that speaks doorman.Capacity.
    Loadtest(cmd::loadtest::Options),
    /// Check configuration files; push, get, list or roll back them in etcd;
    /// import an original Doorman config.
    Config {
        #[command(subcommand)]
        command: cmd::config::Command,
    },
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOORMAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => logs.json().flatten_event(true).init(),
        LogFormat::Text => {
            // The NO_COLOR convention (no-color.org) as well.
            let colours = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            logs.with_ansi(colours).init()
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
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
    let json = cli.log_format == LogFormat::Json;
    let result = rt.block_on(async move {
        match cli.command {
            Command::Server(a) => cmd::server::run(*a).await,
            Command::Get(a) => cmd::get::run(a).await,
            Command::Tree(a) => cmd::tree::run(a).await,
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
        Err(e) if json => {
            tracing::error!(error = format!("{e:#}"), "failed");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
