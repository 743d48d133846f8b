//! Where the wire messages (`doorman.proto`) meet the core's types, for
//! every side that reads or writes them: a request checked field by field
//! before the core sees it ([`validate`], with the original intermediate's
//! demand read as the original root reads it, [`legacy`]), and the core's
//! answers, redirects, algorithms and an intermediate's upstream request
//! and answer turned into messages and back ([`convert`]). The server's
//! gRPC service and Envoy front-ends use it; the fuzz targets reach
//! validation through it without building the server.
//!
//! Must not: hold state, do IO, or decide anything (the core does).

pub mod convert;
pub mod legacy;
pub mod tree;
pub mod validate;
