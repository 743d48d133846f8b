//! `doorman-faults interop`: our servers next to the original Go
//! Doorman's binaries, for real, on one host of the harness's network (a
//! namespace of its own: the original server binds every interface).
//! Needs root, the original's binaries in `--original`
//! (`scripts/original-build.sh` builds them, with `doorman_insecure_parent`
//! for an original intermediate), our `doorman` and this binary's `client`.
//!
//! 1. interop: the original Go client library against our leaf (below
//!    our root): `goclient` without and with `-ratelimit`, and
//!    `doorman_client`. Each must get the capacity our leaf's status says
//!    it holds (and the algorithm gives: each wants less than its share),
//!    `-ratelimit` must let through about that rate, Release() and Close()
//!    must return (the program exits 0), and the lease must be gone from
//!    our leaf when it has.
//! 2. mixed tree A: our intermediate under an original root; B: an
//!    original intermediate under our root (beside our leaf). In each, two
//!    Go clients on the original side and two Rust clients on ours, all
//!    wanting 80 of `res` (FAIR_SHARE, capacity 100), sampled every 100 ms
//!    for `--seconds` (`sample.rs` says what is checked).
//!
//! Prints one line per check ("ok: ..." / "FAILED: ...") and "N passed, M
//! failed"; fails if any failed. Every process is stopped by its pid.
//!
//! Must not: run anywhere but on its own host of the harness's network.

mod sample;
mod steps;
mod tree;
mod views;

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::net::Net;
use tree::Tree;

/// The interop check's options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Where the original's binaries are.
    #[arg(long, default_value = "target/original")]
    pub original: String,
    /// Our server.
    #[arg(long, default_value = "target/release/doorman")]
    pub doorman: String,
    /// The harness (its `client`).
    #[arg(long, default_value = "target/release/doorman-faults")]
    pub client: String,
    /// How long each mixed tree is sampled, s.
    #[arg(long, default_value_t = 60.0)]
    pub seconds: f64,
    /// Only this step.
    #[arg(long, value_parser = ["interop", "a", "b"])]
    pub only: Option<String>,
    /// Where logs and configs go (default: a new temporary directory).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The checks' tally.
#[derive(Debug, Default)]
pub struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    /// Counts and prints one check (with `detail` when it failed).
    pub fn check(&mut self, what: &str, ok: bool, detail: &str) -> bool {
        if ok {
            self.passed += 1;
            println!("ok: {what}");
        } else {
            self.failed += 1;
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            };
            println!("FAILED: {what}{detail}");
        }
        ok
    }
}

/// Runs the steps; whether every check passed.
pub async fn run(mut a: Args) -> anyhow::Result<bool> {
    for p in [&mut a.original, &mut a.doorman, &mut a.client] {
        *p = std::path::absolute(&*p)?.to_string_lossy().into_owned();
    }
    let dir = match &a.out {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => tempfile::Builder::new()
            .prefix("interop-")
            .tempdir()?
            .keep(),
    };
    let mut net = Net::new(std::process::id())?;
    let host = net.host("interop")?;
    let mut c = Checks::default();
    for step in ["interop", "a", "b"] {
        if a.only.as_deref().is_some_and(|o| o != step) {
            continue;
        }
        let mut t = Tree::new(&a, host.clone(), &dir);
        let done = match step {
            "interop" => steps::interop(&mut c, &mut t).await,
            "a" => steps::mixed_a(&mut c, &mut t, a.seconds).await,
            _ => steps::mixed_b(&mut c, &mut t, a.seconds).await,
        };
        if let Err(e) = done {
            c.check(&format!("{step}: {e:#}"), false, "");
        }
        drop(t);
    }
    drop(net);
    println!(
        "{} passed, {} failed (logs in {})",
        c.passed,
        c.failed,
        show(&dir)
    );
    Ok(c.failed == 0)
}

fn show(p: &Path) -> String {
    p.display().to_string()
}
