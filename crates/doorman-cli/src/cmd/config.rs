//! `doorman config check|push|get|history|rollback`: validate config files
//! without running a server; push a validated file to an etcd key with an
//! audit record (who, when, which version it replaced); print the stored
//! config; list its versions; restore an earlier one.
//!
//! Must not: write anything to etcd that did not validate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use doorman_core::config::Config;
use doorman_server::config_source::{audit, etcd as etcd_config, file};

use crate::etcd_args::EtcdArgs;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate config files: exit 0 and a one-line summary each (and any
    /// access rule that can never apply), or exit 1 and every problem found.
    Check {
        /// TOML files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Validate a config file and write it to an etcd key with an audit
    /// record; running servers with `--config etcd:KEY` apply it within a
    /// second. An invalid file is refused with every problem listed and
    /// nothing is written.
    Push {
        #[command(flatten)]
        etcd: EtcdArgs,
        /// The key, e.g. /doorman/config.
        #[arg(long)]
        key: String,
        /// The TOML file.
        file: PathBuf,
    },
    /// Print the config stored in an etcd key.
    Get {
        #[command(flatten)]
        etcd: EtcdArgs,
        /// The key.
        #[arg(long)]
        key: String,
    },
    /// List the recorded versions of an etcd key: version, when, who, what
    /// changed.
    History {
        #[command(flatten)]
        etcd: EtcdArgs,
        /// The key.
        key: String,
    },
    /// Restore a recorded version (written as a new, audited version).
    Rollback {
        #[command(flatten)]
        etcd: EtcdArgs,
        /// The key.
        key: String,
        /// The version to restore (see `doorman config history`).
        #[arg(long)]
        to: i64,
    },
}

pub async fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Push { etcd, key, file } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
            push(&etcd, &key, &text, &file.display().to_string(), "push").await
        }
        Command::Get { etcd, key } => {
            let (value, _) = etcd_config::fetch(&etcd.options("config get")?, &key)
                .await
                .map_err(anyhow::Error::msg)?;
            print!("{}", String::from_utf8_lossy(&value));
            Ok(ExitCode::SUCCESS)
        }
        Command::History { etcd, key } => history(&etcd, &key).await,
        Command::Rollback { etcd, key, to } => {
            let opts = etcd.options("config rollback")?;
            let records = audit::history(&opts, &key)
                .await
                .map_err(anyhow::Error::msg)?;
            let Some(r) = records.into_iter().find(|r| r.version == to) else {
                anyhow::bail!(
                    "{key} has no recorded version {to} (see `doorman config history {key}`)"
                );
            };
            let name = format!("{key} version {to}");
            push(&etcd, &key, &r.config, &name, &format!("rollback to {to}")).await
        }
        Command::Check { files } => Ok(check(&files)),
    }
}

/// Validates `text` (named `name` in errors) and writes it with its record.
async fn push(
    etcd: &EtcdArgs,
    key: &str,
    text: &str,
    name: &str,
    action: &str,
) -> anyhow::Result<ExitCode> {
    let cfg = match Config::parse(text, name) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("not pushed: {key} is unchanged");
            return Ok(ExitCode::FAILURE);
        }
    };
    let opts = etcd.options("config push")?;
    let r = audit::push(&opts, key, text, &opts.principal(), action)
        .await
        .map_err(anyhow::Error::msg)?;
    println!(
        "pushed to {key}: version {} (replaces {}), by {}: {}",
        r.version,
        r.previous,
        r.pusher,
        cfg.summary()
    );
    Ok(ExitCode::SUCCESS)
}

async fn history(etcd: &EtcdArgs, key: &str) -> anyhow::Result<ExitCode> {
    let records = audit::history(&etcd.options("config history")?, key)
        .await
        .map_err(anyhow::Error::msg)?;
    if records.is_empty() {
        println!("{key}: no recorded versions");
    }
    for r in &records {
        let before = records
            .iter()
            .find(|p| p.version == r.previous)
            .map_or("", |p| p.config.as_str());
        println!(
            "version {}  replaces {}  at {} (Unix s)  by {}  {}  sha256 {}  {}",
            r.version,
            r.previous,
            r.pushed_at,
            r.pusher,
            r.action,
            &r.sha256[..12],
            audit::diff_summary(before, &r.config)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn check(files: &[PathBuf]) -> ExitCode {
    let mut ok = true;
    for f in files {
        match file::read(f) {
            Ok((c, _)) => {
                println!("ok: {}", c.summary());
                for w in c.warnings() {
                    println!("warning: {w}");
                }
            }
            Err(e) => {
                ok = false;
                eprintln!("{e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
