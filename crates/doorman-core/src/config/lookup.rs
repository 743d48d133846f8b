//! Finding the glob that matches a resource id without trying every glob:
//! each pattern is filed under its literal prefix (the text before its
//! first `*`, `?` or `[`) and, within that, under its literal suffix (the
//! text after its last `*`, `?`, `[` or `]`). A lookup only tries the
//! patterns whose prefix starts the id and whose suffix ends it, in file
//! order, stopping at the first match. Globs that share both (`db/*/x1/*`,
//! `db/*/x2/*`, …) are told apart, once there are more than
//! [`MIDDLE_FILTER_FROM`] of them, by a literal from their middle (`/x1/`):
//! one Aho–Corasick pass over the id finds which of those literals it
//! contains, and only their globs (and the few without such a literal) are
//! tried. The `glob` crate's semantics are kept (`*` matches `/` too):
//! every filter is a necessary condition of a match, and the pattern itself
//! decides.
//!
//! Must not: change which template matches: the result is always the
//! first pattern in file order that matches (tested against a plain scan).

use std::collections::HashMap;

use aho_corasick::AhoCorasick;

/// Groups of more globs than this (sharing their literal prefix and
/// suffix) are filtered by a literal from their middle.
pub(super) const MIDDLE_FILTER_FROM: usize = 8;

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
    /// Literal suffix → the globs with this prefix and that suffix.
    by_suffix: HashMap<String, Group>,
    /// The distinct suffix lengths, shortest first.
    lengths: Vec<usize>,
}

/// The globs sharing one literal prefix and one literal suffix.
#[derive(Debug, Clone, Default)]
struct Group {
    /// (template index, pattern), in file order.
    all: Vec<(usize, glob::Pattern)>,
    /// For a large group: which of them an id may match, by middle literal.
    middles: Option<Middles>,
}

/// A large group's globs, filed by a literal each must find in the id.
#[derive(Debug, Clone)]
struct Middles {
    /// Over the distinct literals.
    automaton: AhoCorasick,
    /// Literal (the automaton's pattern id) → positions in `Group::all`.
    by_literal: Vec<Vec<usize>>,
    /// Positions of the globs without a usable middle literal.
    residual: Vec<usize>,
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

/// One piece of a glob, as the `glob` crate reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece {
    /// `?`, `*` or `**` (`true` for `**`).
    Wild(bool),
    /// A character class `[…]`.
    Class,
    /// Literal text: the byte range.
    Text(usize, usize),
}

/// The glob's pieces; `None` if a class does not close (not a valid glob).
fn pieces(glob: &str) -> Option<Vec<Piece>> {
    let b = glob.as_bytes();
    let (mut out, mut i, mut text) = (Vec::new(), 0, None::<usize>);
    let flush = |out: &mut Vec<Piece>, text: &mut Option<usize>, end: usize| {
        if let Some(start) = text.take() {
            out.push(Piece::Text(start, end));
        }
    };
    while i < b.len() {
        match b[i] {
            b'*' | b'?' => {
                flush(&mut out, &mut text, i);
                let double = b[i] == b'*' && b.get(i + 1) == Some(&b'*');
                out.push(Piece::Wild(double));
                i += if double { 2 } else { 1 };
            }
            b'[' => {
                flush(&mut out, &mut text, i);
                // `[!`, then a `]` right away is a member, not the end.
                let mut j = i + 1 + usize::from(b.get(i + 1) == Some(&b'!'));
                j += usize::from(b.get(j) == Some(&b']'));
                let close = j + b.get(j..)?.iter().position(|&c| c == b']')?;
                out.push(Piece::Class);
                i = close + 1;
            }
            _ => {
                text.get_or_insert(i);
                i += 1;
            }
        }
    }
    flush(&mut out, &mut text, b.len());
    Some(out)
}

/// The literal texts of a glob that lie between two of its wildcards or
/// classes (never its prefix or suffix), without a `/` next to a `**`
/// (which may match no component): any id the glob matches contains each.
fn middle_literals(glob: &str) -> Vec<&str> {
    let Some(p) = pieces(glob) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for w in p.windows(3) {
        let (before, (a, b), after) = match *w {
            [Piece::Text(..), _, _] | [_, _, Piece::Text(..)] => continue,
            [before, Piece::Text(a, b), after] => (before, (a, b), after),
            _ => continue,
        };
        let mut t = &glob[a..b];
        if before == Piece::Wild(true) {
            t = t.strip_prefix('/').unwrap_or(t);
        }
        if after == Piece::Wild(true) {
            t = t.strip_suffix('/').unwrap_or(t);
        }
        if !t.is_empty() {
            out.push(t);
        }
    }
    out
}

/// The distinct lengths of a map's keys, shortest first.
fn key_lengths<V>(map: &HashMap<String, V>) -> Vec<usize> {
    let mut lengths: Vec<usize> = map.keys().map(String::len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    lengths
}

impl Group {
    /// Builds the middle-literal filter when the group is larger than
    /// `from` (and the literals can be compiled). Each glob is filed under
    /// the middle literal the fewest globs of the group have (the longest
    /// among those), so that one common segment does not gather them all.
    fn finish(&mut self, from: usize) {
        if self.all.len() <= from {
            return;
        }
        let each: Vec<Vec<&str>> = self
            .all
            .iter()
            .map(|(_, p)| middle_literals(p.as_str()))
            .collect();
        let mut count: HashMap<&str, usize> = HashMap::new();
        for lits in &each {
            let mut distinct = lits.clone();
            distinct.sort_unstable();
            distinct.dedup();
            for l in distinct {
                *count.entry(l).or_default() += 1;
            }
        }
        let mut literals: Vec<&str> = Vec::new();
        let mut of: HashMap<&str, usize> = HashMap::new();
        let (mut by_literal, mut residual) = (Vec::<Vec<usize>>::new(), Vec::new());
        for (pos, lits) in each.iter().enumerate() {
            let rarest = lits
                .iter()
                .min_by_key(|l| (count[*l], std::cmp::Reverse(l.len())));
            match rarest {
                Some(l) => {
                    let id = *of.entry(l).or_insert_with(|| {
                        literals.push(l);
                        by_literal.push(Vec::new());
                        literals.len() - 1
                    });
                    by_literal[id].push(pos);
                }
                None => residual.push(pos),
            }
        }
        if let Ok(automaton) = AhoCorasick::new(&literals) {
            self.middles = Some(Middles {
                automaton,
                by_literal,
                residual,
            });
        }
    }

    /// The positions in `all` of the globs that may match `id`, in order.
    fn candidates(&self, id: &str) -> Option<Vec<usize>> {
        let m = self.middles.as_ref()?;
        let mut hits: Vec<usize> = m
            .automaton
            .find_overlapping_iter(id)
            .map(|hit| hit.pattern().as_usize())
            .collect();
        hits.sort_unstable();
        hits.dedup();
        let mut out = m.residual.clone();
        for l in hits {
            out.extend_from_slice(&m.by_literal[l]);
        }
        out.sort_unstable();
        Some(out)
    }

    /// The first glob of the group (in file order) matching `id`, if it
    /// comes before `best`; otherwise `best`. Counts the globs tried.
    fn first_match(&self, id: &str, best: Option<usize>, tried: &mut usize) -> Option<usize> {
        let positions = self.candidates(id);
        let entries: Box<dyn Iterator<Item = &(usize, glob::Pattern)>> = match &positions {
            Some(p) => Box::new(p.iter().map(|&pos| &self.all[pos])),
            None => Box::new(self.all.iter()),
        };
        for (i, pattern) in entries {
            if best.is_some_and(|b| *i >= b) {
                break;
            }
            *tried += 1;
            if pattern.matches(id) {
                return Some(*i);
            }
        }
        best
    }
}

impl PatternIndex {
    /// Files `(pattern, template index)` in file order.
    pub fn new(patterns: impl IntoIterator<Item = (glob::Pattern, usize)>) -> Self {
        Self::with_filter_from(patterns, MIDDLE_FILTER_FROM)
    }

    /// As [`PatternIndex::new`], filtering groups of more than `from` globs
    /// by middle literal.
    fn with_filter_from(
        patterns: impl IntoIterator<Item = (glob::Pattern, usize)>,
        from: usize,
    ) -> Self {
        let mut index = PatternIndex::default();
        for (pattern, i) in patterns {
            let text = pattern.as_str();
            let (prefix, suffix) = (literal_prefix(text), literal_suffix(text));
            let affixed = index.by_prefix.entry(prefix.to_string()).or_default();
            let group = affixed.by_suffix.entry(suffix.to_string()).or_default();
            group.all.push((i, pattern));
        }
        for affixed in index.by_prefix.values_mut() {
            for group in affixed.by_suffix.values_mut() {
                group.finish(from);
            }
            affixed.lengths = key_lengths(&affixed.by_suffix);
        }
        index.lengths = key_lengths(&index.by_prefix);
        index
    }

    /// The index of the first template (in file order) whose glob matches.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.find_counting(id).0
    }

    /// [`PatternIndex::find`], and how many globs it tried.
    pub fn find_counting(&self, id: &str) -> (Option<usize>, usize) {
        let (mut best, mut tried) = (None, 0);
        for &len in &self.lengths {
            // None: longer than the id, or not at a char boundary.
            let Some(affixed) = id.get(..len).and_then(|p| self.by_prefix.get(p)) else {
                continue;
            };
            for &len in &affixed.lengths {
                let tail = id.len().checked_sub(len).and_then(|start| id.get(start..));
                let Some(group) = tail.and_then(|s| affixed.by_suffix.get(s)) else {
                    continue;
                };
                best = group.first_match(id, best, &mut tried);
            }
        }
        (best, tried)
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
        let idx = PatternIndex::new(patterns.iter().cloned().zip(0..));
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
        assert_eq!(affixed.by_suffix["/x7"].all.len(), 1, "one glob per suffix");
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

    #[test]
    fn middle_literals_lie_between_wildcards_or_classes_and_never_in_a_class() {
        assert_eq!(middle_literals("db/*/x1/*"), ["/x1/"]);
        assert_eq!(middle_literals("*a*bcd?e*"), ["a", "bcd", "e"]);
        // Prefix and suffix are not middles.
        assert!(middle_literals("db/*").is_empty());
        assert!(middle_literals("*x").is_empty());
        // Text inside a class is not a literal; text next to one is.
        assert!(middle_literals("*[?ab?]*").is_empty());
        assert_eq!(middle_literals("*[a]bc*"), ["bc"]);
        assert_eq!(middle_literals("*[]x]*y*"), ["y"]);
        assert_eq!(middle_literals("*[!]x]*y*"), ["y"]);
        assert_eq!(middle_literals("t/*/s1[0-9]/*"), ["/s1", "/"]);
        // A `**` may match no component: the `/` next to it is optional.
        assert_eq!(middle_literals("**/mid/**"), ["mid"]);
        assert_eq!(middle_literals("a/**/mid/*"), ["mid/"]);
        assert!(middle_literals("*[ab").is_empty(), "not a valid glob");
    }

    /// The shapes the limits are documented for (docs/operations.md):
    /// 50 000 templates, each lookup of an id no glob matches (every
    /// candidate is tried) tries at most a handful of globs.
    #[test]
    fn a_lookup_at_the_documented_limits_tries_a_handful_of_globs() {
        type Shape = (&'static str, fn(usize) -> String, &'static str);
        let shapes: [Shape; 6] = [
            ("distinct prefixes", |i| format!("svc{i}/db/*"), "svc7/db"),
            ("distinct suffixes", |i| format!("db/*/x{i}"), "db/a/x50000"),
            (
                "distinct middles",
                |i| format!("db/*/x{i}/*"),
                "db/a/x50000/b",
            ),
            (
                "middles, one shared",
                |i| format!("*/t{}/*/u{i}/*", i % 3),
                "a/t1/b/u77/c/x",
            ),
            (
                "a long common middle",
                |i| format!("db/*/common-long-segment/*/x{i}/*"),
                "db/a/common-long-segment/b/x50000/c",
            ),
            (
                "middles next to classes",
                |i| format!("t/*/s{i}[0-9]/*"),
                "t/a/s50000x/b",
            ),
        ];
        for (name, glob, unknown) in shapes {
            let globs: Vec<String> = (0..50_000).map(glob).collect();
            let (idx, _) = index(&globs);
            let (found, tried) = idx.find_counting(unknown);
            assert!(tried <= 8, "{name}: {unknown} tried {tried} globs");
            let (found_known, _) =
                idx.find_counting(&globs[4242].replace("[0-9]", "5").replace('*', "z"));
            assert_eq!(found_known, Some(4242), "{name}");
            if name != "middles, one shared" {
                assert_eq!(found, None, "{name}");
            }
        }
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

        /// With the middle-literal filter on every group (not only large
        /// ones) and globs of up to four wildcards and classes: still the
        /// same answer as a plain scan.
        #[test]
        fn the_middle_filter_changes_no_answer(
            globs in prop::collection::vec("([ab/]{0,2}(\\*\\*|[*?]|\\[!?[ab\\]?]{1,2}\\])){1,4}[ab/]{0,2}", 1..16),
            ids in prop::collection::vec("[ab/?*é\\]\\[]{0,8}", 1..24),
        ) {
            let patterns: Vec<Option<glob::Pattern>> =
                globs.iter().map(|g| glob::Pattern::new(g).ok()).collect();
            let valid = patterns
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.clone().map(|p| (p, i)));
            let idx = PatternIndex::with_filter_from(valid, 0);
            for id in &ids {
                let scan = patterns
                    .iter()
                    .position(|p| p.as_ref().is_some_and(|p| p.matches(id)));
                prop_assert_eq!(idx.find(id), scan, "id {:?} globs {:?}", id, globs);
            }
        }
    }
}
