//! `[envoy]` in the resource config: how Envoy's rate limit descriptors
//! (RLS) and quota bucket ids (RLQS) name Doorman resources, and what a
//! descriptor that matches no template gets.
//!
//! By default a descriptor `[(k1, v1), (k2, v2)]` in domain `D` names the
//! resource `D/k1=v1/k2=v2` (a bucket id's keys are sorted first); `%`,
//! `/` and `=` in keys and values are written `%25`, `%2F` and `%3D`, so
//! that no value can name another descriptor's resource. A
//! mapping replaces that name for descriptors of one domain with exactly
//! one set of keys:
//!
//! ```toml
//! [envoy]
//! unmatched = "ok"                       # or "over_limit"
//!
//! [[envoy.descriptors]]
//! domain = "edge"
//! keys = ["tenant", "path"]              # in any order
//! resource = "edge/tenants/{tenant}"     # {key}: its value; `path` is
//!                                        # left out, so all paths share
//! unit = "minute"                        # capacity is per minute
//! ```
//!
//! Must not: match templates (the server does, with the id made here) or
//! do I/O.

use super::Problem;

/// What a descriptor whose resource matches no template gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unmatched {
    /// Allowed (counted).
    #[default]
    Ok,
    /// Refused (counted).
    OverLimit,
}

/// The time unit a resource's capacity is counted in for Envoy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unit {
    /// Requests per second (Doorman's own unit).
    #[default]
    Second,
    /// Requests per minute.
    Minute,
    /// Requests per hour.
    Hour,
    /// Requests per day.
    Day,
}

impl Unit {
    const ALL: [(Unit, &'static str, f64); 4] = [
        (Unit::Second, "second", 1.0),
        (Unit::Minute, "minute", 60.0),
        (Unit::Hour, "hour", 3600.0),
        (Unit::Day, "day", 86400.0),
    ];

    /// Its length in seconds.
    pub fn seconds(self) -> f64 {
        Unit::ALL.iter().find(|u| u.0 == self).map_or(1.0, |u| u.2)
    }

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        Unit::ALL.iter().find(|u| u.0 == self).map_or("?", |u| u.1)
    }

    fn parse(name: &str) -> Option<Unit> {
        Unit::ALL.iter().find(|u| u.1 == name).map(|u| u.0)
    }
}

/// One piece of a mapping's resource name.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Value(String),
}

/// An explicit mapping.
#[derive(Debug, Clone, PartialEq)]
struct Mapping {
    domain: String,
    /// Sorted.
    keys: Vec<String>,
    resource: Vec<Part>,
    unit: Unit,
}

/// The `[envoy]` section.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EnvoyConfig {
    /// What an unmatched descriptor gets.
    pub unmatched: Unmatched,
    mappings: Vec<Mapping>,
}

/// The resource a descriptor names, and the unit of its capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// The resource id.
    pub resource_id: String,
    /// The unit its capacity counts in.
    pub unit: Unit,
}

impl EnvoyConfig {
    /// The resource that `entries` (key, value; in the order sent) in
    /// `domain` name: the first mapping for this domain and set of keys,
    /// else `D/k1=v1/k2=v2` per second.
    pub fn map(&self, domain: &str, entries: &[(&str, &str)]) -> Mapped {
        let mut keys: Vec<&str> = entries.iter().map(|e| e.0).collect();
        keys.sort_unstable();
        let found = self
            .mappings
            .iter()
            .find(|m| m.domain == domain && m.keys.iter().map(String::as_str).eq(keys.clone()));
        let Some(m) = found else {
            let mut id = domain.to_string();
            for (k, v) in entries {
                id.push('/');
                escape_into(&mut id, k);
                id.push('=');
                escape_into(&mut id, v);
            }
            return Mapped {
                resource_id: id,
                unit: Unit::Second,
            };
        };
        let mut id = String::new();
        for part in &m.resource {
            match part {
                Part::Text(t) => id.push_str(t),
                Part::Value(k) => {
                    let v = entries.iter().find(|e| e.0 == k).map_or("", |e| e.1);
                    escape_into(&mut id, v);
                }
            }
        }
        Mapped {
            resource_id: id,
            unit: m.unit,
        }
    }
}

/// Appends `text` with `%`, `/` and `=` percent-escaped.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
}

/// Parses the `[envoy]` table, adding every problem found.
pub(super) fn parse(value: Option<&toml::Value>, problems: &mut Vec<Problem>) -> EnvoyConfig {
    let mut out = EnvoyConfig::default();
    let Some(value) = value else {
        return out;
    };
    let mut problem = |field: &str, reason: String| {
        problems.push(Problem {
            resource: None,
            field: format!("envoy.{field}"),
            reason,
        })
    };
    let Some(t) = value.as_table() else {
        problem("", "must be a table ([envoy])".into());
        return out;
    };
    for key in t.keys() {
        if key != "unmatched" && key != "descriptors" {
            problem(
                key,
                "unknown field (expected unmatched, descriptors)".into(),
            );
        }
    }
    match t.get("unmatched").map(|v| v.as_str()) {
        None => {}
        Some(Some("ok")) => out.unmatched = Unmatched::Ok,
        Some(Some("over_limit")) => out.unmatched = Unmatched::OverLimit,
        Some(_) => problem("unmatched", "must be \"ok\" or \"over_limit\"".into()),
    }
    match t.get("descriptors") {
        None => {}
        Some(toml::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let field = format!("descriptors[{i}]");
                match mapping(item) {
                    Ok(m) => out.mappings.push(m),
                    Err((f, reason)) => problem(&format!("{field}{f}"), reason),
                }
            }
        }
        Some(_) => problem(
            "descriptors",
            "must be an array of tables ([[envoy.descriptors]])".into(),
        ),
    }
    out
}

/// One `[[envoy.descriptors]]` entry, or (field suffix, reason).
fn mapping(item: &toml::Value) -> Result<Mapping, (String, String)> {
    let err = |f: &str, r: &str| Err((f.to_string(), r.to_string()));
    let Some(t) = item.as_table() else {
        return err("", "must be a table");
    };
    if let Some(k) = t
        .keys()
        .find(|k| !["domain", "keys", "resource", "unit"].contains(&k.as_str()))
    {
        return Err((
            format!(".{k}"),
            "unknown field (expected domain, keys, resource, unit)".into(),
        ));
    }
    let Some(domain) = t
        .get("domain")
        .and_then(|v| v.as_str())
        .filter(|d| !d.is_empty())
    else {
        return err(".domain", "required: a non-empty string");
    };
    let keys: Option<Vec<String>> = t.get("keys").and_then(|v| v.as_array()).map(|a| {
        a.iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect()
    });
    let Some(mut keys) = keys.filter(|k| !k.is_empty()) else {
        return err(".keys", "required: a non-empty array of strings");
    };
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) || keys.iter().any(String::is_empty) {
        return err(".keys", "keys must be distinct, non-empty strings");
    }
    let unit = match t.get("unit").map(|v| v.as_str()) {
        None => Unit::Second,
        Some(Some(name)) => Unit::parse(name).ok_or((
            ".unit".to_string(),
            "must be \"second\", \"minute\", \"hour\" or \"day\"".to_string(),
        ))?,
        Some(None) => return err(".unit", "must be a string"),
    };
    let Some(text) = t
        .get("resource")
        .and_then(|v| v.as_str())
        .filter(|r| !r.is_empty())
    else {
        return err(".resource", "required: a non-empty string");
    };
    let resource = parts(text, &keys).map_err(|r| (".resource".to_string(), r.to_string()))?;
    Ok(Mapping {
        domain: domain.to_string(),
        keys,
        resource,
        unit,
    })
}

/// What is wrong with a mapping's `resource` template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum TemplateError {
    #[error("unclosed '{{' in {0:?}")]
    Unclosed(String),
    #[error("{{{key}}} is not one of the keys {keys:?}")]
    UnknownKey { key: String, keys: Vec<String> },
    #[error("'}}' without '{{' in {0:?}")]
    Unopened(String),
}

/// Splits `a/{k}/b` into text and `{key}` placeholders, each naming one of
/// `keys`.
fn parts(text: &str, keys: &[String]) -> Result<Vec<Part>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            out.push(Part::Text(rest[..open].to_string()));
        }
        let Some(close) = rest[open..].find('}') else {
            return Err(TemplateError::Unclosed(text.to_string()));
        };
        let key = &rest[open + 1..open + close];
        if !keys.iter().any(|k| k == key) {
            return Err(TemplateError::UnknownKey {
                key: key.to_string(),
                keys: keys.to_vec(),
            });
        }
        out.push(Part::Value(key.to_string()));
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(TemplateError::Unopened(text.to_string()));
    }
    if !rest.is_empty() {
        out.push(Part::Text(rest.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<EnvoyConfig, Vec<Problem>> {
        let table: toml::Table = text.parse().expect("toml");
        let mut problems = Vec::new();
        let c = parse(table.get("envoy"), &mut problems);
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(problems)
        }
    }

    #[test]
    fn the_default_name_joins_domain_and_entries_in_order() {
        let c = EnvoyConfig::default();
        let m = c.map("edge", &[("generic_key", "api"), ("tenant", "a")]);
        assert_eq!(m.resource_id, "edge/generic_key=api/tenant=a");
        assert_eq!(m.unit, Unit::Second);
    }

    #[test]
    fn a_value_cannot_name_another_descriptors_resource() {
        let c = EnvoyConfig::default();
        let one = c.map("edge", &[("tenant", "a/path=x")]).resource_id;
        let two = c.map("edge", &[("tenant", "a"), ("path", "x")]).resource_id;
        assert_eq!(one, "edge/tenant=a%2Fpath%3Dx");
        assert_eq!(two, "edge/tenant=a/path=x");
        assert_eq!(c.map("e", &[("k", "100%")]).resource_id, "e/k=100%25");
    }

    #[test]
    fn a_mapping_renames_drops_values_and_sets_the_unit() {
        let c = config(
            "[envoy]\nunmatched = \"over_limit\"\n\
             [[envoy.descriptors]]\ndomain = \"edge\"\nkeys = [\"tenant\", \"path\"]\n\
             resource = \"edge/tenants/{tenant}\"\nunit = \"minute\"\n",
        )
        .expect("valid");
        assert_eq!(c.unmatched, Unmatched::OverLimit);
        let m = c.map("edge", &[("path", "/x"), ("tenant", "a")]);
        assert_eq!(m.resource_id, "edge/tenants/a");
        assert_eq!(m.unit, Unit::Minute);
        assert_eq!(m.unit.seconds(), 60.0);
        // Another path shares the limit; other keys or domains keep the default.
        assert_eq!(
            c.map("edge", &[("tenant", "a"), ("path", "/y")])
                .resource_id,
            "edge/tenants/a"
        );
        assert_eq!(
            c.map("edge", &[("tenant", "a")]).resource_id,
            "edge/tenant=a"
        );
        assert_eq!(
            c.map("other", &[("tenant", "a"), ("path", "/y")])
                .resource_id,
            "other/tenant=a/path=%2Fy"
        );
    }

    #[test]
    fn bad_sections_are_reported_with_field_and_reason() {
        let cases = [
            ("[envoy]\nunmatched = \"deny\"\n", "envoy.unmatched"),
            ("[envoy]\nfoo = 1\n", "envoy.foo"),
            (
                "[[envoy.descriptors]]\nkeys = [\"a\"]\nresource = \"x\"\n",
                "envoy.descriptors[0].domain",
            ),
            (
                "[[envoy.descriptors]]\ndomain = \"d\"\nkeys = []\nresource = \"x\"\n",
                "envoy.descriptors[0].keys",
            ),
            (
                "[[envoy.descriptors]]\ndomain = \"d\"\nkeys = [\"a\"]\nresource = \"x/{b}\"\n",
                "envoy.descriptors[0].resource",
            ),
            (
                "[[envoy.descriptors]]\ndomain = \"d\"\nkeys = [\"a\"]\nresource = \"x/{a\"\n",
                "envoy.descriptors[0].resource",
            ),
            (
                "[[envoy.descriptors]]\ndomain = \"d\"\nkeys = [\"a\"]\nresource = \"x\"\nunit = \"week\"\n",
                "envoy.descriptors[0].unit",
            ),
        ];
        for (text, field) in cases {
            let problems = config(text).expect_err(text);
            assert_eq!(problems[0].field, field, "{text}");
            assert!(!problems[0].reason.is_empty());
        }
    }
}
