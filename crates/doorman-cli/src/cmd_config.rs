//! `doorman config check FILE…`: validate configs without running a server.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use doorman_server::config::Config;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate config files: exit 0 and a one-line summary each, or exit 1
    /// and every problem found.
    Check {
        /// TOML files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Check { files } => {
            let mut ok = true;
            for f in files {
                match Config::load(&f) {
                    Ok(c) => println!("ok: {}", c.summary()),
                    Err(e) => {
                        ok = false;
                        eprintln!("{e}");
                    }
                }
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
