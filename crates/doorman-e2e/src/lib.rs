//! Doorman's whole-system tests (in `tests/`): servers with the client
//! library, elections through a real etcd, trees of servers, Envoy in front
//! of a server, authentication end to end. They live here because they
//! need both the server and the client library, and neither crate may
//! depend on the other.
//!
//! Must not: hold code (the test kit, `doorman-testkit`, holds what tests
//! share).
