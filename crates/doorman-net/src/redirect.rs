//! The responses that may carry a mastership redirect, as the
//! [`crate::Connector`] follows them.
//!
//! Must not: follow a redirect (the connector does).

use doorman_proto::doorman as pb;

/// Responses that may carry a mastership redirect.
pub trait Redirect {
    /// The mastership field (present = "I am not the master").
    fn mastership(&self) -> Option<&pb::Mastership>;
}

impl Redirect for pb::GetCapacityResponse {
    fn mastership(&self) -> Option<&pb::Mastership> {
        self.mastership.as_ref()
    }
}
impl Redirect for pb::GetServerCapacityResponse {
    fn mastership(&self) -> Option<&pb::Mastership> {
        self.mastership.as_ref()
    }
}
impl Redirect for pb::ReleaseCapacityResponse {
    fn mastership(&self) -> Option<&pb::Mastership> {
        self.mastership.as_ref()
    }
}
