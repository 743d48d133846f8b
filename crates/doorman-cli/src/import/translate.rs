//! What an original config means, template by template, and how much of
//! it ours can hold. Errors: what the original refuses
//! (`validateResourceRepository`: well-formed globs, lease and refresh
//! times, a last `*` entry with an algorithm) or crashes on at the first
//! request (no algorithm, an unknown kind number, no capacity and no safe
//! capacity). Dropped with a warning: templates that never matched there
//! (empty, malformed or repeated globs). Rewritten: globs into our syntax,
//! kinds by name, a negative learning time as 0. Measured: where our `*`,
//! which also matches `/`, takes ids another template had.
//!
//! Must not: parse YAML, write TOML, or do I/O.

use super::globdiff::witness;
use super::goglob::{go_match, parse, to_ours, Token};
use super::read::{RawAlgorithm, RawTemplate, KINDS};
use super::{Findings, Level};

/// A template to write, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct OutTemplate {
    /// Its index in the YAML.
    pub from: usize,
    /// Its glob as written there.
    pub raw_glob: String,
    /// Its glob in our syntax.
    pub glob: String,
    /// Capacity.
    pub capacity: f64,
    /// Safe capacity, when carried.
    pub safe_capacity: Option<f64>,
    /// Description.
    pub description: Option<String>,
    /// Algorithm name.
    pub kind: &'static str,
    /// Seconds.
    pub lease_length: i64,
    /// Seconds.
    pub refresh_interval: i64,
    /// Seconds, when given.
    pub learning_mode_duration: Option<i64>,
    /// `decay_factor`, when given and valid.
    pub decay_factor: Option<String>,
}

/// A template that matches something, with its parsed glob.
struct Live<'a> {
    index: usize,
    raw: &'a RawTemplate,
    glob: &'a str,
    tokens: Vec<Token>,
    ours: String,
}

/// The templates ours gets, in file order; findings in `out`.
pub fn templates(raw: &[RawTemplate], out: &mut Findings) -> Vec<OutTemplate> {
    original_checks(raw, out);
    let live = live_templates(raw, out);
    for (n, t) in live.iter().enumerate() {
        star_differences(&live, n, out);
        if t.glob != t.ours {
            let why = format!("written as {:?}: the same ids match (Go's `?` never matches '/', `[^` negates, `\\` escapes)", t.ours);
            out.at(Level::Note, t.index, t.glob, "identifier_glob", why);
        }
    }
    live.iter().filter_map(|t| carry(t, out)).collect()
}

/// The original's own config check: what it refuses, it refuses whole.
fn original_checks(raw: &[RawTemplate], out: &mut Findings) {
    let refuses = "the original refuses the file";
    for (i, t) in raw.iter().enumerate().filter(|(_, t)| !t.unreadable) {
        let glob = t.glob.as_deref().unwrap_or("");
        if go_match(glob, " ").is_err() {
            out.at(
                Level::Error,
                i,
                glob,
                "identifier_glob",
                format!("malformed glob: {refuses}"),
            );
        }
        if let Some(a) = &t.algorithm {
            for why in time_problems(a) {
                let field = if why.starts_with("refresh") {
                    "algorithm.refresh_interval"
                } else {
                    "algorithm.lease_length"
                };
                out.at(Level::Error, i, glob, field, format!("{why}: {refuses}"));
            }
        }
        if glob == "*" && t.algorithm.is_none() {
            out.at(
                Level::Error,
                i,
                glob,
                "algorithm",
                format!("the \"*\" entry must have one: {refuses}"),
            );
        }
        if glob == "*" && i + 1 != raw.len() {
            out.at(
                Level::Error,
                i,
                glob,
                "identifier_glob",
                format!("the \"*\" entry must be the last one: {refuses}"),
            );
        }
    }
    if !raw.iter().any(|t| t.glob.as_deref() == Some("*")) {
        let why = format!("no \"*\" entry (the catch-all, required last): {refuses}");
        out.top(Level::Error, "resources", why);
    }
}

fn time_problems(a: &RawAlgorithm) -> Vec<String> {
    let (Some(lease), Some(refresh)) = (a.lease_length, a.refresh_interval) else {
        return vec!["lease_length and refresh_interval are both required".into()];
    };
    let mut why = Vec::new();
    if refresh < 1 {
        why.push(format!(
            "refresh_interval must be at least 1 second, got {refresh}"
        ));
    }
    if lease < 1 {
        why.push(format!(
            "lease_length must be at least 1 second, got {lease}"
        ));
    }
    if lease < refresh {
        why.push(format!(
            "lease_length ({lease}) must be at least refresh_interval ({refresh})"
        ));
    }
    why
}

/// The templates that can match an id; the others are dropped with a
/// warning, as they never matched in the original either.
fn live_templates<'a>(raw: &'a [RawTemplate], out: &mut Findings) -> Vec<Live<'a>> {
    let mut live: Vec<Live<'a>> = Vec::new();
    for (index, t) in raw.iter().enumerate().filter(|(_, t)| !t.unreadable) {
        let glob = t.glob.as_deref().unwrap_or("");
        let dropped = |why: &str| format!("{why}: it never matched in the original; dropped");
        let tokens = match parse(glob) {
            Ok(_) if glob.is_empty() => {
                out.at(
                    Level::Warning,
                    index,
                    glob,
                    "identifier_glob",
                    dropped("missing or empty"),
                );
                continue;
            }
            Ok(tokens) => tokens,
            Err(e) => {
                let why = dropped(&format!(
                    "malformed ({e}), in a part the original's check does not reach"
                ));
                out.at(Level::Warning, index, glob, "identifier_glob", why);
                continue;
            }
        };
        let Some(ours) = to_ours(&tokens) else {
            out.at(
                Level::Warning,
                index,
                glob,
                "identifier_glob",
                dropped("a class in it holds no character"),
            );
            continue;
        };
        if let Some(first) = live.iter().find(|l| l.ours == ours) {
            let why = if first.glob == glob {
                dropped(&format!("the same glob as resources[{}]", first.index))
            } else {
                format!(
                    "the same pattern as resources[{}] ({:?}) in our syntax; dropped: the original gave \
                     it only the id spelled exactly {glob:?} (an exact match), which another template \
                     gets here",
                    first.index, first.glob
                )
            };
            out.at(Level::Warning, index, glob, "identifier_glob", why);
            continue;
        }
        live.push(Live {
            index,
            raw: t,
            glob,
            tokens,
            ours,
        });
    }
    live
}

/// Where our `*` (which matches '/') takes ids that the original's (which
/// does not) left to another template or to none.
fn star_differences(live: &[Live<'_>], n: usize, out: &mut Findings) {
    let t = &live[n];
    if !t.tokens.contains(&Token::Star) {
        return;
    }
    let (index, glob) = (t.index, t.glob);
    if let Some(first_star) = t.tokens.iter().position(|x| *x == Token::Star) {
        if t.tokens[first_star..]
            .iter()
            .any(Token::class_matches_slash)
        {
            let why = "a class after '*' matches '/': the original's matcher commits to the first place \
                       the part after a '*' fits and misses some ids this matches (Go: \"*a[^z]*Y\" does \
                       not match \"aba/Y\"); here they match";
            out.at(Level::Warning, index, glob, "identifier_glob", why.into());
        }
    }
    let later: Vec<&Live<'_>> = live[n + 1..].iter().filter(|l| l.glob != "*").collect();
    let mut lost = Vec::new();
    for other in later.iter().copied() {
        if let Some(id) = checked_witness(t, Some(other), live) {
            lost.push(format!(
                "{id:?}, which the original gave resources[{}] ({:?})",
                other.index, other.glob
            ));
        }
    }
    let star = "'*' matches '/' here, not in the original";
    if !lost.is_empty() {
        let shown: Vec<String> = lost.iter().take(3).cloned().collect();
        let more = if lost.len() > 3 {
            format!(", and {} more templates", lost.len() - 3)
        } else {
            String::new()
        };
        let why = format!(
            "{star}: this template now takes ids such as {}{more}",
            shown.join("; ")
        );
        out.at(Level::Warning, index, glob, "identifier_glob", why);
    } else if let Some(id) = checked_witness(t, None, live) {
        let what = if glob == "*" {
            "the catch-all"
        } else {
            "this template"
        };
        let why = format!(
            "{star}: {what} also takes ids such as {id:?}, which matched no template there (its server \
             crashed on such a request); no id the original served changes template"
        );
        out.at(Level::Note, index, glob, "identifier_glob", why);
    }
}

/// A [`witness`] confirmed with the real matchers (Go's for the original,
/// the `glob` crate for ours), made more readable where it still holds.
/// Without `other`, the original must match it to no template at all.
fn checked_witness(t: &Live<'_>, other: Option<&Live<'_>>, all: &[Live<'_>]) -> Option<String> {
    let id = witness(&t.tokens, other.map(|o| o.tokens.as_slice()))?;
    let ours = glob::Pattern::new(&t.ours).ok()?;
    let theirs = |l: &Live<'_>, id: &str| go_match(l.glob, id) == Ok(true);
    let holds = |id: &str| {
        ours.matches(id)
            && !theirs(t, id)
            && match other {
                Some(o) => theirs(o, id),
                None => !all.iter().any(|l| theirs(l, id)),
            }
    };
    if !holds(&id) {
        return None;
    }
    let mut best = id;
    while best.contains("//") {
        let nicer = best.replacen("//", "/x/", 1);
        if !holds(&nicer) {
            break;
        }
        best = nicer;
    }
    if best.starts_with('/') && holds(&format!("x{best}")) {
        best = format!("x{best}");
    }
    Some(best)
}

/// The template as ours holds it, or `None` (with an error) when the
/// original's server crashes on its first request.
fn carry(t: &Live<'_>, out: &mut Findings) -> Option<OutTemplate> {
    let (index, glob) = (t.index, t.glob);
    let crash = "the original accepts the file, but its server crashes on the first request for a resource of this template";
    let Some(a) = &t.raw.algorithm else {
        if glob != "*" {
            out.at(
                Level::Error,
                index,
                glob,
                "algorithm",
                format!("missing: {crash}"),
            );
        }
        return None;
    };
    let kind = a.kind.unwrap_or(0);
    let Some(kind) = usize::try_from(kind)
        .ok()
        .and_then(|k| KINDS.get(k).copied())
    else {
        let why = format!("{kind} is not an algorithm (0 to 3): {crash}");
        out.at(Level::Error, index, glob, "algorithm.kind", why);
        return None;
    };
    if a.kind.is_none() {
        out.at(
            Level::Note,
            index,
            glob,
            "algorithm.kind",
            "missing: NO_ALGORITHM, as in the original (its default)".into(),
        );
    }
    let capacity = capacity(t, out, crash)?;
    Some(OutTemplate {
        from: index,
        raw_glob: glob.to_string(),
        glob: t.ours.clone(),
        capacity,
        safe_capacity: safe_capacity(t, out),
        description: t.raw.description.clone(),
        kind,
        lease_length: a.lease_length.unwrap_or(0),
        refresh_interval: a.refresh_interval.unwrap_or(0),
        learning_mode_duration: learning(t, a, out),
        decay_factor: parameters(t, a, out),
    })
}

/// `capacity`: required by the original's proto but not checked; without
/// it the original works with 0 only when a safe capacity is set.
fn capacity(t: &Live<'_>, out: &mut Findings, crash: &str) -> Option<f64> {
    let (index, glob) = (t.index, t.glob);
    match (t.raw.capacity, t.raw.safe_capacity) {
        (Some(c), _) => Some(c),
        (None, Some(_)) => {
            let why = "missing: the original used 0; written as 0".into();
            out.at(Level::Warning, index, glob, "capacity", why);
            Some(0.0)
        }
        (None, None) => {
            let why = format!("missing (and no safe_capacity): {crash}");
            out.at(Level::Error, index, glob, "capacity", why);
            None
        }
    }
}

fn safe_capacity(t: &Live<'_>, out: &mut Findings) -> Option<f64> {
    let safe = t.raw.safe_capacity?;
    if safe >= 0.0 {
        return Some(safe);
    }
    let why = format!(
        "{safe} not carried (ours needs >= 0; absent, servers send capacity / clients): the original's \
         docs read a negative one as \"do not limit while the server is down\", which our client \
         chooses itself (Fallback::Optimistic); the original's Go client ignores safe capacities"
    );
    out.at(Level::Warning, t.index, t.glob, "safe_capacity", why);
    None
}

fn learning(t: &Live<'_>, a: &RawAlgorithm, out: &mut Findings) -> Option<i64> {
    let d = a.learning_mode_duration?;
    if d >= 0 {
        return Some(d);
    }
    let why =
        format!("{d} written as 0: a negative learning mode ends before it starts in the original");
    out.at(
        Level::Note,
        t.index,
        t.glob,
        "algorithm.learning_mode_duration",
        why,
    );
    Some(0)
}

/// The original reads no parameter; ours reads `decay_factor` only.
fn parameters(t: &Live<'_>, a: &RawAlgorithm, out: &mut Findings) -> Option<String> {
    let mut decay = None;
    for (i, (name, value)) in a.parameters.iter().enumerate() {
        let field = format!("algorithm.parameters[{i}]");
        let (name, value) = (
            name.as_deref().unwrap_or(""),
            value.as_deref().unwrap_or(""),
        );
        let valid = value
            .trim()
            .parse::<f64>()
            .is_ok_and(|d| d > 0.0 && d <= 1.0);
        if name == "decay_factor" && valid {
            let why = format!("decay_factor = {value:?} carried: ours shortens refresh intervals by it per level; the original ignores every parameter");
            out.at(Level::Note, t.index, t.glob, &field, why);
            decay = Some(value.to_string());
        } else {
            let why = format!(
                "{name:?} = {value:?} not carried: the original ignores every parameter, and ours knows only decay_factor (a number in (0, 1])"
            );
            out.at(Level::Warning, t.index, t.glob, &field, why);
        }
    }
    decay
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
