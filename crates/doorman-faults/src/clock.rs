//! The auditor's time base: `CLOCK_MONOTONIC`, one clock for every process
//! on the machine (network namespaces do not change it, and libfaketime
//! leaves it alone with `FAKETIME_DONT_FAKE_MONOTONIC=1`), so what each
//! client reports can be put on one line whatever its wall clock says.
//! Python's `time.monotonic()` reads the same clock. The wall clock is
//! read only to place the servers' log lines, which carry its time
//! (`real.json`'s `t0_unix_s`).
//!
//! Must not: time anything on the wall clock.

/// Seconds since the Unix epoch on the machine's wall clock.
pub fn wall() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Seconds on the machine's monotonic clock.
pub fn mono() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_moves_forward_with_std_instant() {
        let (a, i) = (super::mono(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, d) = (super::mono(), i.elapsed().as_secs_f64());
        assert!(b - a >= 0.02 && (b - a - d).abs() < 0.01, "{a} {b} {d}");
    }
}
