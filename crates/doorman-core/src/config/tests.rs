use super::*;

const GOOD: &str = r#"
[[resources]]
identifier_glob = "db/users/*"
capacity = 500
safe_capacity = 10.0
description = "user shard QPS"
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 5
parameters = { decay_factor = "0.25" }

[[resources]]
identifier_glob = "db/users/special"
capacity = 7.5
[resources.algorithm]
kind = "STATIC"
lease_length = 20
refresh_interval = 10
learning_mode_duration = 0

[[resources]]
identifier_glob = "*"
capacity = 100
[resources.algorithm]
kind = "PROPORTIONAL_SHARE"
lease_length = 60
refresh_interval = 16
"#;

#[test]
fn parses_a_good_config() {
    let c = Config::parse(GOOD, "good.toml").unwrap();
    assert_eq!(c.templates().len(), 3);
    let t = &c.templates()[0];
    assert_eq!(t.capacity, 500.0);
    assert_eq!(t.safe_capacity, Some(10.0));
    assert_eq!(t.algorithm.kind, Kind::FairShare);
    assert_eq!(
        t.algorithm.learning_mode_duration, 60,
        "defaults to lease_length"
    );
    assert_eq!(t.algorithm.decay_factor, 0.25);
    assert_eq!(c.templates()[1].algorithm.learning_mode_duration, 0);
    assert_eq!(c.templates()[2].algorithm.decay_factor, 0.5);
    assert!(
        c.summary().contains("3 resource templates"),
        "{}",
        c.summary()
    );
}

#[test]
fn exact_match_beats_earlier_glob_then_file_order() {
    let c = Config::parse(GOOD, "good.toml").unwrap();
    assert_eq!(c.find("db/users/special").unwrap().index, 1);
    assert_eq!(c.find("db/users/42").unwrap().index, 0);
    assert_eq!(c.find("db/other").unwrap().index, 2);
    // `*` matches `/` too.
    assert_eq!(c.find("a/b/c").unwrap().index, 2);
}

#[test]
fn no_match_without_catch_all() {
    let c = Config::parse(
        "[[resources]]\nidentifier_glob = \"x\"\ncapacity = 1\n[resources.algorithm]\nkind = \"STATIC\"\nlease_length = 2\nrefresh_interval = 1\n",
        "t",
    )
    .unwrap();
    assert!(c.find("y").is_none());
    assert!(c.find("x").is_some());
}

#[test]
fn every_problem_is_listed() {
    let bad = r#"
bogus = 1
[[resources]]
identifier_glob = "a/[*"
capacity = -1
safe_capacity = "lots"
colour = "blue"
[resources.algorithm]
kind = "FAIRSHARE"
lease_length = 3
refresh_interval = 5
learning_mode_duration = -2
parameters = { decay_factor = "2", speed = "1" }

[[resources]]
capacity = nan
[resources.algorithm]
kind = "STATIC"
refresh_interval = 0

[[resources]]
identifier_glob = "dup"
capacity = 1
algorithm = { kind = "STATIC", lease_length = 1, refresh_interval = 1 }
[[resources]]
identifier_glob = "dup"
capacity = 1
algorithm = { kind = "STATIC", lease_length = 1.5, refresh_interval = 1 }
"#;
    let e = Config::parse(bad, "bad.toml").unwrap_err();
    let text = e.to_string();
    for needle in [
        "bogus: unknown top-level key",
        "resources[0] (\"a/[*\"): identifier_glob: invalid glob",
        "resources[0] (\"a/[*\"): capacity: must be >= 0, got -1",
        "safe_capacity: must be a number, got string",
        "colour: unknown field",
        "algorithm.kind: unknown algorithm kind \"FAIRSHARE\"",
        "algorithm.lease_length: must be >= refresh_interval (5), got 3",
        "algorithm.learning_mode_duration: must be >= 0",
        "algorithm.parameters.decay_factor: must be a number in (0, 1]",
        "algorithm.parameters.speed: unknown parameter",
        "resources[1]: identifier_glob: missing (required)",
        "resources[1]: capacity: must be finite, got NaN",
        "resources[1]: algorithm.lease_length: missing (required)",
        "resources[1]: algorithm.refresh_interval: must be >= 1, got 0",
        "resources[3] (\"dup\"): algorithm.lease_length: must be a whole number of seconds, got float",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(text.starts_with("bad.toml: invalid config"), "{text}");
    assert!(e.problems.len() >= 15, "{text}");
}

#[test]
fn capacities_are_bounded() {
    let text = "[[resources]]\nidentifier_glob = \"x\"\ncapacity = 1e16\n[resources.algorithm]\nkind = \"STATIC\"\nlease_length = 2\nrefresh_interval = 1\n";
    let e = Config::parse(text, "b.toml").unwrap_err().to_string();
    assert!(e.contains("capacity: must be at most 1e15"), "{e}");
}

#[test]
fn duplicate_globs_are_rejected() {
    let text = r#"
[[resources]]
identifier_glob = "dup"
capacity = 1
algorithm = { kind = "STATIC", lease_length = 1, refresh_interval = 1 }
[[resources]]
identifier_glob = "dup"
capacity = 2
algorithm = { kind = "STATIC", lease_length = 1, refresh_interval = 1 }
"#;
    let e = Config::parse(text, "d.toml").unwrap_err().to_string();
    assert!(
        e.contains("resources[1] (\"dup\"): identifier_glob: duplicate of resources[0]"),
        "{e}"
    );
}

#[test]
fn syntax_errors_are_reported_with_position() {
    let e = Config::parse("[[resources]\n", "s.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("s.toml") && e.contains("toml:"), "{e}");
}

#[test]
fn bytes_must_be_utf8() {
    let e =
        Config::from_bytes(b"[[resources]]\nidentifier_glob = \"\xff\"\n", "etcd:/k").unwrap_err();
    assert!(
        e.to_string().contains("etcd:/k: file: not valid UTF-8"),
        "{e}"
    );
    assert!(Config::from_bytes(GOOD.as_bytes(), "good").is_ok());
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Arbitrary text never panics the parser.
        #[test]
        fn arbitrary_text(text in "\\PC{0,400}") {
            let _ = Config::parse(&text, "fuzz");
        }

        /// A good config with one line replaced by junk is either valid or
        /// rejected with at least one problem; it never panics.
        #[test]
        fn mutated_good_config(line in 0usize..40, junk in "[a-z_]{1,12} = (-?[0-9]{1,4}(\\.[0-9])?|\"[A-Z_*/]{0,10}\"|nan|inf|\\[\\]|\\{\\})") {
            let mut lines: Vec<&str> = GOOD.lines().collect();
            let i = line % lines.len();
            lines[i] = &junk;
            let text = lines.join("\n");
            match Config::parse(&text, "fuzz") {
                Ok(c) => prop_assert!(!c.templates().is_empty() || !text.contains("[[resources]]")),
                Err(e) => prop_assert!(!e.problems.is_empty()),
            }
        }
    }
}

#[test]
fn absurd_durations_are_rejected_with_resource_field_and_reason() {
    let text = |lease: &str, refresh: &str, learning: &str| {
        format!(
            "[[resources]]\nidentifier_glob = \"x\"\ncapacity = 1\n[resources.algorithm]\n\
             kind = \"FAIR_SHARE\"\nlease_length = {lease}\nrefresh_interval = {refresh}\n\
             learning_mode_duration = {learning}\n"
        )
    };
    let e = Config::parse(&text("9223372036854775807", "5", "0"), "t.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.toml: invalid config (1 problem)\n  t.toml: resources[0] (\"x\"): algorithm.lease_length: \
         must be at most 31536000 seconds (365 days), got 9223372036854775807"
    );
    let e = Config::parse(&text("60", "31536001", "0"), "t.toml").unwrap_err();
    assert_eq!(e.problems[0].field, "algorithm.refresh_interval");
    let e = Config::parse(&text("60", "5", "99999999999"), "t.toml").unwrap_err();
    assert_eq!(e.problems[0].field, "algorithm.learning_mode_duration");
    assert!(Config::parse(&text("31536000", "5", "31536000"), "t.toml").is_ok());
}

#[test]
fn a_config_without_templates_is_rejected() {
    for text in ["", "# nothing yet\n", "resources = []\n"] {
        let e = Config::parse(text, "empty.toml").unwrap_err();
        assert_eq!(e.problems.len(), 1, "{text:?}: {e}");
        assert_eq!(e.problems[0].field, "resources");
        assert!(e.problems[0].reason.contains("at least one"), "{e}");
    }
}

#[test]
fn a_config_of_more_templates_than_the_limit_is_rejected() {
    let one = |i: usize| {
        format!(
            "[[resources]]\nidentifier_glob = \"r{i}\"\ncapacity = 1\n[resources.algorithm]\n\
             kind = \"FAIR_SHARE\"\nlease_length = 60\nrefresh_interval = 5\n"
        )
    };
    let at_limit: String = (0..crate::limits::MAX_TEMPLATES).map(one).collect();
    assert!(Config::parse(&at_limit, "big.toml").is_ok());
    let over = at_limit + &one(crate::limits::MAX_TEMPLATES);
    let e = Config::parse(&over, "big.toml").unwrap_err();
    assert_eq!(e.problems.len(), 1, "{e}");
    assert_eq!(e.problems[0].field, "resources");
    assert!(e.problems[0].reason.contains("at most 50000"), "{e}");
}

#[test]
fn shadow_is_a_template_flag_and_a_whole_config_switch() {
    let c = Config::parse(GOOD, "good.toml").unwrap();
    assert!(c.templates().iter().all(|t| !t.shadow) && !c.shadows_all());
    let one = GOOD.replacen("capacity = 500\n", "capacity = 500\nshadow = true\n", 1);
    let c = Config::parse(&one, "one.toml").unwrap();
    let flags: Vec<bool> = c.templates().iter().map(|t| t.shadow).collect();
    assert_eq!(flags, [true, false, false]);
    assert!(
        c.summary().ends_with(", 1 in shadow mode"),
        "{}",
        c.summary()
    );
    let all = c.shadowing_all();
    assert!(all.shadows_all() && all.templates().iter().all(|t| t.shadow));
    let bad = GOOD.replacen("capacity = 500\n", "capacity = 500\nshadow = \"yes\"\n", 1);
    let e = Config::parse(&bad, "bad.toml").unwrap_err().to_string();
    assert!(
        e.contains("resources[0] (\"db/users/*\"): shadow: must be true or false, got string"),
        "{e}"
    );
}
