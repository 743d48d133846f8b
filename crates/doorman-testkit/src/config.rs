//! Configs for tests, built instead of written out as TOML: a template per
//! resource glob (capacity, algorithm, lease and refresh lengths, learning
//! mode) and access rules, turned into the same TOML a user writes (so the
//! server parses it as it parses theirs) or straight into a parsed
//! [`Config`].
//!
//! ```
//! use doorman_testkit::config::{Resource, TestConfig};
//! let cfg = TestConfig::new()
//!     .resource(Resource::fair("*", 100.0).lease(30).refresh(4))
//!     .access(&["web"], &["web/*"], &["acquire"]);
//! assert!(cfg.toml().contains("FAIR_SHARE"));
//! cfg.parse();
//! ```
//!
//! Must not: check anything itself (the server's parser decides what is
//! valid; tests of the format itself write TOML).

use std::sync::Arc;

use doorman_core::config::Config;
use doorman_server::server::ConfigSource;
use toml::{Table, Value};

/// A config under construction.
#[derive(Debug, Clone, Default)]
pub struct TestConfig {
    resources: Vec<Resource>,
    access: Vec<Table>,
}

/// One `[[resources]]` template.
#[derive(Debug, Clone)]
pub struct Resource {
    table: Table,
    algorithm: Table,
}

impl TestConfig {
    /// A config with nothing in it.
    pub fn new() -> TestConfig {
        TestConfig::default()
    }

    /// Adds a template (templates match in the order added).
    pub fn resource(mut self, r: Resource) -> TestConfig {
        self.resources.push(r);
        self
    }

    /// Adds an access rule: `identities` may do `actions` on `resources`
    /// (an empty list of resources leaves the key out: every resource).
    pub fn access(mut self, identities: &[&str], resources: &[&str], actions: &[&str]) -> Self {
        let mut t = Table::new();
        t.insert("identities".into(), strings(identities));
        if !resources.is_empty() {
            t.insert("resources".into(), strings(resources));
        }
        t.insert("actions".into(), strings(actions));
        self.access.push(t);
        self
    }

    /// The config as TOML text.
    pub fn toml(&self) -> String {
        let mut root = Table::new();
        let resources = self.resources.iter().map(Resource::to_table);
        root.insert("resources".into(), Value::Array(resources.collect()));
        if !self.access.is_empty() {
            let rules = self.access.iter().cloned().map(Value::Table).collect();
            root.insert("access".into(), Value::Array(rules));
        }
        toml::to_string(&root).expect("a table of strings and numbers serialises")
    }

    /// The config parsed as a server would (the test fails if the server
    /// rejects it).
    pub fn parse(&self) -> Arc<Config> {
        let text = self.toml();
        match Config::parse(&text, "test config") {
            Ok(c) => Arc::new(c),
            Err(e) => panic!("the test's config is invalid: {e}\n{text}"),
        }
    }

    /// The parsed config as a server's config source.
    pub fn source(&self) -> ConfigSource {
        ConfigSource::Inline(self.parse())
    }
}

impl Resource {
    /// A template for `glob` of `capacity` with algorithm `kind`
    /// (`"FAIR_SHARE"`, `"PROPORTIONAL_SHARE"`, `"STATIC"`, `"NO_ALGORITHM"`)
    /// and no learning mode.
    pub fn new(glob: &str, capacity: f64, kind: &str) -> Resource {
        let mut table = Table::new();
        table.insert("identifier_glob".into(), Value::String(glob.into()));
        table.insert("capacity".into(), Value::Float(capacity));
        let mut algorithm = Table::new();
        algorithm.insert("kind".into(), Value::String(kind.into()));
        algorithm.insert("learning_mode_duration".into(), Value::Integer(0));
        Resource { table, algorithm }
    }

    /// A FAIR_SHARE template without learning mode.
    pub fn fair(glob: &str, capacity: f64) -> Resource {
        Resource::new(glob, capacity, "FAIR_SHARE")
    }

    /// Leases of `secs` seconds.
    pub fn lease(self, secs: i64) -> Resource {
        self.algorithm_key("lease_length", Value::Integer(secs))
    }

    /// Clients refresh every `secs` seconds.
    pub fn refresh(self, secs: i64) -> Resource {
        self.algorithm_key("refresh_interval", Value::Integer(secs))
    }

    /// Learning mode of `secs` seconds after a master takes over.
    pub fn learning(self, secs: i64) -> Resource {
        self.algorithm_key("learning_mode_duration", Value::Integer(secs))
    }

    /// Learning mode as the server's default for it (no key).
    pub fn learning_default(mut self) -> Resource {
        self.algorithm.remove("learning_mode_duration");
        self
    }

    /// Any other key of the template (`safe_capacity`, `description`,
    /// `max_clients_per_server`, `open_server_share`).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Resource {
        self.table.insert(key.into(), value.into());
        self
    }

    fn algorithm_key(mut self, key: &str, value: Value) -> Resource {
        self.algorithm.insert(key.into(), value);
        self
    }

    fn to_table(&self) -> Value {
        let mut t = self.table.clone();
        t.insert("algorithm".into(), Value::Table(self.algorithm.clone()));
        Value::Table(t)
    }
}

fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| Value::String((*s).into())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_toml_parses_to_the_templates_and_rules_given() {
        let cfg = TestConfig::new()
            .resource(Resource::fair("web/*", 100.0).lease(30).refresh(4))
            .resource(
                Resource::new("*", 10.0, "STATIC")
                    .lease(10)
                    .refresh(2)
                    .with("safe_capacity", 2.0),
            )
            .access(&["web"], &["web/*"], &["acquire"]);
        let text = cfg.toml();
        let parsed = cfg.parse();
        assert_eq!(parsed.templates().len(), 2, "{text}");
        let t = &parsed.templates()[0];
        assert_eq!((t.identifier_glob.as_str(), t.capacity), ("web/*", 100.0));
        assert!(text.contains("lease_length = 30"), "{text}");
        assert!(text.contains("[[access]]"), "{text}");
    }

    #[test]
    #[should_panic(expected = "the test's config is invalid")]
    fn a_config_the_server_rejects_fails_the_test() {
        TestConfig::new()
            .resource(Resource::fair("*", -1.0))
            .parse();
    }
}
