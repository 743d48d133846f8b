//! Resource configuration: the TOML format, its validation and template
//! lookup.
//!
//! A config is validated as a whole; a bad one is rejected with every
//! problem listed (resource index and glob, field, reason) and never
//! replaces a running config. Lookup tries an exact `identifier_glob` match
//! first, then the globs in file order (`*` matches `/` too).
//!
//! Must not: touch the server state or do I/O beyond reading the file given.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use doorman_algorithms::{Kind, LeaseTerms, DEFAULT_DECAY_FACTOR};
use doorman_proto::doorman as pb;

/// The algorithm part of a template, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AlgorithmConfig {
    /// Which rule divides capacity.
    pub kind: Kind,
    /// Lease length, seconds (≥ 1).
    pub lease_length: i64,
    /// Refresh interval at the root, seconds (1 ≤ refresh ≤ lease_length).
    pub refresh_interval: i64,
    /// Learning mode duration, seconds (default: lease_length; 0 = none).
    pub learning_mode_duration: i64,
    /// Refresh-interval decay per level below the root (0 < d ≤ 1).
    pub decay_factor: f64,
    /// The parameters as written (for the wire and the status page).
    pub parameters: Vec<(String, String)>,
}

impl AlgorithmConfig {
    /// What a resource no template matches gets: NO_ALGORITHM, 60 s leases,
    /// refresh every 16 s (the design doc's defaults).
    pub fn unmatched() -> Arc<AlgorithmConfig> {
        static UNMATCHED: std::sync::OnceLock<Arc<AlgorithmConfig>> = std::sync::OnceLock::new();
        UNMATCHED
            .get_or_init(|| {
                Arc::new(AlgorithmConfig {
                    kind: Kind::NoAlgorithm,
                    lease_length: 60,
                    refresh_interval: 16,
                    learning_mode_duration: 0,
                    decay_factor: DEFAULT_DECAY_FACTOR,
                    parameters: Vec::new(),
                })
            })
            .clone()
    }

    /// The algorithm a parent sent for a resource (GetServerCapacity
    /// response). Values are clamped to what a config could hold; an unknown
    /// kind becomes FAIR_SHARE, which never hands out more than the capacity
    /// the parent granted.
    pub fn from_proto(a: &pb::Algorithm) -> AlgorithmConfig {
        let kind = match pb::algorithm::Kind::try_from(a.kind) {
            Ok(pb::algorithm::Kind::NoAlgorithm) => Kind::NoAlgorithm,
            Ok(pb::algorithm::Kind::Static) => Kind::Static,
            Ok(pb::algorithm::Kind::ProportionalShare) => Kind::ProportionalShare,
            Ok(pb::algorithm::Kind::FairShare) => Kind::FairShare,
            Err(_) => {
                tracing::warn!(
                    kind = a.kind,
                    "parent sent an unknown algorithm kind; using FAIR_SHARE"
                );
                Kind::FairShare
            }
        };
        let lease_length = a.lease_length.clamp(1, 86_400 * 365);
        let refresh_interval = a.refresh_interval.clamp(1, lease_length);
        let mut decay_factor = DEFAULT_DECAY_FACTOR;
        let mut parameters = Vec::new();
        for p in &a.parameters {
            let value = p.value.clone().unwrap_or_default();
            if p.name == "decay_factor" {
                if let Ok(d) = value.trim().parse::<f64>() {
                    if d > 0.0 && d <= 1.0 {
                        decay_factor = d;
                    }
                }
            }
            parameters.push((p.name.clone(), value));
        }
        AlgorithmConfig {
            kind,
            lease_length,
            refresh_interval,
            learning_mode_duration: a
                .learning_mode_duration
                .unwrap_or(lease_length)
                .clamp(0, 86_400 * 365),
            decay_factor,
            parameters,
        }
    }

    /// Lease terms for the algorithms crate.
    pub fn terms(&self) -> LeaseTerms {
        LeaseTerms {
            lease_length: self.lease_length,
            refresh_interval: self.refresh_interval,
            decay_factor: self.decay_factor,
        }
    }

    /// The wire form, sent to downstream servers.
    pub fn to_proto(&self) -> pb::Algorithm {
        pb::Algorithm {
            kind: match self.kind {
                Kind::NoAlgorithm => pb::algorithm::Kind::NoAlgorithm,
                Kind::Static => pb::algorithm::Kind::Static,
                Kind::ProportionalShare => pb::algorithm::Kind::ProportionalShare,
                Kind::FairShare => pb::algorithm::Kind::FairShare,
            } as i32,
            lease_length: self.lease_length,
            refresh_interval: self.refresh_interval,
            parameters: self
                .parameters
                .iter()
                .map(|(n, v)| pb::NamedParameter {
                    name: n.clone(),
                    value: Some(v.clone()),
                })
                .collect(),
            learning_mode_duration: Some(self.learning_mode_duration),
        }
    }
}

/// One resource template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// Index in the file (0-based).
    pub index: usize,
    /// The glob (or exact id) it matches.
    pub identifier_glob: String,
    /// Capacity at the root.
    pub capacity: f64,
    /// Per-client capacity in safe mode; absent: capacity / Σ subclients.
    pub safe_capacity: Option<f64>,
    /// Free text.
    pub description: Option<String>,
    /// The algorithm.
    pub algorithm: Arc<AlgorithmConfig>,
}

/// A validated configuration with its lookup tables.
#[derive(Debug, Clone)]
pub struct Config {
    templates: Vec<Arc<Template>>,
    exact: HashMap<String, usize>,
    patterns: Vec<(glob::Pattern, usize)>,
    source: String,
}

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
    fn whole(source_name: &str, reason: String) -> ConfigError {
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

const TEMPLATE_KEYS: [&str; 5] = [
    "identifier_glob",
    "capacity",
    "safe_capacity",
    "description",
    "algorithm",
];
const ALGORITHM_KEYS: [&str; 5] = [
    "kind",
    "lease_length",
    "refresh_interval",
    "learning_mode_duration",
    "parameters",
];
const KNOWN_PARAMETERS: [&str; 1] = ["decay_factor"];

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::read(path).map(|(c, _)| c)
    }

    /// Reads and validates a config file; also returns its bytes (to notice
    /// later changes).
    pub fn read(path: &Path) -> Result<(Config, Vec<u8>), ConfigError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path)
            .map_err(|e| ConfigError::whole(&name, format!("cannot read: {e}")))?;
        Ok((Config::from_bytes(&bytes, &name)?, bytes))
    }

    /// Validates a config held as bytes (a file's or an etcd value's); it
    /// must be UTF-8.
    pub fn from_bytes(bytes: &[u8], source_name: &str) -> Result<Config, ConfigError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Config::parse(text, source_name),
            Err(e) => Err(ConfigError::whole(
                source_name,
                format!("not valid UTF-8: {e}"),
            )),
        }
    }

    /// Parses and validates TOML text; `source_name` names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let fail = |problems| ConfigError {
            source_name: source_name.to_string(),
            problems,
        };
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            fail(vec![Problem {
                resource: None,
                field: "toml".into(),
                reason: e.to_string().trim().replace('\n', " "),
            }])
        })?;
        let mut problems = Vec::new();
        let mut templates = Vec::new();
        for key in table.keys() {
            if key != "resources" {
                problems.push(Problem {
                    resource: None,
                    field: key.clone(),
                    reason: "unknown top-level key (expected [[resources]])".into(),
                });
            }
        }
        match table.get("resources") {
            None => {}
            Some(toml::Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(t) = parse_template(i, item, &mut problems) {
                        templates.push(t);
                    }
                }
            }
            Some(_) => problems.push(Problem {
                resource: None,
                field: "resources".into(),
                reason: "must be an array of tables ([[resources]])".into(),
            }),
        }
        let mut exact = HashMap::new();
        let mut patterns = Vec::new();
        for t in &templates {
            if let Some(&first) = exact.get(&t.identifier_glob) {
                problems.push(Problem {
                    resource: Some((t.index, Some(t.identifier_glob.clone()))),
                    field: "identifier_glob".into(),
                    reason: format!(
                        "duplicate of resources[{first}]: this template can never match"
                    ),
                });
                continue;
            }
            exact.insert(t.identifier_glob.clone(), t.index);
            if let Ok(p) = glob::Pattern::new(&t.identifier_glob) {
                patterns.push((p, t.index));
            }
        }
        if !problems.is_empty() {
            return Err(fail(problems));
        }
        let templates: Vec<Arc<Template>> = templates.into_iter().map(Arc::new).collect();
        Ok(Config {
            templates,
            exact,
            patterns,
            source: source_name.to_string(),
        })
    }

    /// A config with no templates (every resource is unmatched).
    pub fn empty() -> Config {
        Config {
            templates: Vec::new(),
            exact: HashMap::new(),
            patterns: Vec::new(),
            source: "<empty>".into(),
        }
    }

    /// The template for a resource id: exact match first, then the first
    /// glob in file order.
    pub fn find(&self, resource_id: &str) -> Option<&Arc<Template>> {
        let idx = self.exact.get(resource_id).copied().or_else(|| {
            self.patterns
                .iter()
                .find(|(p, _)| p.matches(resource_id))
                .map(|(_, i)| *i)
        })?;
        self.templates.get(idx)
    }

    /// All templates in file order.
    pub fn templates(&self) -> &[Arc<Template>] {
        &self.templates
    }

    /// Where the config came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// One line: how many templates of which kinds.
    pub fn summary(&self) -> String {
        let mut counts: Vec<(Kind, usize)> = Kind::ALL.iter().map(|k| (*k, 0)).collect();
        for t in &self.templates {
            if let Some(c) = counts.iter_mut().find(|(k, _)| *k == t.algorithm.kind) {
                c.1 += 1;
            }
        }
        let kinds: Vec<String> = counts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        format!(
            "{}: {} resource template{}{}",
            self.source,
            self.templates.len(),
            if self.templates.len() == 1 { "" } else { "s" },
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        )
    }
}

struct Ctx<'a> {
    index: usize,
    glob: Option<String>,
    problems: &'a mut Vec<Problem>,
}

impl Ctx<'_> {
    fn problem(&mut self, field: &str, reason: impl Into<String>) {
        self.problems.push(Problem {
            resource: Some((self.index, self.glob.clone())),
            field: field.to_string(),
            reason: reason.into(),
        });
    }

    fn number(&mut self, t: &toml::Table, field: &str, prefix: &str) -> Option<f64> {
        let name = format!("{prefix}{field}");
        match t.get(field)? {
            toml::Value::Float(f) => Some(*f),
            toml::Value::Integer(i) => Some(*i as f64),
            other => {
                self.problem(&name, format!("must be a number, got {}", other.type_str()));
                None
            }
        }
    }

    fn integer(&mut self, t: &toml::Table, field: &str, prefix: &str) -> Option<i64> {
        let name = format!("{prefix}{field}");
        match t.get(field)? {
            toml::Value::Integer(i) => Some(*i),
            other => {
                self.problem(
                    &name,
                    format!(
                        "must be a whole number of seconds, got {}",
                        other.type_str()
                    ),
                );
                None
            }
        }
    }

    fn amount(&mut self, t: &toml::Table, field: &str, required: bool) -> Option<f64> {
        match self.number(t, field, "") {
            Some(v) if !v.is_finite() => {
                self.problem(field, format!("must be finite, got {v}"));
                None
            }
            Some(v) if v < 0.0 => {
                self.problem(field, format!("must be >= 0, got {v}"));
                None
            }
            Some(v) if v > crate::validate::MAX_AMOUNT => {
                self.problem(field, format!("must be at most 1e15, got {v}"));
                None
            }
            Some(v) => Some(v),
            None => {
                if required && !t.contains_key(field) {
                    self.problem(field, "missing (required)");
                }
                None
            }
        }
    }
}

fn parse_template(
    index: usize,
    item: &toml::Value,
    problems: &mut Vec<Problem>,
) -> Option<Template> {
    let mut cx = Ctx {
        index,
        glob: None,
        problems,
    };
    let Some(t) = item.as_table() else {
        cx.problem("resources", "each entry must be a table");
        return None;
    };
    let before = cx.problems.len();
    let glob = match t.get("identifier_glob") {
        Some(toml::Value::String(s)) => {
            cx.glob = Some(s.clone());
            if s.is_empty() {
                cx.problem("identifier_glob", "must not be empty");
            } else if let Err(e) = glob::Pattern::new(s) {
                cx.problem("identifier_glob", format!("invalid glob: {e}"));
            }
            Some(s.clone())
        }
        Some(other) => {
            cx.problem(
                "identifier_glob",
                format!("must be a string, got {}", other.type_str()),
            );
            None
        }
        None => {
            cx.problem("identifier_glob", "missing (required)");
            None
        }
    };
    for key in t.keys() {
        if !TEMPLATE_KEYS.contains(&key.as_str()) {
            cx.problem(
                key,
                format!(
                    "unknown field (expected one of {})",
                    TEMPLATE_KEYS.join(", ")
                ),
            );
        }
    }
    let capacity = cx.amount(t, "capacity", true);
    let safe_capacity = cx.amount(t, "safe_capacity", false);
    let description = match t.get("description") {
        None => None,
        Some(toml::Value::String(s)) => Some(s.clone()),
        Some(other) => {
            cx.problem(
                "description",
                format!("must be a string, got {}", other.type_str()),
            );
            None
        }
    };
    let algorithm = match t.get("algorithm") {
        Some(toml::Value::Table(a)) => parse_algorithm(&mut cx, a),
        Some(other) => {
            cx.problem(
                "algorithm",
                format!("must be a table, got {}", other.type_str()),
            );
            None
        }
        None => {
            cx.problem("algorithm", "missing (required)");
            None
        }
    };
    if cx.problems.len() > before {
        return None;
    }
    Some(Template {
        index,
        identifier_glob: glob?,
        capacity: capacity?,
        safe_capacity,
        description,
        algorithm: Arc::new(algorithm?),
    })
}

fn parse_algorithm(cx: &mut Ctx<'_>, a: &toml::Table) -> Option<AlgorithmConfig> {
    let before = cx.problems.len();
    for key in a.keys() {
        if !ALGORITHM_KEYS.contains(&key.as_str()) {
            cx.problem(
                &format!("algorithm.{key}"),
                format!(
                    "unknown field (expected one of {})",
                    ALGORITHM_KEYS.join(", ")
                ),
            );
        }
    }
    let kind = match a.get("kind") {
        Some(toml::Value::String(s)) => match s.parse::<Kind>() {
            Ok(k) => Some(k),
            Err(e) => {
                cx.problem("algorithm.kind", e.to_string());
                None
            }
        },
        Some(other) => {
            cx.problem(
                "algorithm.kind",
                format!("must be a string, got {}", other.type_str()),
            );
            None
        }
        None => {
            cx.problem("algorithm.kind", "missing (required)");
            None
        }
    };
    let lease_length = cx.integer(a, "lease_length", "algorithm.");
    let refresh_interval = cx.integer(a, "refresh_interval", "algorithm.");
    if !a.contains_key("lease_length") {
        cx.problem("algorithm.lease_length", "missing (required)");
    }
    if !a.contains_key("refresh_interval") {
        cx.problem("algorithm.refresh_interval", "missing (required)");
    }
    if let Some(r) = refresh_interval {
        if r < 1 {
            cx.problem(
                "algorithm.refresh_interval",
                format!("must be >= 1, got {r}"),
            );
        }
    }
    if let (Some(l), Some(r)) = (lease_length, refresh_interval) {
        if l < r {
            cx.problem(
                "algorithm.lease_length",
                format!("must be >= refresh_interval ({r}), got {l}"),
            );
        }
    }
    if let Some(l) = lease_length {
        if l < 1 {
            cx.problem("algorithm.lease_length", format!("must be >= 1, got {l}"));
        }
    }
    let learning = cx.integer(a, "learning_mode_duration", "algorithm.");
    if let Some(d) = learning {
        if d < 0 {
            cx.problem(
                "algorithm.learning_mode_duration",
                format!("must be >= 0 (0 disables learning mode), got {d}"),
            );
        }
    }
    let mut parameters = Vec::new();
    let mut decay_factor = DEFAULT_DECAY_FACTOR;
    match a.get("parameters") {
        None => {}
        Some(toml::Value::Table(p)) => {
            for (name, value) in p {
                let field = format!("algorithm.parameters.{name}");
                let text = match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Integer(i) => i.to_string(),
                    other => {
                        cx.problem(
                            &field,
                            format!("must be a string or number, got {}", other.type_str()),
                        );
                        continue;
                    }
                };
                if !KNOWN_PARAMETERS.contains(&name.as_str()) {
                    cx.problem(
                        &field,
                        format!("unknown parameter (known: {})", KNOWN_PARAMETERS.join(", ")),
                    );
                    continue;
                }
                match text.trim().parse::<f64>() {
                    Ok(d) if d > 0.0 && d <= 1.0 => decay_factor = d,
                    _ => cx.problem(&field, format!("must be a number in (0, 1], got {text:?}")),
                }
                parameters.push((name.clone(), text));
            }
        }
        Some(other) => cx.problem(
            "algorithm.parameters",
            format!(
                "must be a table like {{ decay_factor = \"0.5\" }}, got {}",
                other.type_str()
            ),
        ),
    }
    if cx.problems.len() > before {
        return None;
    }
    let lease_length = lease_length?;
    Some(AlgorithmConfig {
        kind: kind?,
        lease_length,
        refresh_interval: refresh_interval?,
        learning_mode_duration: learning.unwrap_or(lease_length),
        decay_factor,
        parameters,
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
