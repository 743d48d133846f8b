//! The `doorman` binary as a user runs it.

use doorman_core::server::Sharded;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use doorman_core::config::Config;
use doorman_server::server::{start, ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};

const BIN: &str = env!("CARGO_BIN_EXE_doorman");

fn config(capacity: f64) -> String {
    let r = Resource::fair("r/*", capacity).lease(30).refresh(5);
    TestConfig::new().resource(r).toml()
}

#[test]
fn config_check_exit_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, config(10.0)).unwrap();
    let out = Command::new(BIN)
        .args(["config", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok:") && stdout.contains("1 resource template (1 FAIR_SHARE)"),
        "{stdout}"
    );

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[resources]]\nidentifier_glob = \"x\"\ncapacity = nan\n[resources.algorithm]\nkind = \"X\"\nlease_length = 0\nrefresh_interval = 1\n").unwrap();
    let out = Command::new(BIN)
        .args(["config", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "invalid config (4 problems)",
        "resources[0] (\"x\"): capacity: must be finite",
        "resources[0] (\"x\"): algorithm.kind: unknown algorithm kind \"X\"",
        "algorithm.lease_length: must be >= refresh_interval (1), got 0",
        "algorithm.lease_length: must be >= 1, got 0",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in {stderr}");
    }
    // Access rules: valid ones pass with a warning for a rule that can
    // never matter; bad ones are refused naming the rule and field.
    let rules = dir.path().join("rules.toml");
    let allow = |ids: &str, res: &str| {
        format!("[[access]]\nidentities = [{ids}]\nresources = [{res}]\nactions = [\"acquire\"]\n")
    };
    let text = format!(
        "{}{}{}",
        config(10.0),
        allow("\"*\"", "\"*\""),
        allow("\"web\"", "\"db/*\"")
    );
    std::fs::write(&rules, text).unwrap();
    let out = Command::new(BIN)
        .args(["config", "check"])
        .arg(&rules)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "warning: access[1]: never needed: access[0] already allows everything it allows"
        ),
        "{stdout}"
    );
    std::fs::write(&rules, format!("{}{}", config(10.0), allow("", "\"[\""))).unwrap();
    let out = Command::new(BIN)
        .args(["config", "check"])
        .arg(&rules)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("access[0].identities: must not be empty"),
        "{stderr}"
    );
    assert!(
        stderr.contains("access[0].resources[0]: invalid glob"),
        "{stderr}"
    );

    let out = Command::new(BIN)
        .args(["config", "check", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn get_follows_a_redirect_once_and_prints_the_lease() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = Arc::new(Config::parse(&config(50.0), "t").unwrap());
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (standby, master) = rt.block_on(async {
        let mut o = ServerOptions::new(any, ConfigSource::Inline(cfg.clone()));
        o.min_request_interval = Duration::ZERO;
        let master = start(o.clone()).await.unwrap();
        let standby = start(o).await.unwrap();
        standby
            .state
            .core()
            .step_down(Some(master.grpc_addr.to_string()));
        (standby, master)
    });
    let out = Command::new(BIN)
        .args([
            "get",
            "--server",
            &standby.grpc_addr.to_string(),
            "--resource",
            "r/1",
            "--wants",
            "20",
            "--client-id",
            "cli",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["server"], master.grpc_addr.to_string());
    assert_eq!(v["capacity"], 20.0);
    assert_eq!(v["refresh_interval"], 5);
    assert_eq!(v["safe_capacity"], 50.0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not the master"));

    // Human output, and a client holding capacity sends it as has.
    let out = Command::new(BIN)
        .args([
            "get",
            "--server",
            &master.grpc_addr.to_string(),
            "--resource",
            "r/1",
            "--wants",
            "40",
            "--has",
            "20",
            "--client-id",
            "cli",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("capacity          40"), "{stdout}");

    // A bad number is a usage error (exit 2) naming the flag, before any RPC.
    let out = Command::new(BIN)
        .args([
            "get",
            "--server",
            &master.grpc_addr.to_string(),
            "--resource",
            "r/1",
            "--wants=-3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--wants") && stderr.contains("must be a number from 0 to"),
        "{stderr}"
    );

    // Input only the server refuses gets its INVALID_ARGUMENT and exit 1.
    let out = Command::new(BIN)
        .args([
            "get",
            "--server",
            &master.grpc_addr.to_string(),
            "--resource",
            "",
            "--wants=3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("InvalidArgument") && stderr.contains("resource[0].resource_id"),
        "{stderr}"
    );

    // A dead server is an error within the timeout, not a hang.
    let t = Instant::now();
    let out = Command::new(BIN)
        .args([
            "get",
            "--server",
            "127.0.0.1:1",
            "--resource",
            "r/1",
            "--wants",
            "1",
            "--timeout",
            "2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(t.elapsed() < Duration::from_secs(30));
    rt.block_on(async {
        standby.shutdown().await;
        master.shutdown().await;
    });
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn server_process_reloads_on_sighup_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doorman.toml");
    std::fs::write(&path, config(100.0)).unwrap();
    let mut child = Command::new(BIN)
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--config-poll-interval",
            "3600",
            "--config",
        ])
        .arg(&path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let http = loop {
        let line = lines.next().expect("server prints its addresses").unwrap();
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    let status = || http_get(&http, "/api/v1/status");
    assert!(status().contains("\"capacity\":100.0"), "{}", status());
    std::fs::write(&path, config(33.0)).unwrap();
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    doorman_testkit::eventually_blocking("SIGHUP reload applied", Duration::from_secs(10), || {
        status().contains("\"capacity\":33.0")
    });
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let code = child.wait().unwrap();
    assert!(code.success(), "graceful exit on SIGTERM: {code:?}");
}

#[test]
fn demo_runs_a_tree_and_prints_a_table_and_summary() {
    let out = Command::new(BIN)
        .args(["demo", "--duration", "4"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "root",
        "parent-2",
        "leaf-4",
        "/debug/status",
        "handed out/cap",
        "  4s  ",
        "summary after 4 s",
        "root: 2 lease(s)",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
}

/// `demo --tls`: every link over mutual TLS with certificates made for
/// the run; the parents hold leases at the root and the clients get
/// capacity through the TLS tree; the certificates are gone at exit.
#[test]
fn demo_with_tls_runs_every_link_over_mutual_tls() {
    let out = Command::new(BIN)
        .args(["demo", "--tls", "--duration", "4"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "every link uses mutual TLS",
        "https://127.0.0.1:",
        "root: 2 lease(s)",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    let peak: f64 = stdout
        .split("peak handed out: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no peak in\n{stdout}"));
    assert!(peak > 0.0, "clients got capacity over TLS:\n{stdout}");
    let dir = stdout
        .split("certificates are in ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no directory in\n{stdout}"));
    assert!(!std::path::Path::new(dir).exists(), "{dir} removed at exit");
}

#[test]
fn bad_numeric_flags_are_usage_errors_naming_the_flag() {
    let cases: &[&[&str]] = &[
        &[
            "server",
            "--config",
            "x.toml",
            "--config-poll-interval",
            "1e-10",
        ],
        &[
            "server",
            "--config",
            "x.toml",
            "--config-poll-interval",
            "NaN",
        ],
        &["server", "--config", "x.toml", "--min-request-interval=-1"],
        &[
            "server",
            "--config",
            "x.toml",
            "--min-request-interval",
            "1e300",
        ],
        &["server", "--config", "x.toml", "--election-ttl", "0"],
        &[
            "get",
            "--server",
            "127.0.0.1:1",
            "--resource",
            "r",
            "--wants",
            "1",
            "--timeout",
            "0",
        ],
        &[
            "get",
            "--server",
            "127.0.0.1:1",
            "--resource",
            "r",
            "--wants",
            "inf",
        ],
        &[
            "loadtest",
            "--server",
            "127.0.0.1:1",
            "--resources",
            "10001",
        ],
        &["loadtest", "--server", "127.0.0.1:1", "--duration=-5"],
        &["loadtest", "--server", "127.0.0.1:1", "--concurrency", "0"],
        &["demo", "--duration", "0"],
    ];
    for args in cases {
        let out = Command::new(BIN).args(*args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let last = args.last().unwrap();
        let (flag, value) = match last.split_once('=') {
            Some((f, v)) => (f, v),
            None => (*args.iter().rev().nth(1).unwrap(), *last),
        };
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '{flag}")),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn help_lists_exactly_the_subcommands() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        listed,
        ["server", "demo", "get", "tree", "loadtest", "config", "help"],
        "{help}"
    );
    for cmd in ["server", "demo", "get", "loadtest", "config"] {
        let out = Command::new(BIN).args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success(), "{cmd} --help");
    }
}
