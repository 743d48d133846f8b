//! Finding the glob that matches a resource id without trying every glob:
//! each pattern is filed under its literal prefix (the text before its
//! first `*`, `?` or `[`) and, within that, under its literal suffix (the
//! text after its last `*`, `?`, `[` or `]`). A lookup only tries the
//! patterns whose prefix starts the id and whose suffix ends it, in file
//! order, stopping at the first match. The `glob` crate's semantics are
//! kept (`*` matches `/` too): both filters are necessary conditions of a
//! match, and the pattern itself decides.
//!
//! Must not: change which template matches: the result is always the
//! first pattern in file order that matches (tested against a plain scan).

use std::collections::HashMap;

/// The globs of a config, filed by literal prefix, then literal suffix.
#[derive(Debug, Clone, Default)]
pub(super) struct PatternIndex {
    /// Literal prefix → the globs with that prefix, filed by suffix.
    by_prefix: HashMap<String, Affixed>,
    /// The distinct prefix lengths, shortest first.
    lengths: Vec<usize>,
}

/// The globs sharing one literal prefix, filed by literal suffix.
#[derive(Debug, Clone, Default)]
struct Affixed {
    /// Literal suffix → (template index, pattern), in file order.
    by_suffix: HashMap<String, Vec<(usize, glob::Pattern)>>,
    /// The distinct suffix lengths, shortest first.
    lengths: Vec<usize>,
}

/// The text before a glob's first special character. A `/` right before
/// `**` is left out: `a/**` may match `a` (`**` is a whole-component
/// wildcard in the `glob` crate).
fn literal_prefix(glob: &str) -> &str {
    let end = glob.find(['*', '?', '[']).unwrap_or(glob.len());
    let prefix = &glob[..end];
    match prefix.strip_suffix('/') {
        Some(p) if glob[end..].starts_with("**") => p,
        _ => prefix,
    }
}

/// The text after a glob's last special character. `]` counts as special
/// (it may close a class); that can only make the suffix shorter, which
/// keeps it a necessary condition of a match. A `/` right after `**` is
/// left out: `**/b` matches `b`.
fn literal_suffix(glob: &str) -> &str {
    let start = glob.rfind(['*', '?', '[', ']']).map_or(0, |i| i + 1);
    let suffix = &glob[start..];
    match suffix.strip_prefix('/') {
        Some(s) if glob[..start].ends_with("**") => s,
        _ => suffix,
    }
}

/// The distinct lengths of a map's keys, shortest first.
fn key_lengths<V>(map: &HashMap<String, V>) -> Vec<usize> {
    let mut lengths: Vec<usize> = map.keys().map(String::len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    lengths
}

impl PatternIndex {
    /// Files `(glob text, pattern, template index)` in file order.
    pub fn new<'a>(patterns: impl IntoIterator<Item = (&'a str, glob::Pattern, usize)>) -> Self {
        let mut index = PatternIndex::default();
        for (text, pattern, i) in patterns {
            let affixed = index
                .by_prefix
                .entry(literal_prefix(text).to_string())
                .or_default();
            affixed
                .by_suffix
                .entry(literal_suffix(text).to_string())
                .or_default()
                .push((i, pattern));
        }
        for affixed in index.by_prefix.values_mut() {
            affixed.lengths = key_lengths(&affixed.by_suffix);
        }
        index.lengths = key_lengths(&index.by_prefix);
        index
    }

    /// The index of the first template (in file order) whose glob matches.
    pub fn find(&self, id: &str) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &len in &self.lengths {
            // None: longer than the id, or not at a char boundary.
            let Some(affixed) = id.get(..len).and_then(|p| self.by_prefix.get(p)) else {
                continue;
            };
            for &len in &affixed.lengths {
                let tail = id.len().checked_sub(len).and_then(|start| id.get(start..));
                let Some(list) = tail.and_then(|s| affixed.by_suffix.get(s)) else {
                    continue;
                };
                best = first_match(list, id, best);
            }
        }
        best
    }
}

/// The first pattern of `list` (in file order) matching `id`, if it comes
/// before `best`; otherwise `best`.
fn first_match(list: &[(usize, glob::Pattern)], id: &str, best: Option<usize>) -> Option<usize> {
    for (i, pattern) in list {
        if best.is_some_and(|b| *i >= b) {
            break;
        }
        if pattern.matches(id) {
            return Some(*i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn index(globs: &[String]) -> (PatternIndex, Vec<glob::Pattern>) {
        let patterns: Vec<glob::Pattern> = globs
            .iter()
            .map(|g| glob::Pattern::new(g).unwrap_or_else(|_| glob::Pattern::new("x").unwrap()))
            .collect();
        let idx = PatternIndex::new(
            globs
                .iter()
                .zip(&patterns)
                .enumerate()
                .map(|(i, (g, p))| (g.as_str(), p.clone(), i)),
        );
        (idx, patterns)
    }

    #[test]
    fn prefixes_stop_at_the_first_special_character() {
        assert_eq!(literal_prefix("db/users/*"), "db/users/");
        assert_eq!(literal_prefix("*"), "");
        assert_eq!(literal_prefix("a?b"), "a");
        assert_eq!(literal_prefix("q[ab]"), "q");
        assert_eq!(literal_prefix("exact"), "exact");
        assert_eq!(literal_prefix("a/**"), "a");
    }

    #[test]
    fn suffixes_start_after_the_last_special_character() {
        assert_eq!(literal_suffix("db/*/users"), "/users");
        assert_eq!(literal_suffix("*"), "");
        assert_eq!(literal_suffix("a?b"), "b");
        assert_eq!(literal_suffix("q[ab]c"), "c");
        assert_eq!(literal_suffix("a]b"), "b");
        assert_eq!(literal_suffix("exact"), "exact");
        assert_eq!(literal_suffix("**/b"), "b");
    }

    #[test]
    fn globs_sharing_a_prefix_are_told_apart_by_suffix() {
        let globs: Vec<String> = (0..1000).map(|i| format!("db/*/x{i}")).collect();
        let (idx, _) = index(&globs);
        let affixed = &idx.by_prefix["db/"];
        assert_eq!(affixed.by_suffix["/x7"].len(), 1, "one glob per suffix");
        assert_eq!(idx.find("db/a/b/x7"), Some(7));
        assert_eq!(idx.find("db/a/x1000"), None);
    }

    #[test]
    fn file_order_wins_across_prefixes() {
        let globs: Vec<String> = ["db/*", "db/users/*", "*", "é*"].map(String::from).to_vec();
        let (idx, _) = index(&globs);
        assert_eq!(idx.find("db/users/1"), Some(0));
        assert_eq!(idx.find("other"), Some(2));
        assert_eq!(
            idx.find("éa"),
            Some(2),
            "the catch-all comes first in file order"
        );
    }

    proptest! {
        /// The same answer as trying every glob in file order.
        #[test]
        fn same_as_a_plain_scan(
            globs in prop::collection::vec("[ab/]{0,3}(\\*\\*|[*?])?[ab/]{0,2}(\\*\\*|[*?]|\\[!?ab\\])?[ab/]{0,2}", 1..12),
            ids in prop::collection::vec("[ab/é]{0,6}", 1..20),
        ) {
            let (idx, patterns) = index(&globs);
            for id in &ids {
                let scan = patterns.iter().position(|p| p.matches(id));
                prop_assert_eq!(idx.find(id), scan, "id {:?} globs {:?}", id, globs);
            }
        }
    }
}
