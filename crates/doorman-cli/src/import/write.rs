//! Writing converted templates as our TOML: a header naming the source,
//! then one `[[resources]]` table per template in file order, each after
//! its warnings and notes as comments. Only fields the original config
//! gave are written, so our defaults apply where its did.
//!
//! Must not: decide anything about a value (that is `translate.rs`).

use std::fmt::Write as _;

use super::translate::OutTemplate;
use super::Finding;

/// The TOML text of `templates`, converted from `source`.
pub fn toml(templates: &[OutTemplate], source: &str, findings: &[Finding]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Converted by `doorman config import` from the original Doorman config"
    );
    let _ = writeln!(out, "# {}.", comment(source));
    for f in findings.iter().filter(|f| f.resource.is_none()) {
        let _ = writeln!(out, "# {}: {}", f.level, comment(&f.to_string()));
    }
    for t in templates {
        out.push('\n');
        for f in findings
            .iter()
            .filter(|f| f.resource.as_ref().is_some_and(|(i, _)| *i == t.from))
        {
            let _ = writeln!(out, "# {}: {}: {}", f.level, f.field, comment(&f.message));
        }
        template(&mut out, t);
    }
    out
}

fn template(out: &mut String, t: &OutTemplate) {
    let _ = writeln!(out, "[[resources]]");
    let _ = writeln!(out, "identifier_glob = {}", text(&t.glob));
    let _ = writeln!(out, "capacity = {}", number(t.capacity));
    if let Some(s) = t.safe_capacity {
        let _ = writeln!(out, "safe_capacity = {}", number(s));
    }
    if let Some(d) = &t.description {
        let _ = writeln!(out, "description = {}", text(d));
    }
    let _ = writeln!(out, "[resources.algorithm]");
    let _ = writeln!(out, "kind = {}", text(t.kind));
    let _ = writeln!(out, "lease_length = {}", t.lease_length);
    let _ = writeln!(out, "refresh_interval = {}", t.refresh_interval);
    if let Some(l) = t.learning_mode_duration {
        let _ = writeln!(out, "learning_mode_duration = {l}");
    }
    if let Some(d) = &t.decay_factor {
        let _ = writeln!(out, "parameters = {{ decay_factor = {} }}", text(d));
    }
}

/// A TOML string, escaped.
fn text(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Whole numbers as written in the original (`5000`), others as TOML floats.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() <= 1e15 {
        format!("{}", x as i64)
    } else {
        toml::Value::Float(x).to_string()
    }
}

/// One line of comment text.
fn comment(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_strings_are_valid_toml() {
        assert_eq!(number(5000.0), "5000");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(-0.0), "0");
        assert!(number(1e20).parse::<f64>().is_ok(), "{}", number(1e20));
        let tricky = "quote \" backslash \\ newline \n tab \t é";
        let line = format!("s = {}", text(tricky));
        let parsed: toml::Table = line.parse().unwrap();
        assert_eq!(parsed["s"].as_str(), Some(tricky));
    }
}
