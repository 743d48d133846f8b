use proptest::prelude::*;

use super::*;

/// Each row's answer is what Go 1.19's `filepath.Match` returned (the
/// original server binary was built with Go 1.19.8).
#[test]
fn matches_as_go_does() {
    let cases: &[(&str, &str, Result<bool, BadPattern>)] = &[
        ("*", "abc", Ok(true)),
        ("*", "a/b", Ok(false)),
        ("*", "", Ok(true)),
        ("db/*", "db/x", Ok(true)),
        ("db/*", "db/x/y", Ok(false)),
        ("db*", "db/x", Ok(false)),
        ("db/*/y", "db/x/y", Ok(true)),
        ("a?c", "abc", Ok(true)),
        ("a?c", "a/c", Ok(false)),
        ("[^a]x", "/x", Ok(true)),
        ("[^a]x", "ax", Ok(false)),
        ("[a-c]", "b", Ok(true)),
        ("[a-c]", "d", Ok(false)),
        ("e\\*", "e*", Ok(true)),
        ("e\\*", "ex", Ok(false)),
        ("f**", "fzz", Ok(true)),
        ("f**", "f/z", Ok(false)),
        ("[!a]", "!", Ok(true)),
        ("[!a]", "b", Ok(false)),
        ("[\\]a]", "]", Ok(true)),
        ("[b-a]", "a", Ok(false)),
        ("[^b-a]", "a", Ok(true)),
        ("*a[^z]*Y", "aba/Y", Ok(false)),
        ("*a[^z]Y", "aba/Y", Ok(true)),
        ("a*[", " ", Ok(false)),
        ("a*[", "ab", Err(BadPattern)),
        ("[]a]", "]", Err(BadPattern)),
        ("[^]", "x", Err(BadPattern)),
        ("a\\", "a", Err(BadPattern)),
        ("[a-]", "a", Err(BadPattern)),
        ("[", " ", Err(BadPattern)),
        ("[-a]", "a", Err(BadPattern)),
        ("a[", " ", Err(BadPattern)),
        (" [", " ", Err(BadPattern)),
        ("*[", " ", Err(BadPattern)),
        ("x*", "xé/", Ok(false)),
        ("?", "é", Ok(true)),
        ("[é-ë]", "ê", Ok(true)),
        ("*.log", "x.log", Ok(true)),
        ("*.log", "a/x.log", Ok(false)),
        ("a*b*c", "axxbyyc", Ok(true)),
        ("a*b*c", "axxbyy/c", Ok(false)),
        ("", "", Ok(true)),
        ("", " ", Ok(false)),
        ("\\", " ", Err(BadPattern)),
        ("[a", " ", Err(BadPattern)),
        ("[a-", " ", Err(BadPattern)),
        ("[\\", " ", Err(BadPattern)),
        (" *[", " ", Err(BadPattern)),
    ];
    for (pattern, name, want) in cases {
        assert_eq!(go_match(pattern, name), *want, "{pattern:?} vs {name:?}");
    }
}

#[test]
fn parse_rejects_what_go_calls_malformed() {
    for bad in [
        "a*[", "[]a]", "[^]", "a\\", "[a-]", "[", "[-a]", "[a", "[\\",
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        parse("a**?\\*[^x-z]").unwrap(),
        vec![
            Token::Lit('a'),
            Token::Star,
            Token::Any,
            Token::Lit('*'),
            Token::Class {
                negated: true,
                ranges: vec![('x', 'z')]
            },
        ]
    );
}

fn ours(go: &str) -> Option<String> {
    to_ours(&parse(go).unwrap())
}

#[test]
fn translates_to_the_glob_crate_syntax() {
    for (go, want) in [
        ("*", "*"),
        ("db/*", "db/*"),
        ("f**", "f*"),
        ("a?c", "a[!/]c"),
        ("[^a]x", "[!a]x"),
        ("e\\*", "e[*]"),
        ("\\[x\\]", "[[]x]"),
        ("\\?", "[?]"),
        ("[!a]", "[a!]"),
        ("[!]", "!"),
        ("[!\\-]", "[-!]"),
        ("[\\]a]", "[]a]"),
        ("[a\\-z]", "[az-]"),
        ("[ -/]", "[ \"-,.-/!-]"),
        ("[^b-a]", "?"),
        ("[c-ea-b]", "[a-e]"),
    ] {
        assert_eq!(ours(go).as_deref(), Some(want), "{go:?}");
        assert!(glob::Pattern::new(want).is_ok(), "{want:?}");
    }
    assert_eq!(
        ours("[b-a]x"),
        None,
        "a class holding nothing matches nothing"
    );
}

/// A Go class with every character escaped, ranges included.
fn go_class() -> impl Strategy<Value = String> {
    let ch = prop::sample::select(vec!['a', 'b', '/', '!', '-', ']', '^', '[']);
    let items = prop::collection::vec((ch.clone(), prop::option::of(ch)), 1..4);
    (any::<bool>(), items).prop_map(|(negated, items)| {
        let body: String = items
            .iter()
            .map(|(lo, hi)| match hi {
                Some(hi) => format!("\\{lo}-\\{hi}"),
                None => format!("\\{lo}"),
            })
            .collect();
        format!("[{}{body}]", if negated { "^" } else { "" })
    })
}

fn go_pattern() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec!["a", "b", "/", "!", "-", "]", "*", "?", "\\*", "\\["])
            .prop_map(String::from),
        go_class(),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

proptest! {
    /// On ids without `/` our translation matches exactly what the original
    /// matches; with `/` it matches at least that.
    #[test]
    fn translation_keeps_every_match(
        go in go_pattern(),
        id in "[ab/!\\-\\]*\\[?]{0,6}",
    ) {
        let Ok(tokens) = parse(&go) else { return Ok(()); };
        let theirs = go_match(&go, &id);
        prop_assert!(theirs.is_ok(), "a valid pattern never errors: {go:?}");
        let theirs = theirs.unwrap_or(false);
        let Some(text) = to_ours(&tokens) else {
            prop_assert!(!theirs);
            return Ok(());
        };
        let pattern = glob::Pattern::new(&text);
        prop_assert!(pattern.is_ok(), "{go:?} -> {text:?}");
        let mine = pattern.map(|p| p.matches(&id)).unwrap_or(false);
        if id.contains('/') {
            prop_assert!(mine || !theirs, "{go:?} -> {text:?} on {id:?}");
        } else {
            prop_assert_eq!(mine, theirs, "{:?} -> {:?} on {:?}", go, text, id);
        }
    }
}
