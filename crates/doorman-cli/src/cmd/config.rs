//! `doorman config check|push|get`: validate config files without running a
//! server, push a validated file to an etcd key, print the stored one.
//!
//! Must not: write anything to etcd that did not validate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use doorman_core::config::Config;
use doorman_server::config_source::{etcd as etcd_config, file};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate config files: exit 0 and a one-line summary each, or exit 1
    /// and every problem found.
    Check {
        /// TOML files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Validate a config file and write it to an etcd key; running servers
    /// with `--config etcd:KEY` apply it within a second. An invalid file is
    /// refused with every problem listed and nothing is written.
    Push {
        /// etcd endpoints (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        etcd: Vec<String>,
        /// The key, e.g. /doorman/config.
        #[arg(long)]
        key: String,
        /// The TOML file.
        file: PathBuf,
    },
    /// Print the config stored in an etcd key.
    Get {
        /// etcd endpoints (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        etcd: Vec<String>,
        /// The key.
        #[arg(long)]
        key: String,
    },
}

pub async fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Push { etcd, key, file } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
            let cfg = match Config::parse(&text, &file.display().to_string()) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{e}");
                    eprintln!("not pushed: {key} is unchanged");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let rev = etcd_config::put(&etcd, &key, text.into_bytes())
                .await
                .map_err(|e| anyhow::anyhow!(e))?;
            println!("pushed to {key} (revision {rev}): {}", cfg.summary());
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { etcd, key } => {
            let (value, _) = etcd_config::fetch(&etcd, &key)
                .await
                .map_err(|e| anyhow::anyhow!(e))?;
            print!("{}", String::from_utf8_lossy(&value));
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { files } => {
            let mut ok = true;
            for f in files {
                match file::read(&f) {
                    Ok((c, _)) => println!("ok: {}", c.summary()),
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
