//! `doorman-faults probe`: one TCP connection attempt from the host it is
//! run on (`ip netns exec`), to show what a rule of the harness's network
//! does rather than believe it: `refused` (a reset came back: packets pass
//! both ways to a closed port), `open`, or `timeout` (something was
//! dropped on the way there or back). Printed on standard output.
//!
//! Must not: send anything but the connection attempt.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use clap::Args as ClapArgs;

/// The probe's options.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Where to connect (a closed port answers with a reset).
    #[arg(long)]
    pub to: SocketAddr,
    /// How long to wait for an answer, ms.
    #[arg(long, default_value_t = 1500)]
    pub timeout_ms: u64,
}

/// What one probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A reset came back.
    Refused,
    /// The connection was accepted.
    Open,
    /// Nothing came back in time.
    Timeout,
}

impl Reach {
    /// As printed.
    pub fn name(self) -> &'static str {
        match self {
            Reach::Refused => "refused",
            Reach::Open => "open",
            Reach::Timeout => "timeout",
        }
    }

    /// Packets passed both ways.
    pub fn passes(self) -> bool {
        self != Reach::Timeout
    }
}

/// Tries once and prints what happened.
pub fn run(a: Args) -> anyhow::Result<()> {
    let r = match TcpStream::connect_timeout(&a.to, Duration::from_millis(a.timeout_ms)) {
        Ok(_) => Reach::Open,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Reach::Refused,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Reach::Timeout,
        Err(e) => anyhow::bail!("probe to {}: {e}", a.to),
    };
    println!("{}", r.name());
    Ok(())
}

/// Parses what [`run`] printed.
pub fn parse(out: &str) -> Option<Reach> {
    match out.trim() {
        "refused" => Some(Reach::Refused),
        "open" => Some(Reach::Open),
        "timeout" => Some(Reach::Timeout),
        _ => None,
    }
}
