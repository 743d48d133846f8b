//! The Python `Refusal`: why the server refuses a resource, one per
//! resource, as the Rust client read it from the refusal's status details
//! (never from its message).
//!
//! Must not: read a server message to find out what it says.

use doorman_client::{RefusalReason, Refused};
use pyo3::prelude::*;

/// Why the server refuses a resource: its access rules ("denied"), a field
/// of the request for it ("invalid"), or a field over one of the
/// protocol's limits ("over_limit").
#[pyclass(frozen, module = "doorman_client", name = "Refusal")]
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    reason: &'static str,
    field: Option<String>,
    identity: Option<String>,
    action: Option<&'static str>,
    message: String,
}

impl Refusal {
    /// The refusal of resource `id`.
    pub(crate) fn new(id: &str, why: &Refused) -> Refusal {
        let message = why.describe(id);
        let mut r = Refusal {
            reason: if why.is_denial() { "denied" } else { "invalid" },
            field: None,
            identity: None,
            action: None,
            message,
        };
        match why {
            Refused::Reason(RefusalReason::Denied { identity, action }) => {
                r.identity = identity.as_deref().map(str::to_string);
                r.action = Some(action.name());
            }
            Refused::Reason(RefusalReason::Invalid { field, .. }) => r.field = Some(field.clone()),
            Refused::Reason(RefusalReason::OverLimit { field, .. }) => {
                r.reason = "over_limit";
                r.field = Some(field.clone());
            }
            Refused::Unexplained { .. } => {}
        }
        r
    }
}

#[pymethods]
impl Refusal {
    /// "denied" (the access rules), "invalid" (a field) or "over_limit"
    /// (a field over one of the protocol's limits).
    #[getter]
    fn reason(&self) -> &'static str {
        self.reason
    }

    /// The field refused, inside the resource's entry ("wants") or of the
    /// request ("client_id"); None for a denial.
    #[getter]
    fn field(&self) -> Option<String> {
        self.field.clone()
    }

    /// For a denial: the identity the server saw (None: unauthenticated).
    #[getter]
    fn identity(&self) -> Option<String> {
        self.identity.clone()
    }

    /// For a denial: what was denied ("acquire").
    #[getter]
    fn action(&self) -> Option<&'static str> {
        self.action
    }

    /// Why, for people.
    #[getter]
    fn message(&self) -> String {
        self.message.clone()
    }

    fn __eq__(&self, other: &Self) -> bool {
        self == other
    }

    fn __repr__(&self) -> String {
        format!(
            "<doorman_client.Refusal {} {:?}>",
            self.reason, self.message
        )
    }
}
