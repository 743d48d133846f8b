//! The Doorman client library.
//!
//! ```no_run
//! use doorman_client::{Client, Fallback, RateOptions};
//! # async fn f() -> Result<(), doorman_client::ClientError> {
//! let client = Client::builder()
//!     .servers(["127.0.0.1:6000", "127.0.0.1:6001"])
//!     .fallback(Fallback::Safe { default: 5.0 })
//!     .build()
//!     .await?;
//! let db = client.rate_resource("db/users/1", RateOptions::wants(100.0))?;
//! for _ in 0..1000 {
//!     db.wait().await; // at most the granted rate
//!     // … one query …
//! }
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! * Bottom half: [`Client`] (one background task: bulk refresh, discovery,
//!   redirects, backoff, fallback) driving the sans-IO [`ClientCore`]
//!   (from `doorman-core`).
//! * Top half: [`RateResource`] (token bucket) and [`GaugeResource`]
//!   (permits in flight), shared per resource id and reference counted.
//! * [`tower`] layers, [`ClientMetrics`], and the reusable [`Connector`].
//!
//! Must not: decide refreshes or capacity itself (`doorman-core` does).

mod acquire;
pub mod blocking;
mod builder;
mod client;
mod clock;
mod error;
mod gauge;
mod identity;
mod metrics;
mod observe;
mod rate;
mod registry;
mod resource;
mod stream;
mod task;
pub use doorman_net::tls;
pub mod tower;

/// Finding and calling a node's master (`doorman_net::connector`, shared
/// with intermediate servers' parent link).
pub mod connection {
    pub use doorman_net::connector::*;
}

/// The client's local limiting (now `doorman_core::limiter`, on the
/// core's [`Time`](doorman_lease::Time)), for front-ends that admit
/// requests themselves from a lease.
pub mod limiter {
    pub use doorman_core::limiter::{TokenBucket, UsageWindow};
}

pub use acquire::AcquireError;
pub use builder::ClientBuilder;
pub use client::Client;
pub use connection::{CallError, Connector};
pub use doorman_core::action::Action;
pub use doorman_core::client::{
    ClientCore, CoreOptions, Fallback, GrantItem, Mode, Refused, RequestItem,
};
pub use doorman_core::refusal::Reason as RefusalReason;
pub use doorman_core::Backoff;
pub use doorman_net::BearerToken;
pub use doorman_net::{ClientTls, TlsFileError};
pub use error::ClientError;
pub use gauge::{GaugeOptions, GaugePermit, GaugeResource};
pub use identity::{default_client_id, hostname, lease_clock, wall_clock, Clock};
pub use metrics::ClientMetrics;
pub use observe::{CapacityState, ConnectionState, Phase};
pub use rate::{RateOptions, RateResource};
pub use resource::{CapacityChanges, Kind, Wants, CHANGES_KEPT};
