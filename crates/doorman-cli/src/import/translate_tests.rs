use super::super::{Finding, Level};
use super::*;

fn algo(kind: i64, lease: i64, refresh: i64) -> Option<RawAlgorithm> {
    Some(RawAlgorithm {
        kind: Some(kind),
        lease_length: Some(lease),
        refresh_interval: Some(refresh),
        ..RawAlgorithm::default()
    })
}

fn tpl(glob: &str, capacity: f64) -> RawTemplate {
    RawTemplate {
        glob: Some(glob.into()),
        capacity: Some(capacity),
        algorithm: algo(3, 60, 5),
        ..RawTemplate::default()
    }
}

fn run(raw: &[RawTemplate]) -> (Vec<OutTemplate>, Vec<Finding>) {
    let mut out = Findings::default();
    let t = templates(raw, &mut out);
    (t, out.list)
}

fn find<'a>(
    f: &'a [Finding],
    level: Level,
    index: Option<usize>,
    needle: &str,
) -> Option<&'a Finding> {
    f.iter().find(|f| {
        f.level == level && f.resource.as_ref().map(|r| r.0) == index && f.message.contains(needle)
    })
}

#[test]
fn the_originals_own_checks_are_errors() {
    let mut no_times = tpl("b", 1.0);
    no_times.algorithm.as_mut().unwrap().refresh_interval = None;
    let star_first = RawTemplate {
        algorithm: None,
        ..tpl("*", 1.0)
    };
    let raw = [
        star_first,
        tpl("a[", 1.0),
        no_times,
        RawTemplate {
            algorithm: algo(3, 5, 10),
            ..tpl("c", 1.0)
        },
    ];
    let (_, f) = run(&raw);
    for (index, needle) in [
        (Some(0), "the \"*\" entry must have one"),
        (Some(0), "the \"*\" entry must be the last one"),
        (Some(1), "malformed glob: the original refuses the file"),
        (
            Some(2),
            "lease_length and refresh_interval are both required",
        ),
        (
            Some(3),
            "lease_length (5) must be at least refresh_interval (10)",
        ),
    ] {
        assert!(
            find(&f, Level::Error, index, needle).is_some(),
            "{index:?} {needle}: {f:#?}"
        );
    }
    let (_, f) = run(&[tpl("a", 1.0)]);
    assert!(
        find(&f, Level::Error, None, "no \"*\" entry").is_some(),
        "{f:#?}"
    );
}

#[test]
fn what_crashes_the_original_server_is_an_error() {
    let raw = [
        RawTemplate {
            algorithm: None,
            ..tpl("a", 1.0)
        },
        RawTemplate {
            algorithm: algo(7, 60, 5),
            ..tpl("b", 1.0)
        },
        RawTemplate {
            capacity: None,
            ..tpl("c", 1.0)
        },
        RawTemplate {
            capacity: None,
            safe_capacity: Some(2.0),
            ..tpl("d", 1.0)
        },
        tpl("*", 1.0),
    ];
    let (t, f) = run(&raw);
    assert!(
        find(&f, Level::Error, Some(0), "crashes on the first request").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Error, Some(1), "7 is not an algorithm").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Error, Some(2), "missing (and no safe_capacity)").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Warning, Some(3), "the original used 0").is_some(),
        "{f:#?}"
    );
    assert_eq!(t.iter().map(|t| t.from).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(t[0].capacity, 0.0);
}

#[test]
fn templates_that_never_matched_are_dropped() {
    let raw = [
        tpl("a", 1.0),
        RawTemplate {
            glob: None,
            ..tpl("", 2.0)
        },
        tpl("a*[", 3.0),
        tpl("a", 4.0),
        tpl("[b-a]", 5.0),
        tpl("\\a", 6.0),
        tpl("*", 7.0),
    ];
    let (t, f) = run(&raw);
    assert_eq!(t.iter().map(|t| t.capacity).collect::<Vec<_>>(), [1.0, 7.0]);
    for (index, needle) in [
        (1, "missing or empty"),
        (2, "the original's check does not reach"),
        (3, "the same glob as resources[0]"),
        (4, "holds no character"),
        (5, "only the id spelled exactly \"\\\\a\""),
    ] {
        assert!(
            find(&f, Level::Warning, Some(index), needle).is_some(),
            "{index} {needle}: {f:#?}"
        );
    }
    assert!(f.iter().all(|f| f.level != Level::Error), "{f:#?}");
}

#[test]
fn values_ours_cannot_hold_are_rewritten_or_dropped() {
    let mut t = tpl("*", 10.0);
    t.safe_capacity = Some(-1.0);
    t.description = Some("d".into());
    let a = t.algorithm.as_mut().unwrap();
    a.learning_mode_duration = Some(-3);
    a.parameters = vec![
        (Some("decay_factor".into()), Some("0.75".into())),
        (Some("decay_factor".into()), Some("2".into())),
        (Some("window".into()), Some("5".into())),
    ];
    let (out, f) = run(&[t]);
    let o = &out[0];
    assert_eq!((o.safe_capacity, o.learning_mode_duration), (None, Some(0)));
    assert_eq!(o.decay_factor.as_deref(), Some("0.75"));
    assert_eq!(
        (o.kind, o.lease_length, o.refresh_interval),
        ("FAIR_SHARE", 60, 5)
    );
    assert!(
        find(&f, Level::Warning, Some(0), "Fallback::Optimistic").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Note, Some(0), "-3 written as 0").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Note, Some(0), "decay_factor = \"0.75\" carried").is_some(),
        "{f:#?}"
    );
    assert!(find(
        &f,
        Level::Warning,
        Some(0),
        "\"decay_factor\" = \"2\" not carried"
    )
    .is_some());
    assert!(find(
        &f,
        Level::Warning,
        Some(0),
        "\"window\" = \"5\" not carried"
    )
    .is_some());
}

#[test]
fn globs_are_rewritten_and_star_differences_named() {
    let raw = [
        tpl("db*", 1.0),
        tpl("db/*/y", 2.0),
        tpl("a?c", 3.0),
        tpl("*a[^z]*Y", 4.0),
        tpl("*", 5.0),
    ];
    let (t, f) = run(&raw);
    let globs: Vec<&str> = t.iter().map(|t| t.glob.as_str()).collect();
    assert_eq!(globs, ["db*", "db/*/y", "a[!/]c", "*a[!z]*Y", "*"]);
    let w = find(&f, Level::Warning, Some(0), "now takes ids such as").expect("db* takes db/x/y");
    assert!(
        w.message
            .contains("\"db/x/y\", which the original gave resources[1] (\"db/*/y\")"),
        "{w:?}"
    );
    assert!(
        find(&f, Level::Note, Some(1), "matched no template there").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Note, Some(2), "written as \"a[!/]c\"").is_some(),
        "{f:#?}"
    );
    assert!(
        find(&f, Level::Warning, Some(3), "a class after '*' matches '/'").is_some(),
        "{f:#?}"
    );
    let catch_all = find(
        &f,
        Level::Note,
        Some(4),
        "the catch-all also takes ids such as",
    )
    .expect("catch-all note");
    assert!(
        catch_all.message.contains("its server crashed"),
        "{catch_all:?}"
    );
    assert!(f.iter().all(|f| f.level != Level::Error), "{f:#?}");
}
