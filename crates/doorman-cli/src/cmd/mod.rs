//! One file per subcommand of `doorman`; each owns its flags (`Args`) and
//! its `run`. `main.rs` lists exactly these.
//!
//! Must not: share state between subcommands.

pub mod config;
pub mod demo;
pub mod get;
pub mod loadtest;
pub mod server;
pub mod tree;
