//! What is wrong with a config: one [`Problem`] per finding (resource,
//! field, reason) and the [`ConfigError`] that lists them all.
//!
//! Must not: parse or decide anything.

use std::fmt;

/// One thing wrong with a config.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `resources[i]` and its glob, when the problem is in a template.
    pub resource: Option<(usize, Option<String>)>,
    /// The field, e.g. `algorithm.lease_length`.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.resource {
            Some((i, Some(g))) => write!(f, "resources[{i}] (\"{g}\"): ")?,
            Some((i, None)) => write!(f, "resources[{i}]: ")?,
            None => {}
        }
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// A rejected config: where it came from and every problem found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ConfigError {
    /// File name or `etcd:KEY` or `<inline>`.
    pub source_name: String,
    /// Every problem, in file order.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    /// An error about the source as a whole (cannot read it, not UTF-8).
    pub fn whole(source_name: &str, reason: String) -> ConfigError {
        ConfigError {
            source_name: source_name.to_string(),
            problems: vec![Problem {
                resource: None,
                field: "file".into(),
                reason,
            }],
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: invalid config ({} problem{})",
            self.source_name,
            self.problems.len(),
            if self.problems.len() == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  {}: {p}", self.source_name)?;
        }
        Ok(())
    }
}
