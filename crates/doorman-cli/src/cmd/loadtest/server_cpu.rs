//! `--server-pid PID`: the CPU time a process on this machine (the server
//! under load) spent while the load was measured, from `/proc/PID/stat`
//! (user + system time of all its threads), and so its CPU per request.
//!
//! Must not: touch the process (it is only read).

use anyhow::{bail, Context};
use serde::Serialize;

/// The server's CPU over the measured interval.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ServerCpu {
    pub pid: u32,
    /// CPU seconds (user + system) while measuring.
    pub cpu_s: f64,
    /// Cores busy on average: `cpu_s` / measured seconds.
    pub cores: f64,
    /// CPU microseconds per answered RPC (successes and errors).
    pub us_per_rpc: f64,
}

/// A reading of a process's CPU time.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pid: u32,
    cpu_s: f64,
}

/// The process's CPU time so far (user + system, all threads).
pub fn read(pid: u32) -> anyhow::Result<Reading> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| {
        format!("--server-pid {pid}: cannot read {path} (no such process on this machine?)")
    })?;
    let cpu_s = cpu_seconds(&stat).with_context(|| format!("--server-pid {pid}: {path}"))?;
    Ok(Reading { pid, cpu_s })
}

/// utime + stime of a `/proc/PID/stat` line, in seconds. The command name
/// (field 2) is in parentheses and may contain spaces, so fields are
/// counted after its closing parenthesis.
fn cpu_seconds(stat: &str) -> anyhow::Result<f64> {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        bail!("not a stat line");
    };
    // `rest` starts at field 3 (state); utime and stime are fields 14, 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> anyhow::Result<u64> {
        let f = fields.get(i).context("stat line too short")?;
        f.parse()
            .with_context(|| format!("field {} is {f:?}", i + 3))
    };
    let ticks = tick(11)? + tick(12)?;
    let per_s = rustix::param::clock_ticks_per_second();
    Ok(ticks as f64 / per_s as f64)
}

impl Reading {
    /// The CPU used since `self`, over `measured_s` seconds and `rpcs`
    /// answered RPCs.
    pub fn since(self, measured_s: f64, rpcs: u64) -> anyhow::Result<ServerCpu> {
        let now = read(self.pid)?;
        let cpu_s = (now.cpu_s - self.cpu_s).max(0.0);
        Ok(ServerCpu {
            pid: self.pid,
            cpu_s,
            cores: cpu_s / measured_s.max(1e-9),
            us_per_rpc: cpu_s * 1e6 / rpcs.max(1) as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_after_the_command_name() {
        let per_s = rustix::param::clock_ticks_per_second() as f64;
        let line = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 5 0 0";
        assert_eq!(cpu_seconds(line).unwrap(), 300.0 / per_s);
        assert!(cpu_seconds("42 (x) S 1").is_err());
        assert!(cpu_seconds("no parenthesis").is_err());
    }

    #[test]
    fn this_process_can_be_read_and_a_missing_one_is_named() {
        let me = read(std::process::id()).unwrap();
        let spin = std::time::Instant::now();
        while spin.elapsed().as_millis() < 200 {
            std::hint::black_box(spin.elapsed());
        }
        let used = me.since(0.2, 10).unwrap();
        assert!(used.cpu_s > 0.0, "200 ms of spinning used no CPU: {used:?}");
        // The same expression as `since` (cpu_s · 10⁶ / 10 RPCs): cpu_s · 1e5
        // differs in the last bit for some readings (0.2 s gave 19 999.999…).
        assert_eq!(used.us_per_rpc, used.cpu_s * 1e6 / 10.0);
        let e = read(u32::MAX).unwrap_err().to_string();
        assert!(e.contains("--server-pid 4294967295"), "{e}");
    }
}
