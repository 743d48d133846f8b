//! What a caller wants to do with a resource or a server: the actions
//! the access rules (`config::Acl`) allow and a refusal names
//! (`refusal::Reason::Denied`).
//!
//! Must not: decide who may do what (the access rules do).

use std::fmt;

/// What a caller wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Lease capacity as an end client (GetCapacity).
    Acquire,
    /// Lease capacity as a downstream server (GetServerCapacity).
    Serve,
    /// Read the status pages.
    Read,
}

impl Action {
    const ALL: [(Action, &'static str); 3] = [
        (Action::Acquire, "acquire"),
        (Action::Serve, "serve"),
        (Action::Read, "read"),
    ];

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        Action::ALL
            .iter()
            .find(|(a, _)| *a == self)
            .map_or("?", |(_, n)| n)
    }

    /// The action named `name` in the config (`None` for any other name).
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(a, _)| *a)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
