//! `doorman config import` on the original Doorman's own example configs
//! (copied under `fixtures/original/`, each naming its source path and
//! commit), on broken input, and with what it writes fed back to
//! `doorman config check`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use doorman_algorithms::Kind;
use doorman_core::config::Config;

const BIN: &str = env!("CARGO_BIN_EXE_doorman");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/original")
        .join(name)
}

fn doorman(args: &[&str], files: &[&Path]) -> Output {
    Command::new(BIN).args(args).args(files).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// (glob, capacity, safe capacity, description, kind, lease, refresh)
type Expected = (&'static str, f64, f64, &'static str, Kind, i64, i64);

/// Imports `name` with `-o`, checks the templates, and runs `config check`
/// on the result; returns import's stderr.
fn imports_as(name: &str, expected: &[Expected]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.toml");
    let out = doorman(&["config", "import", "-o"], &[&out_path, &fixture(name)]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{name}: {stderr}");
    assert!(out.stdout.is_empty(), "with -o nothing goes to stdout");
    let toml = std::fs::read_to_string(&out_path).unwrap();
    let config = Config::parse(&toml, "out.toml").unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let got: Vec<Expected> = config
        .templates()
        .iter()
        .map(|t| {
            let glob = expected[t.index].0;
            assert_eq!(t.identifier_glob, glob);
            let a = &t.algorithm;
            assert_eq!(
                a.learning_mode_duration, a.lease_length,
                "the original's default, kept"
            );
            let description = expected[t.index].3;
            assert_eq!(t.description.as_deref(), Some(description));
            let safe = t.safe_capacity.unwrap_or(f64::NAN);
            (
                glob,
                t.capacity,
                safe,
                description,
                a.kind,
                a.lease_length,
                a.refresh_interval,
            )
        })
        .collect();
    assert_eq!(got, expected, "{name}: templates, in order\n{toml}");
    // The catch-all matches what the original's did, and ids with '/' too.
    let catch_all = config.find("not/listed").unwrap();
    assert_eq!(catch_all.identifier_glob, "*");
    let check = doorman(&["config", "check"], &[&out_path]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    assert!(
        text(&check.stdout)
            .contains("out.toml: 3 resource templates (1 PROPORTIONAL_SHARE, 2 FAIR_SHARE)"),
        "{}",
        text(&check.stdout)
    );
    // Without -o the same TOML goes to stdout.
    let to_stdout = doorman(&["config", "import"], &[&fixture(name)]);
    assert!(to_stdout.status.success());
    assert_eq!(
        text(&to_stdout.stdout).replace(&*fixture(name).to_string_lossy(), ""),
        toml.replace(&*fixture(name).to_string_lossy(), "")
    );
    stderr
}

#[test]
fn imports_the_originals_simplecluster_example() {
    use Kind::{FairShare, ProportionalShare};
    let stderr = imports_as(
        "doc-simplecluster-config.yml",
        &[
            (
                "proportional",
                100.0,
                10.0,
                "proportional example",
                ProportionalShare,
                15,
                5,
            ),
            ("fair", 1000.0, 10.0, "fair share example", FairShare, 15, 5),
            ("*", 1000.0, 10.0, "default", FairShare, 60, 15),
        ],
    );
    assert!(!stderr.contains("warning:"), "{stderr}");
    assert!(
        stderr.contains("resources[2] (\"*\"): identifier_glob: '*' matches '/' here"),
        "{stderr}"
    );
    assert!(stderr.contains("decay_factor"), "{stderr}");
    assert!(stderr.contains("imported "), "{stderr}");
    assert!(
        stderr.contains("3 resource templates (1 PROPORTIONAL_SHARE, 2 FAIR_SHARE)"),
        "{stderr}"
    );
}

#[test]
fn imports_the_originals_loadtest_example() {
    use Kind::{FairShare, ProportionalShare};
    let stderr = imports_as(
        "doc-loadtest-docker-server-config.yml",
        &[
            (
                "proportional",
                5000.0,
                10.0,
                "proportional example",
                ProportionalShare,
                60,
                15,
            ),
            (
                "fair",
                5000.0,
                10.0,
                "fair share example",
                FairShare,
                60,
                15,
            ),
            ("*", 1000.0, 10.0, "test", FairShare, 60, 15),
        ],
    );
    assert!(!stderr.contains("warning:"), "{stderr}");
}

#[test]
fn warnings_still_write_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("w.yml");
    std::fs::write(
        &yaml,
        "resources:\n- identifier_glob: 'db*'\n  capacity: 5\n  owner: team-a\n  \
         algorithm: {kind: STATIC, lease_length: 30, refresh_interval: 5, parameters: [{name: window, value: 2}]}\n\
         - identifier_glob: 'db/*/replica'\n  capacity: 1\n  algorithm: {kind: STATIC, lease_length: 30, refresh_interval: 5}\n\
         - identifier_glob: '*'\n  capacity: 0\n  safe_capacity: -1\n  algorithm: {kind: 0, lease_length: 30, refresh_interval: 5}\n",
    )
    .unwrap();
    let out = doorman(&["config", "import"], &[&yaml]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for needle in [
        "warning: ", "resources[0] (\"db*\"): owner: unknown field",
        "resources[0] (\"db*\"): algorithm.parameters[0]: \"window\" = \"2\" not carried",
        "resources[0] (\"db*\"): identifier_glob: '*' matches '/' here, not in the original: this \
         template now takes ids such as \"db/x/replica\", which the original gave resources[1] (\"db/*/replica\")",
        "resources[2] (\"*\"): safe_capacity: -1 not carried",
        "resources[2] (\"*\"): algorithm.kind: 0 read as NO_ALGORITHM",
        "(4 warnings, ",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in {stderr}");
    }
    let config = Config::parse(&text(&out.stdout), "stdout").unwrap();
    assert_eq!(config.templates().len(), 3);
    assert_eq!(config.templates()[2].algorithm.kind, Kind::NoAlgorithm);
}

#[test]
fn what_is_not_an_original_config_is_refused_with_every_error() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.toml");
    let bad = dir.path().join("bad.yml");
    std::fs::write(
        &bad,
        "resources:\n- identifier_glob: '*'\n  capacity: 1\n  algorithm: {kind: FAIR_SHARE, lease_length: 5, refresh_interval: 10}\n\
         - identifier_glob: 'x'\n  capacity: many\n  algorithm: {kind: FAIR, lease_length: 5, refresh_interval: 1}\n",
    )
    .unwrap();
    let out = doorman(&["config", "import", "-o"], &[&out_path, &bad]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let name = bad.display().to_string();
    for needle in [
        format!("{name}: not imported (4 errors); nothing written"),
        format!("error: {name}: resources[0] (\"*\"): algorithm.lease_length: lease_length (5) must be at least refresh_interval (10)"),
        format!("error: {name}: resources[0] (\"*\"): identifier_glob: the \"*\" entry must be the last one"),
        format!("error: {name}: resources[1] (\"x\"): capacity: must be a number, got text"),
        format!("error: {name}: resources[1] (\"x\"): algorithm.kind: unknown kind \"FAIR\""),
    ] {
        assert!(stderr.contains(&needle), "missing {needle:?} in {stderr}");
    }
    assert!(!out_path.exists(), "nothing written");
    // One of our own TOML configs is not an original one either.
    let ours = dir.path().join("ours.toml");
    std::fs::write(
        &ours,
        "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 1\n",
    )
    .unwrap();
    let out = doorman(&["config", "import"], &[&ours]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not valid YAML"),
        "{}",
        text(&out.stderr)
    );
    let missing = doorman(&["config", "import"], &[Path::new("/nonexistent.yml")]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("/nonexistent.yml: not imported: cannot read"));
}
