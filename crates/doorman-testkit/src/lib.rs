//! What Doorman's tests share, and nothing production code may use (every
//! crate takes it as a dev-dependency only):
//!
//! * [`IsolatedServer`]: a server on its own runtime, killable like a
//!   crashed process; trees are built from these.
//! * [`EtcdProcess`]: a throwaway etcd on free loopback ports.
//! * [`envoy::EnvoyProcess`]: a real Envoy from `deploy/envoy/`, and a
//!   paced HTTP load through it.
//! * [`InMemoryElection`]: an in-process election shared by servers.
//! * [`config`]: configs built for a test instead of written as TOML.
//! * [`ManualClock`]: a clock tests move by hand.
//! * [`Pki`]: a test CA issuing server and client certificates.
//! * [`FaultProxy`]: a TCP proxy that passes, silently drops or resets
//!   the link it carries.
//! * [`free_port`]: a port for a process a test starts, that no other
//!   test process is given (shared with the Python checks).
//! * [`rpc`]: raw RPCs, pages and metrics of a server on the wire.
//! * [`eventually`], [`eventually_async`], [`eventually_blocking`]: poll a
//!   condition until it holds or a limit passes.
//!
//! Must not: be a normal dependency of any crate.

mod clock;
pub mod config;
mod election;
pub mod envoy;
mod etcd;
mod eventually;
mod isolated;
mod pki;
pub mod ports;
mod proxy;
pub mod rpc;

pub use clock::ManualClock;
pub use election::InMemoryElection;
pub use etcd::{EtcdProcess, EtcdTlsFiles};
pub use eventually::{eventually, eventually_async, eventually_blocking};
pub use isolated::IsolatedServer;
pub use pki::{CertFiles, Name, Pki};
pub use ports::free_port;
pub use proxy::{FaultProxy, LinkMode};
