//! Config reloads. Installing a config is O(1): the core takes the new
//! config and bumps its generation; each resource re-binds to it the next
//! time anything touches it (a request, a cleanup or status step), so a
//! reload never walks every resource while the core is held. Until then a
//! resource behaves as it did under the old config, which is what it would
//! have done had the reload arrived a moment later.
//!
//! Must not: forget a live lease. Leases handed out keep counting against
//! the capacity whatever the reload does.
//!
//! The rule is [`Node::replace_config`](super::Node::replace_config):
//! leases and learning end times survive; resources re-bind to their new
//! templates (a new capacity applies at the next decision, and leases
//! already handed out keep counting against it). A resource no template
//! matches any more keeps its old template until its last live lease
//! expires, and no lease handed out meanwhile outlives that; then it is
//! served as unmatched. A reload never lets Σ of unexpired grants jump.
