use super::*;

fn read_all(yaml: &str) -> (Option<Vec<RawTemplate>>, Vec<Finding>) {
    let mut out = Findings::default();
    let t = read(yaml, &mut out);
    (t, out.list)
}

fn has(findings: &[Finding], level: Level, field: &str, needle: &str) -> bool {
    findings
        .iter()
        .any(|f| f.level == level && f.field == field && f.message.contains(needle))
}

#[test]
fn reads_fields_as_the_original_decodes_them() {
    let (t, f) = read_all(
        "resources:\n- identifier_glob: 42\n  capacity: 7\n  Capacity: 5\n  description: 1.5\n  \
         algorithm: {kind: 2, lease_length: 20.0, refresh_interval: 5, parameters: [{name: x, value: 3}]}\n",
    );
    let t = &t.unwrap()[0];
    assert_eq!(t.glob.as_deref(), Some("42"), "numbers become text");
    // Verified with the original server: `capacity: 11` then `Capacity: 22`
    // gives 11 (Go writes the map sorted, "capacity" last).
    assert_eq!(t.capacity, Some(7.0), "capacity sorts after Capacity");
    assert_eq!(t.description.as_deref(), Some("1.5"));
    let a = t.algorithm.as_ref().unwrap();
    assert_eq!(a.kind, Some(2));
    assert_eq!(a.lease_length, Some(20), "a whole float is a whole number");
    assert_eq!(a.parameters, vec![(Some("x".into()), Some("3".into()))]);
    assert!(has(&f, Level::Note, "Capacity", "ignoring case"), "{f:?}");
    assert!(
        has(
            &f,
            Level::Warning,
            "capacity",
            "the original uses \"capacity\""
        ),
        "{f:?}"
    );
    assert!(
        has(
            &f,
            Level::Note,
            "algorithm.kind",
            "2 read as PROPORTIONAL_SHARE"
        ),
        "{f:?}"
    );
    assert!(f.iter().all(|f| f.resource == Some((0, Some("42".into())))));
}

#[test]
fn unknown_fields_and_nulls_are_ignored_with_a_word() {
    let (t, f) = read_all(
        "version: 3\nresources:\n- identifier_glob: a\n  capacity: ~\n  owner: me\n  \
         algorithm: {kind: STATIC, lease_length: 20, refresh_interval: 5, color: red}\n",
    );
    let t = &t.unwrap()[0];
    assert_eq!(t.capacity, None);
    assert!(has(&f, Level::Warning, "version", "unknown field"), "{f:?}");
    assert!(has(&f, Level::Warning, "owner", "unknown field"), "{f:?}");
    assert!(
        has(&f, Level::Warning, "algorithm.color", "unknown field"),
        "{f:?}"
    );
    assert!(f.iter().all(|f| f.level != Level::Error), "{f:?}");
}

#[test]
fn what_the_original_refuses_is_an_error() {
    let (_, f) = read_all(
        "resources:\n- identifier_glob: [a]\n  capacity: \"100\"\n  \
         algorithm: {kind: FAST, lease_length: 2.5, refresh_interval: true}\n- ~\n- 7\n",
    );
    for (field, needle) in [
        ("identifier_glob", "must be text, got a list"),
        ("capacity", "must be a number, got text"),
        ("algorithm.kind", "unknown kind \"FAST\""),
        ("algorithm.lease_length", "must be a whole number, got 2.5"),
        (
            "algorithm.refresh_interval",
            "must be a whole number, got a boolean",
        ),
        ("resources", "crashes loading such a config"),
        ("resources", "must be a mapping, got a number"),
    ] {
        assert!(
            has(&f, Level::Error, field, needle),
            "{field} {needle}: {f:?}"
        );
    }
}

#[test]
fn whole_file_problems() {
    let (t, f) = read_all("resources: [\n");
    assert!(
        t.is_none() && has(&f, Level::Error, "yaml", "not valid YAML"),
        "{f:?}"
    );
    let (t, f) = read_all("- a\n- b\n");
    assert!(
        t.is_none() && has(&f, Level::Error, "yaml", "must be a mapping"),
        "{f:?}"
    );
    let (t, f) = read_all("a: 1\na: 2\n");
    assert!(
        t.is_none() && has(&f, Level::Error, "yaml", "duplicated key"),
        "{f:?}"
    );
    let (t, f) = read_all("resources: []\n---\nresources: [7]\n");
    assert_eq!(t, Some(Vec::new()));
    assert!(has(&f, Level::Warning, "yaml", "only the first"), "{f:?}");
    assert_eq!(read_all("").0, Some(Vec::new()));
    assert_eq!(read_all("# nothing\n").0, Some(Vec::new()));
}

#[test]
fn yaml_1_1_booleans_in_text_are_flagged() {
    let (t, f) = read_all("resources:\n- identifier_glob: yes\n  description: \"off\"\n");
    assert_eq!(t.unwrap()[0].glob.as_deref(), Some("yes"));
    assert!(
        has(&f, Level::Warning, "identifier_glob", "the text \"true\""),
        "{f:?}"
    );
    assert!(
        has(&f, Level::Warning, "description", "the text \"false\""),
        "{f:?}"
    );
}
