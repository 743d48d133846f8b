//! Why a request, or some of its resources, were refused, as data: which
//! resources (their index in the request and their id) and which reason
//! (no access rule allows it, an invalid field, a field over one of the
//! protocol's limits). The access rules (`config::Acl::denials`) and the shells'
//! request validation build it; the shells carry it on the wire as
//! structured details beside a short human message for clients that read
//! only a status ([`RequestRefusal::message`]); our clients rebuild it from
//! the details and never parse a message.
//!
//! Must not: know the wire (the shells map a refusal to a status and its
//! details) or decide anything (the access rules and validation do).

use std::fmt;
use std::sync::Arc;

use crate::action::Action;

/// Most bytes of the human message of a refusal (before the wire's
/// percent-encoding): enough to name a few dozen resources to a person,
/// small enough to travel with the structured details in the response's
/// trailers (see `docs/security.md`).
pub const MESSAGE_BYTES: usize = 1024;

/// Most bytes of one resource's problem in a human message.
const ITEM_BYTES: usize = 300;

/// Why a request is refused, naming the identity, the action and the
/// resource if there is one (ids inside `"…"` as they are, unescaped).
pub fn denial(identity: Option<&str>, action: Action, resource: Option<&str>) -> String {
    let who = match identity {
        Some(id) => format!("identity \"{id}\""),
        None => "an unauthenticated caller (no client certificate or token)".into(),
    };
    match (action, resource) {
        (Action::Read, _) => {
            format!("{who} may not read the status pages: no access rule allows it")
        }
        (_, Some(resource)) => {
            format!("{who} may not {action} resource \"{resource}\": no access rule allows it")
        }
        (_, None) => {
            format!("{who} may not {action} these resources: no access rule allows it")
        }
    }
}

/// Why something was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// No access rule lets `identity` do `action` on it.
    Denied {
        /// The caller's identity (`None`: unauthenticated).
        identity: Option<Arc<str>>,
        /// What it wanted to do.
        action: Action,
    },
    /// A field is invalid.
    Invalid {
        /// The field's path: inside the resource's entry (`wants`,
        /// `wants[1].num_clients`) for a resource, else in the request
        /// (`client_id`).
        field: String,
        /// What is wrong with it (`must not be empty`).
        problem: String,
    },
    /// A field is over one of the protocol's limits
    /// ([`crate::limits`]).
    OverLimit {
        /// The field's path, as for [`Reason::Invalid`].
        field: String,
        /// The limit and what the request had (`must be at most 1024
        /// bytes, got 1500`).
        problem: String,
    },
}

impl Reason {
    /// The field it concerns (`None` for a denial, which concerns the
    /// whole entry).
    pub fn field(&self) -> Option<&str> {
        match self {
            Reason::Denied { .. } => None,
            Reason::Invalid { field, .. } | Reason::OverLimit { field, .. } => Some(field),
        }
    }

    /// A field's problem, for people (`must not be empty`); a denial's
    /// reason without its subject.
    pub fn problem(&self) -> String {
        match self {
            Reason::Denied { .. } => "no access rule allows it".into(),
            Reason::Invalid { problem, .. } | Reason::OverLimit { problem, .. } => problem.clone(),
        }
    }

    /// True for a denial by the access rules.
    pub fn is_denial(&self) -> bool {
        matches!(self, Reason::Denied { .. })
    }
}

impl fmt::Display for Reason {
    /// The reason on its own: `field: problem`, or for a denial who may
    /// not do what (a denial of one resource names it: see
    /// [`ResourceRefusal`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Denied { identity, action } => {
                f.write_str(&denial(identity.as_deref(), *action, None))
            }
            _ => write!(f, "{}: {}", self.field().unwrap_or(""), self.problem()),
        }
    }
}

/// One resource of a request refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRefusal {
    /// Its index among the request's entries, as sent.
    pub index: usize,
    /// Its id.
    pub resource_id: String,
    /// Why.
    pub reason: Reason,
}

impl fmt::Display for ResourceRefusal {
    /// `resource[2].wants: must be …`, or who may not do what to
    /// resource "ID".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Denied { identity, action } => {
                let id = Some(self.resource_id.as_str());
                f.write_str(&denial(identity.as_deref(), *action, id))
            }
            r => {
                write!(f, "resource[{}]", self.index)?;
                if let Some(field) = r.field().filter(|x| !x.is_empty()) {
                    write!(f, ".{field}")?;
                }
                write!(f, ": {}", r.problem())
            }
        }
    }
}

/// Why a whole request was refused: a problem of the request itself
/// (every resource refused), or each refused resource.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestRefusal {
    /// A problem of the request as a whole (its requester id, its size, a
    /// denial not about resources such as reading the status pages).
    pub request: Option<Reason>,
    /// The resources refused, in request order.
    pub resources: Vec<ResourceRefusal>,
}

impl RequestRefusal {
    /// A refusal of the request as a whole.
    pub fn whole(reason: Reason) -> Self {
        RequestRefusal {
            request: Some(reason),
            resources: Vec::new(),
        }
    }

    /// A refusal of these resources (`None` if there are none).
    pub fn of(resources: Vec<ResourceRefusal>) -> Option<Self> {
        (!resources.is_empty()).then_some(RequestRefusal {
            request: None,
            resources,
        })
    }

    /// True if the access rules refused it (PERMISSION_DENIED on the
    /// wire), false if it is invalid (INVALID_ARGUMENT).
    pub fn is_denial(&self) -> bool {
        let mut all = self
            .request
            .iter()
            .chain(self.resources.iter().map(|r| &r.reason));
        all.any(Reason::is_denial)
    }

    /// The first reason, for logs and metrics.
    pub fn first(&self) -> Option<&Reason> {
        (self.request.as_ref()).or_else(|| self.resources.first().map(|r| &r.reason))
    }

    /// Applies `f` to each resource's index (a shell that validated a
    /// request and left entries out maps the core's indices back to the
    /// request's).
    pub fn reindex(mut self, f: impl Fn(usize) -> usize) -> Self {
        for r in &mut self.resources {
            r.index = f(r.index);
        }
        self
    }

    /// The human message, at most about [`MESSAGE_BYTES`]: the request's
    /// problem, else each resource's, then how many more. A denial reads
    /// `identity "X" may not acquire resource "A": no access rule allows
    /// it (also denied: "B", "C", and 3 more)`; invalid entries read
    /// `resource[0].wants: …; resource[3].has.capacity: …; and 2 more`.
    pub fn message(&self) -> String {
        if let Some(r) = &self.request {
            return cut(&r.to_string(), MESSAGE_BYTES);
        }
        let Some(first) = self.resources.first() else {
            return String::new();
        };
        if first.reason.is_denial() {
            let mut out = cut(&first.to_string(), ITEM_BYTES);
            let others = self.resources[1..].iter();
            let quoted = others.map(|r| format!("\"{}\"", cut(&r.resource_id, ITEM_BYTES)));
            let budget = MESSAGE_BYTES.saturating_sub(out.len() + " (also denied: )".len());
            let also = join_bounded(quoted, ", ", budget);
            if !also.is_empty() {
                out.push_str(&format!(" (also denied: {also})"));
            }
            return out;
        }
        let each = self
            .resources
            .iter()
            .map(|r| cut(&r.to_string(), ITEM_BYTES));
        join_bounded(each, "; ", MESSAGE_BYTES)
    }
}

impl fmt::Display for RequestRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// `items` joined by `sep`, then `{sep}and N more` for those left out:
/// all of it within `budget` bytes, except that the first item is always
/// there.
pub fn join_bounded(
    items: impl ExactSizeIterator<Item = String>,
    sep: &str,
    budget: usize,
) -> String {
    // Room for the tail: "and " + up to 20 digits + " more".
    const TAIL: usize = 29;
    let total = items.len();
    let mut out = String::new();
    for (i, item) in items.enumerate() {
        let last = i + 1 == total;
        let tail = if last { 0 } else { sep.len() + TAIL };
        if i > 0 && out.len() + sep.len() + item.len() + tail > budget {
            out.push_str(&format!("{sep}and {} more", total - i));
            break;
        }
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(&item);
    }
    out
}

/// `s` cut to at most `max` bytes at a character boundary, marked `…` if
/// cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let end = (0..=max)
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests;
