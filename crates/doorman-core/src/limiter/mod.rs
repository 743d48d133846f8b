//! The pure limiters a lease is spent through, shared by the client
//! library's resources and the server's Envoy rate limit service: a token
//! bucket refilled at the granted rate ([`TokenBucket`]) and a sliding
//! window of use estimating what a resource wants ([`UsageWindow`]). Both
//! are driven by the [`Time`](doorman_lease::Time) they are given.
//!
//! Must not: read a clock, lock, or know the resource that holds them.

mod bucket;
mod window;

pub use bucket::TokenBucket;
pub use window::{UsageWindow, DECAY, WINDOW_SLOTS};
