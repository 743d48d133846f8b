//! Where a translated glob matches more than the original did: our `*`
//! also matches `/`, Go's does not. [`witness`] finds the shortest id that
//! our reading of a glob matches, the original's does not, and (when asked)
//! the original gives to another template instead, so a warning can name
//! a real id and the template that lost it.
//!
//! Globs are read as automata over token positions, with `*` either
//! crossing `/` (ours) or not (Go's); the search runs over one
//! representative character per class of characters the globs cannot tell
//! apart. Go's matcher gives up early in a few cases where a class after a
//! `*` matches `/` (see `goglob.rs`); the caller checks a witness with the
//! real matchers.
//!
//! Must not: decide what a difference means (that is `translate.rs`).

use std::collections::{HashMap, VecDeque};

use super::goglob::Token;

/// Most search states before giving up (globs in configs are short; this
/// only bounds pathological ones).
const MAX_STATES: usize = 20_000;

/// A glob read as an automaton: `star_crosses_slash` is ours, else Go's.
struct Reader<'a> {
    tokens: &'a [Token],
    star_crosses_slash: bool,
}

impl Reader<'_> {
    /// Positions reachable without reading: a `*` may match nothing.
    fn close(&self, mut set: Vec<usize>) -> Vec<usize> {
        let mut i = 0;
        while i < set.len() {
            let p = set[i];
            if matches!(self.tokens.get(p), Some(Token::Star)) && !set.contains(&(p + 1)) {
                set.push(p + 1);
            }
            i += 1;
        }
        set.sort_unstable();
        set
    }

    fn start(&self) -> Vec<usize> {
        self.close(vec![0])
    }

    fn step(&self, set: &[usize], c: char) -> Vec<usize> {
        let mut next = Vec::new();
        for &p in set {
            let target = match self.tokens.get(p) {
                Some(Token::Lit(l)) if *l == c => p + 1,
                Some(Token::Any) if c != '/' => p + 1,
                Some(Token::Star) if c != '/' || self.star_crosses_slash => p,
                Some(Token::Class { negated, ranges }) => {
                    if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) == *negated {
                        continue;
                    }
                    p + 1
                }
                _ => continue,
            };
            if !next.contains(&target) {
                next.push(target);
            }
        }
        self.close(next)
    }

    fn accepts(&self, set: &[usize]) -> bool {
        set.contains(&self.tokens.len())
    }
}

/// One character from each class of characters that no literal, class or
/// `/` in `globs` tells apart; readable ones first.
fn alphabet(globs: &[&[Token]]) -> Vec<char> {
    let mut cuts: Vec<u32> = vec![0, '/' as u32, '/' as u32 + 1];
    for t in globs.iter().flat_map(|g| g.iter()) {
        match t {
            Token::Lit(c) => cuts.extend([*c as u32, *c as u32 + 1]),
            Token::Class { ranges, .. } => {
                for &(lo, hi) in ranges {
                    cuts.extend([lo as u32, hi as u32 + 1]);
                }
            }
            Token::Any | Token::Star => {}
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut reps: Vec<char> = cuts
        .iter()
        .enumerate()
        .filter_map(|(i, &lo)| {
            let end = cuts.get(i + 1).copied().unwrap_or(0x11_0000);
            let inside = |c: char| (lo..end).contains(&(c as u32));
            ['x', 'y', 'z']
                .into_iter()
                .chain('a'..='w')
                .chain('0'..='9')
                .find(|c| inside(*c))
                .or_else(|| {
                    let mut range = (lo..end.min(lo + 0x900)).filter_map(char::from_u32);
                    range
                        .clone()
                        .find(|c| !c.is_control())
                        .or_else(|| range.next())
                })
        })
        .collect();
    reps.sort_by_key(|c| (!c.is_ascii_alphanumeric(), *c != '/', *c));
    reps
}

/// The shortest id our reading of `glob` matches and Go's does not, and,
/// with `other`, that Go's reading of `other` matches.
pub fn witness(glob: &[Token], other: Option<&[Token]>) -> Option<String> {
    let ours = Reader {
        tokens: glob,
        star_crosses_slash: true,
    };
    let theirs = Reader {
        tokens: glob,
        star_crosses_slash: false,
    };
    let other = Reader {
        tokens: other.unwrap_or(&[Token::Star]),
        star_crosses_slash: other.is_none(),
    };
    let chars = alphabet(&[glob, other.tokens]);
    type State = (Vec<usize>, Vec<usize>, Vec<usize>);
    let start: State = (ours.start(), theirs.start(), other.start());
    let mut seen: HashMap<State, Option<(State, char)>> = HashMap::new();
    seen.insert(start.clone(), None);
    let mut queue = VecDeque::from([start]);
    while let Some(state) = queue.pop_front() {
        let (a, b, c) = &state;
        if ours.accepts(a) && !theirs.accepts(b) && other.accepts(c) {
            return Some(spell(seen, state));
        }
        for &ch in &chars {
            let next: State = (ours.step(a, ch), theirs.step(b, ch), other.step(c, ch));
            if next.0.is_empty() || next.2.is_empty() || seen.contains_key(&next) {
                continue;
            }
            if seen.len() >= MAX_STATES {
                return None;
            }
            seen.insert(next.clone(), Some((state.clone(), ch)));
            queue.push_back(next);
        }
    }
    None
}

/// The characters read on the way to `state`.
fn spell<S: std::hash::Hash + Eq>(mut seen: HashMap<S, Option<(S, char)>>, mut state: S) -> String {
    let mut out = Vec::new();
    while let Some(Some((prev, c))) = seen.remove(&state) {
        out.push(c);
        state = prev;
    }
    out.iter().rev().collect()
}

#[cfg(test)]
mod tests {
    use super::super::goglob::parse;
    use super::*;

    fn w(glob: &str, other: Option<&str>) -> Option<String> {
        let other = other.map(|o| parse(o).unwrap());
        witness(&parse(glob).unwrap(), other.as_deref())
    }

    #[test]
    fn finds_the_ids_a_star_now_takes() {
        assert_eq!(w("*", None).as_deref(), Some("/"));
        assert_eq!(w("db/*", None).as_deref(), Some("db//"));
        assert_eq!(w("db*", Some("db/*/y")).as_deref(), Some("db//y"));
        assert_eq!(w("db*", Some("db/q")).as_deref(), Some("db/q"));
        assert_eq!(w("a*c", Some("a?c")), None, "'?' never matches '/'");
        assert_eq!(w("db*", Some("*")), None, "Go's '*' never matches '/'");
        assert_eq!(w("exact", None), None, "no '*', no difference");
        assert_eq!(w("a?c", None), None);
    }

    /// Every id over {a, b, /} up to 4 characters long.
    fn ids() -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = all.clone();
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|s| ['a', 'b', '/'].map(|c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    proptest::proptest! {
        /// A witness is a real difference, and there is one whenever a
        /// short id shows a difference.
        #[test]
        fn witnesses_are_sound_and_found(glob in "[ab/*?]{0,5}", other in "[ab/*?]{0,5}") {
            use super::super::goglob::{go_match, to_ours};
            let (g, o) = (parse(&glob).unwrap(), parse(&other).unwrap());
            let ours = glob::Pattern::new(&to_ours(&g).unwrap()).unwrap();
            let differs = |id: &str| ours.matches(id) && go_match(&glob, id) == Ok(false);
            let taken = |id: &str| differs(id) && go_match(&other, id) == Ok(true);
            match witness(&g, Some(&o)) {
                Some(id) => proptest::prop_assert!(taken(&id), "{glob:?} {other:?} {id:?}"),
                None => proptest::prop_assert!(!ids().iter().any(|id| taken(id)), "{glob:?} {other:?}"),
            }
            match witness(&g, None) {
                Some(id) => proptest::prop_assert!(differs(&id), "{glob:?} {id:?}"),
                None => proptest::prop_assert!(!ids().iter().any(|id| differs(id)), "{glob:?}"),
            }
        }
    }

    #[test]
    fn alphabet_keeps_one_character_per_class() {
        let tokens = parse("é[a-c]/").unwrap();
        let chars = alphabet(&[&tokens]);
        for c in ['x', 'a', '/', 'é'] {
            assert!(chars.contains(&c), "{c:?} in {chars:?}");
        }
        assert!(!chars.contains(&'b'), "a..c is one class: {chars:?}");
    }
}
