//! How a connection reaches a lease server and who is on the other end:
//! the accept loop both ports use ([`listener`], with [`idle`] timeouts),
//! TLS and its reloads ([`tls`]), the identity a client certificate names
//! ([`identity`]), bearer tokens ([`auth`]), and the one loop every file
//! watcher runs ([`hangup`]). Built, tested and fuzzed without the core:
//! what an identity may do is the config's access rules, checked by the
//! gRPC and HTTP boundaries.
//!
//! Must not: decide what an identity may do, read a request's message, or
//! record metrics itself (it reports through [`tls::TlsEvents`]).

pub mod auth;
pub mod hangup;
pub mod identity;
pub mod idle;
pub mod listener;
pub mod tls;
