//! `doorman_client._native`: Python bindings of the Rust Doorman client
//! (`doorman-client`), built with maturin. The Python package
//! (`python/doorman_client`) re-exports these classes with the exceptions
//! and type stubs.
//!
//! * `client.rs`: `Client` — builds the Rust client on a runtime it owns.
//! * `rate.rs`, `gauge.rs`: the resources and the gauge's permit.
//! * `refusal.rs`: why the server refuses a resource.
//! * `shared.rs`: what they share, and the bridges from Python to the Rust
//!   futures (blocking with the GIL released; asyncio).
//! * `args.rs`, `errors.rs`: arguments and exceptions.
//!
//! Must not: implement the protocol, leases or limiters a second time —
//! everything here calls the Rust client.

use pyo3::prelude::*;

mod args;
mod client;
mod errors;
mod gauge;
mod rate;
mod refusal;
mod shared;

/// The native part of doorman_client; import doorman_client instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The asyncio bridge (pyo3-async-runtimes) awaits the clients' tasks on
    // a runtime of its own; one thread is plenty for that. Each client runs
    // its work on its own runtime.
    let mut bridge = tokio::runtime::Builder::new_multi_thread();
    bridge
        .worker_threads(1)
        .thread_name("doorman-asyncio")
        .enable_all();
    pyo3_async_runtimes::tokio::init(bridge);
    m.add_class::<client::PyClient>()?;
    m.add_class::<rate::RateResource>()?;
    m.add_class::<gauge::GaugeResource>()?;
    m.add_class::<gauge::GaugePermit>()?;
    m.add_class::<refusal::Refusal>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
