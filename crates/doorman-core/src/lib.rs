//! Everything in Doorman that decides, with no I/O: no sockets, no clock,
//! no runtime. Every entry point takes `now` (`doorman_lease::Time`) as an argument, so
//! the servers, the client library and the simulator run the same code
//! under real or virtual time.
//!
//! * [`server`]: the lease server's state machine (leases, learning mode,
//!   band aggregation, the upstream lease state of intermediate servers).
//! * [`client`]: the client library's bottom half (leases, refresh, retry,
//!   fallback).
//! * [`schedule`]: the one refresh schedule both of them follow.
//! * [`backoff`]: exponential backoff with jitter (deterministic per seed).
//! * [`limiter`]: the token bucket and usage window a lease is spent
//!   through (client resources, the server's Envoy service).
//! * [`config`]: the resource configuration model, its parser and
//!   validation, and template lookup.
//! * [`limits`]: the protocol's documented limits.
//! * [`convert`]: a client core's request as the server core's asks and
//!   its grants as the client core's answer, for shells that connect the
//!   two without a wire (the Envoy front-ends, the simulator).
//! * [`refusal`]: why a request or some of its resources were refused,
//!   as data (the wire carries it; nothing parses a message back).
//!
//! The shells convert wire messages into the core's own request and answer
//! types (`doorman-server`'s `grpc/`, `doorman-client`'s task, the
//! simulator), so this crate does not depend on the generated protobufs.
//!
//! Must not: read a clock, sleep, spawn, touch a socket or a file (a config
//! arrives as text, [`config::Config::parse`]), or panic on anything a
//! request or a config can contain.

pub mod action;
pub mod backoff;
pub mod client;
pub mod config;
pub mod convert;
pub mod limiter;
pub mod limits;
pub mod refusal;
pub mod schedule;
pub mod server;
pub mod tree;

pub use backoff::Backoff;
