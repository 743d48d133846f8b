//! Access rules (`[[access]]` in the resource config): which identities
//! (globs) may do which actions (`acquire`: GetCapacity, `serve`: act as a
//! downstream server with GetServerCapacity, `read`: the status pages) on
//! which resources (globs). With no rule, everything is allowed (as before
//! rules existed); once any rule exists, what no rule allows is denied. A
//! caller without an identity (no client certificate, no token) matches no
//! rule. Rules only allow; their order does not change the outcome.
//!
//! ```toml
//! [[access]]
//! identities = ["spiffe://example.org/web/*"]
//! resources = ["db/*"]          # default ["*"]
//! actions = ["acquire"]
//! ```
//!
//! Must not: find out who a caller is (the shells do, from certificates
//! and tokens) or do I/O.

use std::sync::Arc;

use super::Problem;
use crate::action::Action;
use crate::refusal::{Reason, RequestRefusal, ResourceRefusal};
/// A glob with its text.
#[derive(Debug, Clone)]
struct Glob {
    text: String,
    pattern: glob::Pattern,
}

impl Glob {
    fn matches(&self, s: &str) -> bool {
        self.pattern.matches(s)
    }

    /// Does every string this glob matches also match `outer`? Decided for
    /// the forms rules use: equal text, `*`, and `prefix*` patterns.
    fn covered_by(&self, outer: &Glob) -> bool {
        let o = &outer.text;
        if o == "*" || *o == self.text {
            return true;
        }
        match o.strip_suffix('*') {
            Some(prefix) if !prefix.contains(['*', '?', '[']) => self.text.starts_with(prefix),
            _ => false,
        }
    }
}

/// One `[[access]]` rule.
#[derive(Debug, Clone)]
struct Rule {
    identities: Vec<Glob>,
    resources: Vec<Glob>,
    actions: Vec<Action>,
}

impl Rule {
    fn allows(&self, identity: &str, action: Action, resource: &str) -> bool {
        self.actions.contains(&action)
            && self.identities.iter().any(|g| g.matches(identity))
            && (action == Action::Read || self.resources.iter().any(|g| g.matches(resource)))
    }

    /// Does `self` allow everything `other` allows?
    fn covers(&self, other: &Rule) -> bool {
        let all = |inner: &[Glob], outer: &[Glob]| {
            inner.iter().all(|i| outer.iter().any(|o| i.covered_by(o)))
        };
        other.actions.iter().all(|a| self.actions.contains(a))
            && all(&other.identities, &self.identities)
            && all(&other.resources, &self.resources)
    }
}

/// The access rules of a config.
#[derive(Debug, Clone, Default)]
pub struct Acl {
    rules: Vec<Rule>,
}

impl Acl {
    /// How many rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True without rules: everything is allowed.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// May `identity` do `action` on `resource` (ignored for `read`)?
    pub fn allows(&self, identity: Option<&str>, action: Action, resource: &str) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        let Some(id) = identity else { return false };
        self.rules.iter().any(|r| r.allows(id, action, resource))
    }

    /// Every resource of `ids` (index, id) that `identity` may not do
    /// `action` on; for `read`, which concerns no resource, a refusal of
    /// the request as a whole. `None` if all is allowed.
    pub fn denials<'a>(
        &self,
        identity: Option<&str>,
        action: Action,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Option<RequestRefusal> {
        if self.rules.is_empty() {
            return None;
        }
        let reason = || Reason::Denied {
            identity: identity.map(Arc::from),
            action,
        };
        if action == Action::Read {
            let denied = !self.allows(identity, action, "");
            return denied.then(|| RequestRefusal::whole(reason()));
        }
        let mut denied = ids
            .into_iter()
            .enumerate()
            .filter(|(_, id)| !self.allows(identity, action, id))
            .peekable();
        denied.peek()?;
        let why = reason();
        let resources = denied.map(|(index, id)| ResourceRefusal {
            index,
            resource_id: id.to_string(),
            reason: why.clone(),
        });
        RequestRefusal::of(resources.collect())
    }

    /// Rules that can never change an outcome: covered by an earlier rule,
    /// or listing resources for `read` only (read ignores them).
    pub fn unreachable(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            if let Some(j) = self.rules[..i].iter().position(|e| e.covers(r)) {
                out.push(format!(
                    "access[{i}]: never needed: access[{j}] already allows everything it allows"
                ));
            }
            let only_read = r.actions.iter().all(|a| *a == Action::Read);
            if only_read && r.resources.iter().any(|g| g.text != "*") {
                out.push(format!(
                    "access[{i}].resources: ignored: `read` is for the status pages of all resources"
                ));
            }
        }
        out
    }
}

/// Parses the `access` array, adding every problem to `problems`.
pub(super) fn parse(value: Option<&toml::Value>, problems: &mut Vec<Problem>) -> Acl {
    let mut acl = Acl::default();
    let Some(value) = value else { return acl };
    let Some(items) = value.as_array() else {
        problems.push(problem("access", "must be an array of tables ([[access]])"));
        return acl;
    };
    for (i, item) in items.iter().enumerate() {
        if let Some(rule) = parse_rule(i, item, problems) {
            acl.rules.push(rule);
        }
    }
    acl
}

fn problem(field: &str, reason: impl Into<String>) -> Problem {
    Problem {
        resource: None,
        field: field.to_string(),
        reason: reason.into(),
    }
}

fn parse_rule(i: usize, item: &toml::Value, problems: &mut Vec<Problem>) -> Option<Rule> {
    let before = problems.len();
    let Some(table) = item.as_table() else {
        problems.push(problem(&format!("access[{i}]"), "must be a table"));
        return None;
    };
    for key in table.keys() {
        if !["identities", "resources", "actions"].contains(&key.as_str()) {
            let reason = "unknown key (expected identities, resources, actions)";
            problems.push(problem(&format!("access[{i}].{key}"), reason));
        }
    }
    let identities = globs(i, "identities", table.get("identities"), problems);
    let resources = match table.get("resources") {
        None => globs(
            i,
            "resources",
            Some(&toml::Value::from(vec!["*"])),
            problems,
        ),
        v => globs(i, "resources", v, problems),
    };
    let actions = actions(i, table.get("actions"), problems);
    (problems.len() == before).then_some(Rule {
        identities,
        resources,
        actions,
    })
}

/// What is wrong with one string of a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ItemError {
    #[error("must be a string")]
    NotAString,
    #[error("must not be empty")]
    Empty,
    #[error("invalid glob \"{glob}\": {error}")]
    Glob { glob: String, error: String },
    #[error("unknown action \"{0}\" (expected acquire, serve or read)")]
    UnknownAction(String),
}

/// A non-empty array of strings, each checked by `each`.
fn strings<T>(
    field: &str,
    v: Option<&toml::Value>,
    problems: &mut Vec<Problem>,
    mut each: impl FnMut(&str) -> Result<T, ItemError>,
) -> Vec<T> {
    let Some(items) = v.and_then(|v| v.as_array()) else {
        problems.push(problem(field, "required: a non-empty array of strings"));
        return Vec::new();
    };
    if items.is_empty() {
        problems.push(problem(field, "must not be empty"));
    }
    let mut out = Vec::new();
    for (j, item) in items.iter().enumerate() {
        let r = item
            .as_str()
            .ok_or(ItemError::NotAString)
            .and_then(&mut each);
        match r {
            Ok(x) => out.push(x),
            Err(e) => problems.push(problem(&format!("{field}[{j}]"), e.to_string())),
        }
    }
    out
}

fn globs(i: usize, name: &str, v: Option<&toml::Value>, problems: &mut Vec<Problem>) -> Vec<Glob> {
    strings(&format!("access[{i}].{name}"), v, problems, |s| {
        if s.is_empty() {
            return Err(ItemError::Empty);
        }
        glob::Pattern::new(s)
            .map(|pattern| Glob {
                text: s.to_string(),
                pattern,
            })
            .map_err(|e| ItemError::Glob {
                glob: s.to_string(),
                error: e.to_string(),
            })
    })
}

fn actions(i: usize, v: Option<&toml::Value>, problems: &mut Vec<Problem>) -> Vec<Action> {
    strings(&format!("access[{i}].actions"), v, problems, |s| {
        Action::from_name(s).ok_or_else(|| ItemError::UnknownAction(s.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(text: &str) -> Result<Acl, Vec<Problem>> {
        let table: toml::Table = text.parse().unwrap();
        let mut problems = Vec::new();
        let acl = parse(table.get("access"), &mut problems);
        if problems.is_empty() {
            Ok(acl)
        } else {
            Err(problems)
        }
    }

    const RULES: &str = r#"
        [[access]]
        identities = ["spiffe://example.org/web/*"]
        resources = ["db/*"]
        actions = ["acquire"]
        [[access]]
        identities = ["leaf.example.org"]
        actions = ["serve", "read"]
    "#;

    #[test]
    fn no_rules_allow_everything_even_without_an_identity() {
        let open = acl("").unwrap();
        assert!(open.is_empty());
        assert!(open.allows(None, Action::Serve, "x"));
    }

    #[test]
    fn rules_allow_only_what_they_list() {
        let a = acl(RULES).unwrap();
        let web = Some("spiffe://example.org/web/frontend");
        assert!(a.allows(web, Action::Acquire, "db/users"));
        assert!(!a.allows(web, Action::Acquire, "cache/x"));
        assert!(!a.allows(web, Action::Serve, "db/users"));
        assert!(!a.allows(web, Action::Read, ""));
        assert!(!a.allows(None, Action::Acquire, "db/users"));
        let leaf = Some("leaf.example.org");
        assert!(a.allows(leaf, Action::Serve, "anything"));
        assert!(a.allows(leaf, Action::Read, ""));
        assert!(!a.allows(leaf, Action::Acquire, "db/users"));
    }

    #[test]
    fn denials_name_identity_action_and_resource() {
        let m = crate::refusal::denial(Some("spiffe://x/y"), Action::Serve, Some("db/a"));
        assert_eq!(
            m,
            "identity \"spiffe://x/y\" may not serve resource \"db/a\": no access rule allows it"
        );
        assert!(
            crate::refusal::denial(None, Action::Acquire, Some("r")).contains("unauthenticated")
        );
    }

    #[test]
    fn bad_rules_list_every_problem() {
        let e = acl(r#"
            [[access]]
            identities = []
            actions = ["take"]
            colour = "red"
            [[access]]
            identities = ["[x"]
            resources = [3]
            "#)
        .unwrap_err();
        let fields: Vec<_> = e.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "access[0].colour",
                "access[0].identities",
                "access[0].actions[0]",
                "access[1].identities[0]",
                "access[1].resources[0]",
                "access[1].actions"
            ]
        );
    }

    #[test]
    fn covered_and_read_only_resource_rules_are_reported() {
        let a = acl(r#"
            [[access]]
            identities = ["*"]
            resources = ["db/*"]
            actions = ["acquire", "serve"]
            [[access]]
            identities = ["web"]
            resources = ["db/users", "db/x*"]
            actions = ["acquire"]
            [[access]]
            identities = ["web"]
            resources = ["cache/*"]
            actions = ["acquire"]
            [[access]]
            identities = ["ops"]
            resources = ["db/*"]
            actions = ["read"]
            "#)
        .unwrap();
        let u = a.unreachable();
        assert_eq!(u.len(), 2, "{u:?}");
        assert!(u[0].starts_with("access[1]: never needed: access[0]"));
        assert!(u[1].starts_with("access[3].resources: ignored"));
    }

    #[test]
    fn a_denial_names_every_refused_resource_by_index_and_id() {
        let acl = acl(r#"
            [[access]]
            identities = ["db/a"]
            resources = ["ok"]
            actions = ["acquire"]
        "#)
        .unwrap();
        let ids = ["ok", r"x\y", "q\"r", "z"];
        let d = acl.denials(Some("db/a"), Action::Acquire, ids).unwrap();
        let named: Vec<(usize, &str)> = d
            .resources
            .iter()
            .map(|r| (r.index, r.resource_id.as_str()))
            .collect();
        assert_eq!(named, [(1, r"x\y"), (2, "q\"r"), (3, "z")]);
        assert!(d.request.is_none() && d.is_denial());
        let why = Reason::Denied {
            identity: Some(Arc::from("db/a")),
            action: Action::Acquire,
        };
        assert!(d.resources.iter().all(|r| r.reason == why));
        assert_eq!(
            d.message(),
            r#"identity "db/a" may not acquire resource "x\y": no access rule allows it (also denied: "q"r", "z")"#
        );
        assert!(acl.denials(Some("db/a"), Action::Acquire, ["ok"]).is_none());
        let read = acl
            .denials(Some("db/a"), Action::Read, ["ignored"])
            .unwrap();
        assert!(read.resources.is_empty() && read.request.is_some());
        assert!(read.message().contains("may not read the status pages"));
        assert!(Acl::default().denials(None, Action::Read, []).is_none());
    }
}
