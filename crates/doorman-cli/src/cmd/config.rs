//! `doorman config check|push|get|history|rollback|import`: validate
//! config files without running a server; push a validated file to an etcd
//! key with an audit record (who, when, which version it replaced); print
//! the stored config; list its versions; restore an earlier one; convert an
//! original Doorman config (the conversion itself is `crate::import`).
//!
//! Must not: write anything to etcd that did not validate, or write an
//! imported config that did not.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use doorman_core::config::Config;
use doorman_etcd::audit;
use doorman_server::config_source::{etcd as etcd_config, file};

use crate::etcd_args::EtcdArgs;
use crate::import::{self, Level};

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
    /// Convert an original Doorman config (its YAML) to ours (TOML): the
    /// same templates in the same order, checked by our parser, with every
    /// difference on stderr. Exit 0 (with any warnings), or 1 with every
    /// error and nothing written.
    Import {
        /// The original's YAML config.
        file: PathBuf,
        /// Where to write the TOML (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
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
        Command::Import { file, output } => Ok(import(&file, output.as_deref())),
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
    let r = audit::push(
        &opts,
        key,
        text,
        &crate::etcd_args::principal(&opts),
        action,
    )
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

/// Reads `file`, converts it, and writes the TOML to `output` (or
/// stdout); findings go to stderr, one per line, each naming the file.
fn import(file: &Path, output: Option<&Path>) -> ExitCode {
    let name = file.display().to_string();
    let text = match std::fs::read(file).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => return import_failed(&name, &format!("not valid UTF-8: {e}")),
        Err(e) => return import_failed(&name, &format!("cannot read: {e}")),
    };
    let imported = match import::convert(&text, &name) {
        Ok(i) => i,
        Err(findings) => {
            let errors = findings.iter().filter(|f| f.level == Level::Error).count();
            let s = if errors == 1 { "" } else { "s" };
            eprintln!("{name}: not imported ({errors} error{s}); nothing written");
            for f in &findings {
                eprintln!("  {}: {name}: {f}", f.level);
            }
            return ExitCode::FAILURE;
        }
    };
    for f in &imported.findings {
        eprintln!("{}: {name}: {f}", f.level);
    }
    let to = match output {
        Some(path) => match std::fs::write(path, &imported.toml) {
            Ok(()) => format!(" -> {}", path.display()),
            Err(e) => {
                return import_failed(&name, &format!("cannot write {}: {e}", path.display()))
            }
        },
        None => {
            print!("{}", imported.toml);
            String::new()
        }
    };
    let count = |l: Level| imported.findings.iter().filter(|f| f.level == l).count();
    eprintln!(
        "imported {}{to} ({} warnings, {} notes)",
        imported.summary,
        count(Level::Warning),
        count(Level::Note)
    );
    ExitCode::SUCCESS
}

fn import_failed(name: &str, why: &str) -> ExitCode {
    eprintln!("{name}: not imported: {why}; nothing written");
    ExitCode::FAILURE
}
