//! `doorman config import`'s conversion: an original Doorman config (the
//! YAML its server reads, youtube/doorman's `ResourceRepository`) to our
//! TOML, keeping its meaning, and every finding on the way: errors (the
//! original would refuse the file or crash on it, or ours cannot hold a
//! value), warnings (something is not carried or means something else
//! here) and notes (rewritten, same meaning).
//!
//! Reading is `read.rs` (YAML as the original decodes it), meaning is
//! `translate.rs` (its checks, its crashes, its globs: `goglob.rs`,
//! `globdiff.rs`), writing is `write.rs`; the result is parsed with
//! `doorman_core::config::Config` before it is handed back, so what this
//! returns is a config our servers accept.
//!
//! It lives in the CLI crate, not in `doorman-core`: it is a one-off
//! format translation for people migrating, not a decision the running
//! system makes, and it keeps the YAML parser out of the server's, the
//! client's and the simulator's dependencies.
//!
//! Must not: do I/O (the subcommand reads and writes the files).

mod globdiff;
mod goglob;
mod read;
mod scalar;
mod translate;
mod write;

use std::fmt;

use doorman_core::config::Config;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Rewritten with the same meaning.
    Note,
    /// Not carried, or carried with another meaning.
    Warning,
    /// No config is written.
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Note => "note",
            Level::Warning => "warning",
            Level::Error => "error",
        })
    }
}

/// One finding: where (template index in the YAML and its glob, field) and
/// what.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// How much it matters.
    pub level: Level,
    /// `resources[i]` of the YAML and its glob, when about a template.
    pub resource: Option<(usize, Option<String>)>,
    /// The field, e.g. `algorithm.lease_length`.
    pub field: String,
    /// What and why.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.resource {
            Some((i, Some(g))) => write!(f, "resources[{i}] (\"{g}\"): ")?,
            Some((i, None)) => write!(f, "resources[{i}]: ")?,
            None => {}
        }
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The findings so far.
#[derive(Debug, Default)]
pub struct Findings {
    /// In the order found.
    pub list: Vec<Finding>,
}

impl Findings {
    /// A finding about the file as a whole.
    pub fn top(&mut self, level: Level, field: &str, message: String) {
        self.list.push(Finding {
            level,
            resource: None,
            field: field.into(),
            message,
        });
    }

    /// A finding about template `index` (its glob as written).
    pub fn at(&mut self, level: Level, index: usize, glob: &str, field: &str, message: String) {
        self.list.push(Finding {
            level,
            resource: Some((index, Some(glob.to_string()))),
            field: field.into(),
            message,
        });
    }

    fn has_errors(&self) -> bool {
        self.list.iter().any(|f| f.level == Level::Error)
    }
}

/// A converted config.
#[derive(Debug)]
pub struct Imported {
    /// The TOML, accepted by [`Config::parse`].
    pub toml: String,
    /// Our parser's one-line summary of it.
    pub summary: String,
    /// Warnings and notes, in the order found.
    pub findings: Vec<Finding>,
}

/// Converts the original config `yaml` (named `source_name` in the
/// output's header). On error, every finding (errors first) is returned
/// and nothing else.
pub fn convert(yaml: &str, source_name: &str) -> Result<Imported, Vec<Finding>> {
    let mut findings = Findings::default();
    let fail = |mut f: Findings| {
        f.list.sort_by_key(|f| std::cmp::Reverse(f.level));
        Err(f.list)
    };
    let in_file_order = |mut f: Findings| {
        f.list
            .sort_by_key(|f| f.resource.as_ref().map_or(0, |(i, _)| i + 1));
        f.list
    };
    let Some(raw) = read::read(yaml, &mut findings) else {
        return fail(findings);
    };
    let templates = translate::templates(&raw, &mut findings);
    if findings.has_errors() {
        return fail(findings);
    }
    findings.top(
        Level::Note,
        "algorithm.refresh_interval",
        REFRESH_NOTE.into(),
    );
    let toml = write::toml(&templates, source_name, &findings.list);
    match Config::parse(&toml, source_name) {
        Ok(config) => Ok(Imported {
            toml,
            summary: config.summary(),
            findings: in_file_order(findings),
        }),
        Err(e) => {
            for p in e.problems {
                let from = p.resource.and_then(|(i, _)| templates.get(i));
                findings.list.push(Finding {
                    level: Level::Error,
                    resource: from.map(|t| (t.from, Some(t.raw_glob.clone()))),
                    field: p.field,
                    message: format!("{} in our config (not carried)", p.reason),
                });
            }
            fail(findings)
        }
    }
}

/// Said once per import: the one difference every template has.
const REFRESH_NOTE: &str = "below the root our servers shorten refresh_interval by \
    decay_factor (default 0.5) per level; the original hands every level the root's. \
    Add parameters = { decay_factor = \"1\" } to a template to keep the original's";

#[cfg(test)]
mod tests;
