//! The TOML format of a config, walked by hand so that every problem is
//! found and reported (resource, field, reason), not just the first one.
//!
//! Must not: build lookup tables (that is [`super::Config`]) or do I/O.

use std::sync::Arc;

use doorman_algorithms::Kind;
use doorman_lease::DEFAULT_DECAY_FACTOR;

use super::{Acl, AlgorithmConfig, EnvoyConfig, Problem, Template};
use crate::limits::{
    DEFAULT_MAX_CLIENTS_PER_SERVER, DEFAULT_OPEN_SERVER_SHARE, MAX_AMOUNT, MAX_DURATION_SECS,
    MAX_TEMPLATES,
};

const TEMPLATE_KEYS: [&str; 8] = [
    "identifier_glob",
    "capacity",
    "safe_capacity",
    "description",
    "algorithm",
    "max_clients_per_server",
    "shadow",
    "open_server_share",
];
const ALGORITHM_KEYS: [&str; 5] = [
    "kind",
    "lease_length",
    "refresh_interval",
    "learning_mode_duration",
    "parameters",
];
const KNOWN_PARAMETERS: [&str; 1] = ["decay_factor"];

/// What a config's text holds besides its lookup tables.
pub(super) struct Parsed {
    pub templates: Vec<Template>,
    pub acl: Acl,
    pub envoy: EnvoyConfig,
    pub problems: Vec<Problem>,
}

/// Parses the TOML text into templates, access rules and the `[envoy]`
/// section, collecting every
/// problem. The templates returned are the valid ones; the caller rejects
/// the whole config if any problem was found.
pub(super) fn templates(text: &str) -> Result<Parsed, Problem> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| Problem {
        resource: None,
        field: "toml".into(),
        reason: e.to_string().trim().replace('\n', " "),
    })?;
    let mut problems = Vec::new();
    let mut templates = Vec::new();
    for key in table.keys() {
        if !["resources", "access", "envoy"].contains(&key.as_str()) {
            problems.push(Problem {
                resource: None,
                field: key.clone(),
                reason: "unknown top-level key (expected [[resources]], [[access]] or [envoy])"
                    .into(),
            });
        }
    }
    match table.get("resources") {
        None => {}
        Some(toml::Value::Array(items)) if items.len() > MAX_TEMPLATES => problems.push(Problem {
            resource: None,
            field: "resources".into(),
            reason: format!(
                "{} templates, at most {MAX_TEMPLATES}: match more ids per template with globs",
                items.len()
            ),
        }),
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
    let acl = super::acl::parse(table.get("access"), &mut problems);
    let envoy = super::envoy::parse(table.get("envoy"), &mut problems);
    Ok(Parsed {
        templates,
        acl,
        envoy,
        problems,
    })
}

/// Where problems go while one template is parsed.
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

    fn wrong_type(&mut self, field: &str, expected: &str, got: &toml::Value) {
        self.problem(field, format!("must be {expected}, got {}", got.type_str()));
    }

    fn unknown_keys(&mut self, t: &toml::Table, known: &[&str], prefix: &str) {
        for key in t.keys() {
            if !known.contains(&key.as_str()) {
                let expected = known.join(", ");
                self.problem(
                    &format!("{prefix}{key}"),
                    format!("unknown field (expected one of {expected})"),
                );
            }
        }
    }

    fn number(&mut self, t: &toml::Table, field: &str) -> Option<f64> {
        match t.get(field)? {
            toml::Value::Float(f) => Some(*f),
            toml::Value::Integer(i) => Some(*i as f64),
            other => {
                self.wrong_type(field, "a number", other);
                None
            }
        }
    }

    fn seconds(&mut self, t: &toml::Table, field: &str) -> Option<i64> {
        match t.get(field)? {
            toml::Value::Integer(i) if *i > MAX_DURATION_SECS => {
                let name = format!("algorithm.{field}");
                let why =
                    format!("must be at most {MAX_DURATION_SECS} seconds (365 days), got {i}");
                self.problem(&name, why);
                None
            }
            toml::Value::Integer(i) => Some(*i),
            other => {
                let name = format!("algorithm.{field}");
                self.wrong_type(&name, "a whole number of seconds", other);
                None
            }
        }
    }

    fn boolean(&mut self, t: &toml::Table, field: &str) -> Option<bool> {
        match t.get(field)? {
            toml::Value::Boolean(b) => Some(*b),
            other => {
                self.wrong_type(field, "true or false", other);
                None
            }
        }
    }

    fn string(&mut self, t: &toml::Table, field: &str) -> Option<String> {
        match t.get(field)? {
            toml::Value::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(field, "a string", other);
                None
            }
        }
    }

    fn amount(&mut self, t: &toml::Table, field: &str, required: bool) -> Option<f64> {
        match self.number(t, field) {
            Some(v) if !v.is_finite() => self.problem(field, format!("must be finite, got {v}")),
            Some(v) if v < 0.0 => self.problem(field, format!("must be >= 0, got {v}")),
            Some(v) if v > MAX_AMOUNT => {
                self.problem(field, format!("must be at most {MAX_AMOUNT:e}, got {v}"))
            }
            Some(v) => return Some(v),
            None if required && !t.contains_key(field) => self.problem(field, "missing (required)"),
            None => {}
        }
        None
    }
}

fn parse_glob(cx: &mut Ctx<'_>, t: &toml::Table) -> Option<String> {
    if !t.contains_key("identifier_glob") {
        cx.problem("identifier_glob", "missing (required)");
        return None;
    }
    let s = cx.string(t, "identifier_glob")?;
    cx.glob = Some(s.clone());
    if s.is_empty() {
        cx.problem("identifier_glob", "must not be empty");
    } else if let Err(e) = glob::Pattern::new(&s) {
        cx.problem("identifier_glob", format!("invalid glob: {e}"));
    }
    Some(s)
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
    let glob = parse_glob(&mut cx, t);
    cx.unknown_keys(t, &TEMPLATE_KEYS, "");
    let capacity = cx.amount(t, "capacity", true);
    let safe_capacity = cx.amount(t, "safe_capacity", false);
    let description = cx.string(t, "description");
    let max_clients = parse_max_clients(&mut cx, t);
    let open_share = parse_open_share(&mut cx, t);
    let shadow = cx.boolean(t, "shadow").unwrap_or(false);
    let algorithm = match t.get("algorithm") {
        Some(toml::Value::Table(a)) => parse_algorithm(&mut cx, a),
        Some(other) => {
            cx.wrong_type("algorithm", "a table", other);
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
        max_clients_per_server: max_clients,
        open_server_share: open_share,
        shadow,
    })
}

/// `open_server_share`: a number above 0, at most 1.
fn parse_open_share(cx: &mut Ctx<'_>, t: &toml::Table) -> f64 {
    const FIELD: &str = "open_server_share";
    match cx.number(t, FIELD) {
        None => DEFAULT_OPEN_SERVER_SHARE,
        Some(v) if v > 0.0 && v <= 1.0 => v,
        Some(v) => {
            cx.problem(FIELD, format!("must be above 0 and at most 1, got {v}"));
            DEFAULT_OPEN_SERVER_SHARE
        }
    }
}

/// `max_clients_per_server`: a whole number from 1 to 10⁹.
fn parse_max_clients(cx: &mut Ctx<'_>, t: &toml::Table) -> u32 {
    const FIELD: &str = "max_clients_per_server";
    const MAX: i64 = 1_000_000_000;
    match t.get(FIELD) {
        None => DEFAULT_MAX_CLIENTS_PER_SERVER,
        Some(toml::Value::Integer(n)) if (1..=MAX).contains(n) => *n as u32,
        Some(toml::Value::Integer(n)) => {
            cx.problem(FIELD, format!("must be from 1 to {MAX}, got {n}"));
            0
        }
        Some(other) => {
            cx.wrong_type(FIELD, "a whole number", other);
            0
        }
    }
}

fn parse_kind(cx: &mut Ctx<'_>, a: &toml::Table) -> Option<Kind> {
    if !a.contains_key("kind") {
        cx.problem("algorithm.kind", "missing (required)");
        return None;
    }
    let s = match a.get("kind")? {
        toml::Value::String(s) => s,
        other => {
            cx.wrong_type("algorithm.kind", "a string", other);
            return None;
        }
    };
    s.parse::<Kind>()
        .map_err(|e| cx.problem("algorithm.kind", e.to_string()))
        .ok()
}

/// `lease_length`, `refresh_interval` and `learning_mode_duration`, each
/// checked alone and against the others.
fn parse_times(cx: &mut Ctx<'_>, a: &toml::Table) -> (Option<i64>, Option<i64>, Option<i64>) {
    let lease_length = cx.seconds(a, "lease_length");
    let refresh_interval = cx.seconds(a, "refresh_interval");
    for field in ["lease_length", "refresh_interval"] {
        if !a.contains_key(field) {
            cx.problem(&format!("algorithm.{field}"), "missing (required)");
        }
    }
    if let Some(r) = refresh_interval.filter(|r| *r < 1) {
        cx.problem(
            "algorithm.refresh_interval",
            format!("must be >= 1, got {r}"),
        );
    }
    if let (Some(l), Some(r)) = (lease_length, refresh_interval) {
        if l < r {
            let reason = format!("must be >= refresh_interval ({r}), got {l}");
            cx.problem("algorithm.lease_length", reason);
        }
    }
    if let Some(l) = lease_length.filter(|l| *l < 1) {
        cx.problem("algorithm.lease_length", format!("must be >= 1, got {l}"));
    }
    let learning = cx.seconds(a, "learning_mode_duration");
    if let Some(d) = learning.filter(|d| *d < 0) {
        cx.problem(
            "algorithm.learning_mode_duration",
            format!("must be >= 0 (0 disables learning mode), got {d}"),
        );
    }
    (lease_length, refresh_interval, learning)
}

/// The `parameters` table: its entries as written, and the decay factor.
fn parse_parameters(cx: &mut Ctx<'_>, a: &toml::Table) -> (Vec<(String, String)>, f64) {
    let mut parameters = Vec::new();
    let mut decay_factor = DEFAULT_DECAY_FACTOR;
    let p = match a.get("parameters") {
        None => return (parameters, decay_factor),
        Some(toml::Value::Table(p)) => p,
        Some(other) => {
            let expected = "a table like { decay_factor = \"0.5\" }";
            cx.wrong_type("algorithm.parameters", expected, other);
            return (parameters, decay_factor);
        }
    };
    for (name, value) in p {
        let field = format!("algorithm.parameters.{name}");
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Integer(i) => i.to_string(),
            other => {
                cx.wrong_type(&field, "a string or number", other);
                continue;
            }
        };
        if !KNOWN_PARAMETERS.contains(&name.as_str()) {
            let known = KNOWN_PARAMETERS.join(", ");
            cx.problem(&field, format!("unknown parameter (known: {known})"));
            continue;
        }
        match text.trim().parse::<f64>() {
            Ok(d) if d > 0.0 && d <= 1.0 => decay_factor = d,
            _ => cx.problem(&field, format!("must be a number in (0, 1], got {text:?}")),
        }
        parameters.push((name.clone(), text));
    }
    (parameters, decay_factor)
}

fn parse_algorithm(cx: &mut Ctx<'_>, a: &toml::Table) -> Option<AlgorithmConfig> {
    let before = cx.problems.len();
    cx.unknown_keys(a, &ALGORITHM_KEYS, "algorithm.");
    let kind = parse_kind(cx, a);
    let (lease_length, refresh_interval, learning) = parse_times(cx, a);
    let (parameters, decay_factor) = parse_parameters(cx, a);
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
