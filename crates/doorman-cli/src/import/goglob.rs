//! The original Doorman's globs: Go's `filepath.Match` on Unix, matched
//! exactly as the original server matches them ([`go_match`], which also
//! tells which malformed globs its config check catches), parsed into
//! [`Token`]s, and written in the `glob` crate syntax our config uses
//! ([`to_ours`]).
//!
//! The two syntaxes differ: Go negates a class with `^` (`[!` is a class
//! holding `!`), escapes with `\`, reads `**` as `*`, and its `*` and `?`
//! never match `/`. Everything but the `*` translates exactly (`?` becomes
//! `[!/]`); our `*` also matches `/`, which `globdiff.rs` measures.
//!
//! Must not: decide what a difference means for a config (that is
//! `translate.rs`) or do I/O.

/// One element of a parsed Go glob.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// This character.
    Lit(char),
    /// `?`: one character other than `/`.
    Any,
    /// `*` (or a run of them): any characters but `/`.
    Star,
    /// `[...]`: one character within (or, negated, outside) the ranges.
    Class {
        /// Written `[^...]`.
        negated: bool,
        /// Inclusive ranges as written (a range with lo > hi holds nothing).
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    /// Whether this token can match a `/` (a `*` cannot in Go; ours can).
    pub fn class_matches_slash(&self) -> bool {
        match self {
            Token::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= '/' && '/' <= hi) != *negated
            }
            _ => false,
        }
    }
}

/// Why Go calls a whole glob malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// A backslash with nothing after it.
    #[error("ends with a lone '\\'")]
    LoneBackslash,
    /// A `[` class that Go cannot read.
    #[error(
        "bad class at byte {at}: not closed, empty, or an unescaped '-' or ']' \
         where a character must be"
    )]
    BadClass {
        /// Where the class starts.
        at: usize,
    },
}

/// Go's `ErrBadPattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPattern;

/// `filepath.Match(pattern, name)` as the original server runs it: byte
/// by byte, committing to the first place a part after `*` fits, and
/// reporting a syntax error only in the parts it reaches.
pub fn go_match(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let mut pat = pattern.as_bytes();
    let mut name = name.as_bytes();
    'parts: while !pat.is_empty() {
        let (star, chunk, rest) = scan_chunk(pat);
        pat = rest;
        if star && chunk.is_empty() {
            return Ok(!name.contains(&b'/'));
        }
        match match_chunk(chunk, name)? {
            Some(t) if t.is_empty() || !pat.is_empty() => {
                name = t;
                continue;
            }
            _ => {}
        }
        if star {
            let mut i = 0;
            while i < name.len() && name[i] != b'/' {
                if let Some(t) = match_chunk(chunk, &name[i + 1..])? {
                    if pat.is_empty() && !t.is_empty() {
                        i += 1;
                        continue;
                    }
                    name = t;
                    continue 'parts;
                }
                i += 1;
            }
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Splits off the leading stars and the part up to the next star outside
/// a class.
fn scan_chunk(p: &[u8]) -> (bool, &[u8], &[u8]) {
    let stars = p.iter().take_while(|b| **b == b'*').count();
    let p = &p[stars..];
    let (mut in_class, mut i) = (false, 0);
    while i < p.len() {
        match p[i] {
            b'\\' if i + 1 < p.len() => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'*' if !in_class => break,
            _ => {}
        }
        i += 1;
    }
    (stars > 0, &p[..i], &p[i..])
}

/// One character as Go decodes it: a bad byte is U+FFFD, one byte long.
fn decode(b: &[u8]) -> (char, usize) {
    for len in 1..=b.len().min(4) {
        if let Ok(s) = std::str::from_utf8(&b[..len]) {
            if let Some(c) = s.chars().next() {
                return (c, len);
            }
        }
    }
    ('\u{FFFD}', 1)
}

/// Matches one part at the start of `s`: what is left of `s`, `None` when
/// it does not match; the part is checked to its end either way.
fn match_chunk<'a>(mut chunk: &[u8], mut s: &'a [u8]) -> Result<Option<&'a [u8]>, BadPattern> {
    let mut failed = false;
    while let Some(&first) = chunk.first() {
        failed |= s.is_empty();
        match first {
            b'[' => {
                let c = (!failed).then(|| {
                    let (c, n) = decode(s);
                    s = &s[n..];
                    c
                });
                let (negated, ranges, rest) = class(&chunk[1..])?;
                chunk = rest;
                let inside = c.is_some_and(|c| ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi));
                failed |= inside == negated;
            }
            b'?' => {
                if !failed {
                    failed = s[0] == b'/';
                    s = &s[decode(s).1..];
                }
                chunk = &chunk[1..];
            }
            _ => {
                if first == b'\\' {
                    chunk = &chunk[1..];
                    if chunk.is_empty() {
                        return Err(BadPattern);
                    }
                }
                if !failed {
                    failed = chunk[0] != s[0];
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    Ok((!failed).then_some(s))
}

/// A class after its `[`: negated, its ranges, and what follows its `]`.
#[allow(clippy::type_complexity)]
fn class(mut chunk: &[u8]) -> Result<(bool, Vec<(char, char)>, &[u8]), BadPattern> {
    let negated = chunk.first() == Some(&b'^');
    if negated {
        chunk = &chunk[1..];
    }
    let mut ranges = Vec::new();
    loop {
        if chunk.first() == Some(&b']') && !ranges.is_empty() {
            return Ok((negated, ranges, &chunk[1..]));
        }
        let (lo, rest) = class_char(chunk)?;
        chunk = rest;
        let mut hi = lo;
        if chunk[0] == b'-' {
            (hi, chunk) = class_char(&chunk[1..])?;
        }
        ranges.push((lo, hi));
    }
}

/// One (possibly escaped) character of a class; something must follow it.
fn class_char(chunk: &[u8]) -> Result<(char, &[u8]), BadPattern> {
    let mut c = chunk;
    match c.first() {
        None | Some(b'-') | Some(b']') => return Err(BadPattern),
        Some(b'\\') => c = &c[1..],
        Some(_) => {}
    }
    if c.is_empty() {
        return Err(BadPattern);
    }
    let (r, n) = decode(c);
    let rest = &c[n..];
    if (r == '\u{FFFD}' && n == 1) || rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((r, rest))
}

/// Parses a whole glob, or says why Go calls it malformed.
pub fn parse(glob: &str) -> Result<Vec<Token>, GlobError> {
    let bytes = glob.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let (c, n) = decode(&bytes[i..]);
        match c {
            '*' if tokens.last() == Some(&Token::Star) => {}
            '*' => tokens.push(Token::Star),
            '?' => tokens.push(Token::Any),
            '\\' => {
                let Some(next) = glob[i + 1..].chars().next() else {
                    return Err(GlobError::LoneBackslash);
                };
                tokens.push(Token::Lit(next));
                i += next.len_utf8();
            }
            '[' => {
                let (negated, ranges, rest) =
                    class(&bytes[i + 1..]).map_err(|_| GlobError::BadClass { at: i })?;
                tokens.push(Token::Class { negated, ranges });
                i = bytes.len() - rest.len();
                continue;
            }
            c => tokens.push(Token::Lit(c)),
        }
        i += n;
    }
    Ok(tokens)
}

/// The tokens in our syntax, or `None` when the glob can match nothing (a
/// class whose ranges are all empty).
pub fn to_ours(tokens: &[Token]) -> Option<String> {
    let mut out = String::new();
    for t in tokens {
        match t {
            Token::Lit(c @ ('*' | '?' | '[')) => {
                out.push('[');
                out.push(*c);
                out.push(']');
            }
            Token::Lit(c) => out.push(*c),
            Token::Any => out.push_str("[!/]"),
            Token::Star => out.push('*'),
            Token::Class { negated, ranges } => out.push_str(&class_to_ours(*negated, ranges)?),
        }
    }
    Some(out)
}

/// Sorted, merged, non-empty ranges.
fn normalize(ranges: &[(char, char)]) -> Vec<(u32, u32)> {
    let mut r: Vec<(u32, u32)> = ranges
        .iter()
        .filter(|(lo, hi)| lo <= hi)
        .map(|&(lo, hi)| (lo as u32, hi as u32))
        .collect();
    r.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in r {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

/// A class in the `glob` crate's syntax, where `]` may only come first,
/// `!` first negates, and a `-` between two characters makes a range: so
/// `]` is put first, `!` and `-` last, and ranges holding them are split.
fn class_to_ours(negated: bool, ranges: &[(char, char)]) -> Option<String> {
    let merged = normalize(ranges);
    if merged.is_empty() {
        return if negated { Some("?".into()) } else { None };
    }
    let special = ['!', '-', ']']; // in code point order, for the cuts below
    let has = |c: char| {
        merged
            .iter()
            .any(|&(lo, hi)| lo <= c as u32 && c as u32 <= hi)
    };
    let mut items = Vec::new();
    for (lo, hi) in merged.iter().copied() {
        let mut start = lo;
        for cut in special
            .map(|c| c as u32)
            .into_iter()
            .filter(|c| lo <= *c && *c <= hi)
        {
            if start < cut {
                items.push((start, cut - 1));
            }
            start = cut + 1;
        }
        if start <= hi {
            items.push((start, hi));
        }
    }
    items.sort_unstable();
    let ch = |u: u32| char::from_u32(u).unwrap_or('\u{FFFD}');
    let mut inner = String::new();
    if has(']') {
        inner.push(']');
    }
    for (lo, hi) in items {
        inner.push(ch(lo));
        if hi > lo {
            inner.push('-');
            inner.push(ch(hi));
        }
    }
    if has('!') {
        inner.push('!');
    }
    if has('-') {
        inner.push('-');
    }
    match (negated, inner.as_str()) {
        (false, "!") => Some("!".into()),
        (false, "!-") => Some("[-!]".into()),
        (false, _) => Some(format!("[{inner}]")),
        (true, _) => Some(format!("[!{inner}]")),
    }
}

#[cfg(test)]
#[path = "goglob_tests.rs"]
mod tests;
