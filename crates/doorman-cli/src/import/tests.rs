use super::*;

/// Templates with distinct capacities, so a lookup names its template.
const GLOBS: &str = r#"
resources:
  - identifier_glob: "db*"
    capacity: 10
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
  - identifier_glob: "db/*/y"
    capacity: 20
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
  - identifier_glob: "a?c"
    capacity: 40
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
  - identifier_glob: "[^a]x"
    capacity: 50
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
  - identifier_glob: 'e\*'
    Capacity: 60
    algorithm: {kind: 3, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
  - identifier_glob: "f**"
    capacity: 70
    bogus: 1
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: -5, parameters: [{name: foo, value: 3}]}
  - identifier_glob: "*"
    capacity: 30
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
"#;

/// What the original server (youtube/doorman at e2b69e1, built with Go
/// 1.19.8) granted one client wanting 1000 of each id under `GLOBS`, with
/// learning off: the template's capacity. `None`: the server panicked
/// (`findConfigForResource` found no template).
const ORIGINAL_ANSWERS: [(&str, Option<f64>); 9] = [
    ("dbz", Some(10.0)),
    ("db/x/y", Some(20.0)),
    ("e*", Some(60.0)),
    ("abc", Some(40.0)),
    ("fzz", Some(70.0)),
    ("/x", Some(50.0)),
    ("a/c", None),
    ("db/q", None),
    ("zzz", Some(30.0)),
];

#[test]
fn lookups_keep_the_originals_answers_but_where_warned() {
    let imported = convert(GLOBS, "globs.yml").unwrap();
    let config = Config::parse(&imported.toml, "out.toml").unwrap();
    for (id, original) in ORIGINAL_ANSWERS {
        let ours = config.find(id).map(|t| t.capacity);
        match (id, original) {
            // Warned: db* takes db/x/y from db/*/y.
            ("db/x/y", _) => assert_eq!(ours, Some(10.0)),
            // Noted: ids the original crashed on now get a template.
            (_, None) => assert!(ours.is_some(), "{id}"),
            _ => assert_eq!(ours, original, "{id}"),
        }
    }
    let warned = imported
        .findings
        .iter()
        .find(|f| f.level == Level::Warning && f.message.contains("\"db/x/y\""));
    assert!(warned.is_some_and(|f| f.resource == Some((0, Some("db*".into())))));
    let levels: Vec<Level> = imported.findings.iter().map(|f| f.level).collect();
    assert!(!levels.contains(&Level::Error), "{:#?}", imported.findings);
    assert!(
        imported
            .summary
            .contains("7 resource templates (7 FAIR_SHARE)"),
        "{}",
        imported.summary
    );
}

#[test]
fn findings_come_in_file_order_and_as_comments() {
    let imported = convert(GLOBS, "globs.yml").unwrap();
    let order: Vec<usize> = imported
        .findings
        .iter()
        .map(|f| f.resource.as_ref().map_or(0, |(i, _)| i + 1))
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    let toml = &imported.toml;
    assert!(
        toml.starts_with("# Converted by `doorman config import`"),
        "{toml}"
    );
    assert!(toml.contains("# warning: bogus: unknown field"), "{toml}");
    assert!(toml.contains("identifier_glob = \"e[*]\""), "{toml}");
}

#[test]
fn errors_come_first_and_alone() {
    let yaml = "resources:\n- identifier_glob: a\n  capacity: 1\n  bogus: 2\n";
    let findings = convert(yaml, "x.yml").unwrap_err();
    assert_eq!(findings[0].level, Level::Error, "{findings:#?}");
    assert!(findings
        .iter()
        .any(|f| f.message.contains("no \"*\" entry")));
    assert!(
        findings.iter().any(|f| f.level == Level::Warning),
        "warnings are kept"
    );
}

#[test]
fn values_only_our_parser_refuses_are_errors_named_by_their_yaml_place() {
    let yaml = "resources:\n- identifier_glob: ''\n  capacity: 1\n- identifier_glob: big\n  capacity: 1e20\n  \
                algorithm: {kind: STATIC, lease_length: 40000000, refresh_interval: 5}\n- identifier_glob: '*'\n  \
                capacity: -5\n  algorithm: {kind: STATIC, lease_length: 5, refresh_interval: 5}\n";
    let findings = convert(yaml, "x.yml").unwrap_err();
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| f.level == Level::Error)
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    for needle in [
        "resources[1] (\"big\"): capacity: must be at most 1e15, got 100000000000000000000 in our config",
        "resources[1] (\"big\"): algorithm.lease_length: must be at most 31536000 seconds",
        "resources[2] (\"*\"): capacity: must be >= 0, got -5 in our config",
    ] {
        assert!(errors.iter().any(|e| e.contains(needle)), "{needle}: {errors:#?}");
    }
}
