//! Finding the glob that matches a resource id without trying every glob:
//! each pattern is filed under its literal prefix (the text before its
//! first `*`, `?` or `[`), and a lookup only tries the patterns whose
//! prefix starts the id, in file order, stopping at the first match. The
//! `glob` crate's semantics are kept (`*` matches `/` too).
//!
//! Must not: change which template matches: the result is always the
//! first pattern in file order that matches (tested against a plain scan).

use std::collections::HashMap;

/// The globs of a config, filed by literal prefix.
#[derive(Debug, Clone, Default)]
pub(super) struct PatternIndex {
    /// Literal prefix → (template index, pattern), in file order.
    by_prefix: HashMap<String, Vec<(usize, glob::Pattern)>>,
    /// The distinct prefix lengths, shortest first.
    lengths: Vec<usize>,
}

/// The text before a glob's first special character.
fn literal_prefix(glob: &str) -> &str {
    let end = glob.find(['*', '?', '[']).unwrap_or(glob.len());
    &glob[..end]
}

impl PatternIndex {
    /// Files `(glob text, pattern, template index)` in file order.
    pub fn new<'a>(patterns: impl IntoIterator<Item = (&'a str, glob::Pattern, usize)>) -> Self {
        let mut index = PatternIndex::default();
        for (text, pattern, i) in patterns {
            let prefix = literal_prefix(text);
            index
                .by_prefix
                .entry(prefix.to_string())
                .or_default()
                .push((i, pattern));
        }
        index.lengths = index.by_prefix.keys().map(String::len).collect();
        index.lengths.sort_unstable();
        index.lengths.dedup();
        index
    }

    /// The index of the first template (in file order) whose glob matches.
    pub fn find(&self, id: &str) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &len in &self.lengths {
            let Some(prefix) = id.get(..len) else {
                continue; // longer than the id, or not at a char boundary
            };
            let Some(list) = self.by_prefix.get(prefix) else {
                continue;
            };
            for (i, pattern) in list {
                if best.is_some_and(|b| *i >= b) {
                    break;
                }
                if pattern.matches(id) {
                    best = Some(*i);
                    break;
                }
            }
        }
        best
    }
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
            globs in prop::collection::vec("[ab/]{0,3}[*?]?[ab/]{0,2}", 1..12),
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
