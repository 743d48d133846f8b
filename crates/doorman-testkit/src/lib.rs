//! What Doorman's tests share, and nothing production code may use (every
//! crate takes it as a dev-dependency only):
//!
//! * [`IsolatedServer`]: a server on its own runtime, killable like a
//!   crashed process; trees are built from these.
//! * [`EtcdProcess`]: a throwaway etcd on free loopback ports.
//! * [`envoy::EnvoyProcess`]: a real Envoy from `deploy/envoy/`, and a
//!   paced HTTP load through it.
//! * [`InMemoryElection`]: an in-process election shared by servers.
//! * [`ManualClock`]: a clock tests move by hand.
//! * [`Pki`]: a test CA issuing server and client certificates.
//! * [`FaultProxy`]: a TCP proxy that passes, silently drops or resets
//!   the link it carries.
//! * [`rpc`]: raw RPCs, pages and metrics of a server on the wire.
//! * [`eventually`], [`eventually_async`], [`eventually_blocking`]: poll a
//!   condition until it holds or a limit passes.
//!
//! Must not: be a normal dependency of any crate.

mod clock;
mod election;
pub mod envoy;
mod etcd;
mod eventually;
mod isolated;
mod pki;
mod proxy;
pub mod rpc;

pub use clock::ManualClock;
pub use election::InMemoryElection;
pub use etcd::{free_port, EtcdProcess, EtcdTlsFiles};
pub use eventually::{eventually, eventually_async, eventually_blocking};
pub use isolated::IsolatedServer;
pub use pki::{CertFiles, Name, Pki};
pub use proxy::{FaultProxy, LinkMode};
