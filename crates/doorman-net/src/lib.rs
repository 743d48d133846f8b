//! What a connection to a Doorman server needs, on either side of it: the
//! TLS files and the one place an address becomes an endpoint (`tls`), the
//! bearer token sent on every call (`bearer`), this host's name
//! (`host`), the lease and wall clocks (`clock`, the one definition of
//! the clock both inject), a refused request as a status with details,
//! written by the server and read by the clients (`refusal`), and the
//! [`Connector`] that finds a node's master and calls it (`connector`),
//! and the lease stream beside it (`lease_stream`, `stream_link`).
//! The client library and an intermediate server's parent link both use
//! it, and the server reads its own PEM files with it, so the server needs
//! nothing of the client library.
//!
//! Must not: retry by itself or decide anything about leases.

pub mod bearer;
pub mod clock;
pub mod connector;
pub mod host;
pub mod lease_stream;
pub mod page;
mod redirect;
pub mod refusal;
pub mod stream_link;
pub mod tls;

pub use bearer::{BearerToken, TokenError};
pub use clock::{lease_clock, wall_clock, Clock};
pub use connector::{CallError, Connector};
pub use host::hostname;
pub use lease_stream::{Incoming, LeaseStream, ServerLeaseStream, StreamRequest};
pub use stream_link::StreamLink;
pub use tls::{ClientTls, EndpointError, TlsFileError};
