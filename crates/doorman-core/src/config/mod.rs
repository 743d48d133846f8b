//! Resource configuration: the model (templates and their algorithms), its
//! validation and template lookup. The TOML walking is in `parse.rs`, the
//! error types in `error.rs`, access rules in `acl.rs`, how Envoy's
//! descriptors name resources in `envoy.rs`.
//!
//! A config is validated as a whole; a bad one is rejected with every
//! problem listed (resource index and glob, field, reason) and never
//! replaces a running config. Lookup tries an exact `identifier_glob` match
//! first, then the globs in file order (`*` matches `/` too).
//!
//! Must not: touch the server state or do I/O (the shells read files and
//! etcd values and hand the bytes in).

mod acl;
mod digest;
mod envoy;
mod error;
mod lookup;
mod parse;

use std::collections::HashMap;
use std::sync::Arc;

use doorman_algorithms::Kind;
use doorman_lease::{LeaseTerms, DEFAULT_DECAY_FACTOR};

use crate::limits::MAX_DURATION_SECS;

pub use acl::Acl;
pub use digest::sha256_hex;
pub use envoy::{EnvoyConfig, Mapped, Unit, Unmatched};
pub use error::{ConfigError, Problem};
use lookup::PatternIndex;

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
    /// response), already taken off the wire: `kind` is `None` when the
    /// parent sent a kind this server does not know. Values are clamped to
    /// what a config could hold; an unknown kind becomes FAIR_SHARE, which
    /// never hands out more than the capacity the parent granted.
    pub fn from_parent(
        kind: Option<Kind>,
        lease_length: i64,
        refresh_interval: i64,
        learning_mode_duration: Option<i64>,
        parameters: Vec<(String, String)>,
    ) -> AlgorithmConfig {
        let kind = kind.unwrap_or(Kind::FairShare);
        let lease_length = lease_length.clamp(1, MAX_DURATION_SECS);
        let decay_factor = parameters
            .iter()
            .rev()
            .filter(|(name, _)| name == "decay_factor")
            .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
            .find(|d| *d > 0.0 && *d <= 1.0)
            .unwrap_or(DEFAULT_DECAY_FACTOR);
        AlgorithmConfig {
            kind,
            lease_length,
            refresh_interval: refresh_interval.clamp(1, lease_length),
            learning_mode_duration: learning_mode_duration
                .unwrap_or(lease_length)
                .clamp(0, MAX_DURATION_SECS),
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
    /// The most subclients one downstream server may claim for a resource
    /// of this template (default
    /// [`crate::limits::DEFAULT_MAX_CLIENTS_PER_SERVER`]).
    pub max_clients_per_server: u32,
    /// Without access rules, the most of a resource one downstream
    /// server's client count may take from the other requesters (0 < x ≤ 1;
    /// default [`crate::limits::DEFAULT_OPEN_SERVER_SHARE`]).
    pub open_server_share: f64,
    /// Shadow mode (`shadow = true`): decided and granted as usual, but
    /// our clients and the Envoy front-ends never wait or refuse for it;
    /// they count what they would have refused. Outside the capacity
    /// invariant: nothing enforces its grants.
    pub shadow: bool,
}

/// A validated configuration with its lookup tables.
#[derive(Debug, Clone)]
pub struct Config {
    templates: Vec<Arc<Template>>,
    exact: HashMap<String, usize>,
    patterns: PatternIndex,
    source: String,
    acl: Acl,
    envoy: EnvoyConfig,
    /// The longest `lease_length` of any template, seconds (0 without one).
    longest_lease: i64,
    /// Every resource is in shadow mode (a server's `--shadow`), whatever
    /// its template says and on an intermediate whatever the parent says.
    shadow_all: bool,
}

impl Config {
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
        let parse::Parsed {
            templates,
            acl,
            envoy,
            mut problems,
        } = parse::templates(text).map_err(|p| fail(vec![p]))?;
        if templates.is_empty() && problems.is_empty() {
            problems.push(Problem {
                resource: None,
                field: "resources".into(),
                reason: "no [[resources]] template: a config must define at least one".into(),
            });
        }
        let mut exact = HashMap::new();
        let mut globs = Vec::new();
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
                globs.push((p, t.index));
            }
        }
        if !problems.is_empty() {
            return Err(fail(problems));
        }
        let patterns = PatternIndex::new(globs);
        let longest_lease = templates
            .iter()
            .map(|t| t.algorithm.lease_length)
            .max()
            .unwrap_or(0);
        Ok(Config {
            longest_lease,
            templates: templates.into_iter().map(Arc::new).collect(),
            patterns,
            exact,
            source: source_name.to_string(),
            acl,
            envoy,
            shadow_all: false,
        })
    }

    /// This config with every resource in shadow mode (a server run with
    /// `--shadow`): each template's `shadow` set, and on an intermediate
    /// each resource the parent serves.
    pub fn shadowing_all(mut self) -> Config {
        self.shadow_all = true;
        for t in &mut self.templates {
            Arc::make_mut(t).shadow = true;
        }
        self
    }

    /// True when every resource is in shadow mode ([`Config::shadowing_all`]).
    pub fn shadows_all(&self) -> bool {
        self.shadow_all
    }

    /// True for bytes that hold no config at all yet: empty, white space, or
    /// TOML with nothing but comments (a placeholder file). A root treats
    /// such a source as missing and waits; anything else is parsed.
    pub fn is_blank(bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| t.parse::<toml::Table>().ok())
            .is_some_and(|t| t.is_empty())
    }

    /// A config with no templates (every resource is unmatched).
    pub fn empty() -> Config {
        Config {
            templates: Vec::new(),
            exact: HashMap::new(),
            patterns: PatternIndex::default(),
            source: "<empty>".into(),
            acl: Acl::default(),
            envoy: EnvoyConfig::default(),
            longest_lease: 0,
            shadow_all: false,
        }
    }

    /// The template for a resource id: exact match first, then the first
    /// glob in file order.
    pub fn find(&self, resource_id: &str) -> Option<&Arc<Template>> {
        let idx = self
            .exact
            .get(resource_id)
            .copied()
            .or_else(|| self.patterns.find(resource_id))?;
        self.templates.get(idx)
    }

    /// All templates in file order.
    pub fn templates(&self) -> &[Arc<Template>] {
        &self.templates
    }

    /// The longest `lease_length` of any template, seconds (0 without one).
    pub fn longest_lease(&self) -> i64 {
        self.longest_lease
    }

    /// The access rules (open when there are none).
    pub fn acl(&self) -> &Acl {
        &self.acl
    }

    /// How Envoy descriptors and buckets name resources (`[envoy]`).
    pub fn envoy(&self) -> &EnvoyConfig {
        &self.envoy
    }

    /// What is valid but probably not meant: access rules that can never
    /// change an outcome (`doorman config check` prints these).
    pub fn warnings(&self) -> Vec<String> {
        self.acl.unreachable()
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
        let shadow = self.templates.iter().filter(|t| t.shadow).count();
        format!(
            "{}: {} resource template{}{}{}",
            self.source,
            self.templates.len(),
            if self.templates.len() == 1 { "" } else { "s" },
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            },
            if shadow == 0 {
                String::new()
            } else {
                format!(", {shadow} in shadow mode")
            }
        )
    }
}

#[cfg(test)]
mod tests;
