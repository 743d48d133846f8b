//! The examples run as a user runs them (`cargo run --example NAME`), each
//! against its own in-process server, and must exit 0. `cargo test` builds
//! them next to the tests (target/…/examples/); a missing one fails here
//! with how to build it.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target profile dir");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: build the examples with `cargo test -p doorman-client` (or --examples)",
        path.display()
    );
    path
}

fn run(name: &str, args: &[&str], expect: &str) {
    let start = Instant::now();
    let out = Command::new(example(name))
        .args(args)
        .env_remove("DOORMAN_SERVER")
        .output()
        .expect("example runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed:\n{text}");
    assert!(
        text.contains(expect),
        "{name} did not print {expect:?}:\n{text}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{name} took too long"
    );
}

#[test]
fn the_examples_run() {
    run("rate_worker", &["2"], "achieved");
    run("gauge_worker", &[], "capacity");
    run("tower_layer", &[], "calls/s");
    run("axum_server", &[], "answered 429");
    run("tonic_server", &[], "RESOURCE_EXHAUSTED");
}
