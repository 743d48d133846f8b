//! The harness's processes: each started on its host (`ip netns exec`, which
//! execs the program under the same pid), with its standard error in a log
//! file, its standard output read line by line by a thread, and, unless it
//! is a Go program or etcd, libfaketime preloaded with its own offset file,
//! so its wall clock can be set off or stepped while it runs (the
//! monotonic clock stays true, as on a real host). Signals go to its pid:
//! SIGKILL, SIGSTOP and SIGCONT for faults, SIGTERM then SIGKILL to stop.
//!
//! Must not: signal a pid it did not start, or leave a process running.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use rustix::process::{kill_process, Pid, Signal};

use crate::net::Host;

/// Where libfaketime lives (Debian's `faketime` package).
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A line a process printed, with when the harness read it.
pub type Sink = Arc<Mutex<Vec<(usize, f64, String)>>>;

/// How to start one process.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Its name (logs, reports).
    pub name: String,
    /// Its host.
    pub host: Host,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Preload libfaketime with an offset file (not for Go programs, whose
    /// clock libfaketime cannot reach, nor etcd).
    pub faketime: bool,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// It closes and exits when its standard input ends (a client).
    pub stdin_closes: bool,
}

/// A process the harness runs.
#[derive(Debug)]
pub struct Proc {
    /// How it was started.
    pub spec: Spec,
    /// Its index in the sink's lines.
    pub index: usize,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    clock_file: PathBuf,
    sink: Sink,
}

impl Proc {
    /// Starts `spec`, logging to `dir`, its output lines into `sink` as
    /// `index`.
    pub fn start(spec: Spec, dir: &Path, index: usize, sink: Sink) -> anyhow::Result<Proc> {
        let log = dir.join(format!("{}.log", spec.name));
        let clock_file = dir.join(format!("{}.clock", spec.name));
        std::fs::write(&clock_file, "+0s\n")?;
        let mut p = Proc {
            spec,
            index,
            child: None,
            stdin: None,
            log,
            clock_file,
            sink,
        };
        p.spawn()?;
        Ok(p)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let s = &self.spec;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &s.host.ns]).args(&s.argv);
        if s.faketime {
            cmd.env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME_TIMESTAMP_FILE", &self.clock_file)
                .env("FAKETIME_CACHE_DURATION", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        cmd.envs(s.env.iter().map(|(k, v)| (k, v)));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", s.name))?;
        self.stdin = child.stdin.take();
        if let Some(out) = child.stdout.take() {
            let (sink, index) = (self.sink.clone(), self.index);
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let now = crate::clock::mono();
                    if let Ok(mut v) = sink.lock() {
                        v.push((index, now, line));
                    }
                }
            });
        }
        self.child = Some(child);
        Ok(())
    }

    /// Writes `line` to its standard input (a client's `wants <n>`).
    pub fn send(&mut self, line: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        let name = &self.spec.name;
        let input = self
            .stdin
            .as_mut()
            .with_context(|| format!("{name}: input closed"))?;
        writeln!(input, "{line}").and_then(|()| input.flush())?;
        Ok(())
    }

    /// Its pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, sig: Signal) -> anyhow::Result<()> {
        let pid = self.pid().context("not running")?;
        let pid = Pid::from_raw(pid as i32).context("bad pid")?;
        kill_process(pid, sig).with_context(|| format!("signalling {}", self.spec.name))
    }

    /// kill -9, and reaped.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        self.signal(Signal::KILL)?;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        self.stdin = None;
        Ok(())
    }

    /// SIGSTOP: the process stops running (its sockets stay open).
    pub fn pause(&self) -> anyhow::Result<()> {
        self.signal(Signal::STOP)
    }

    /// SIGCONT.
    pub fn resume(&self) -> anyhow::Result<()> {
        self.signal(Signal::CONT)
    }

    /// Starts it again (after [`Proc::kill`]), same arguments, same log.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.is_none() {
            self.spawn()?;
        }
        Ok(())
    }

    /// Sets its wall clock `offset` seconds off the true time (a step if
    /// it was elsewhere): libfaketime rereads the file within a second.
    pub fn set_clock(&self, offset: i64) -> anyhow::Result<()> {
        let text = if offset >= 0 {
            format!("+{offset}s\n")
        } else {
            format!("{offset}s\n")
        };
        std::fs::write(&self.clock_file, text)?;
        Ok(())
    }

    /// Closes its input (a client then closes and exits), SIGTERM, then
    /// SIGKILL if it has not exited within `grace`; returns whether it
    /// exited by itself.
    pub fn stop(&mut self, grace: Duration) -> bool {
        self.stdin = None;
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let exited = |c: &mut Child, within: Duration| {
            let until = Instant::now() + within;
            while Instant::now() < until {
                if let Ok(Some(_)) = c.try_wait() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        };
        if let Ok(pid) = Pid::from_raw(child.id() as i32).context("pid") {
            let _ = kill_process(pid, Signal::CONT);
            // A client closes on the end of its input; a server on SIGTERM.
            if self.spec.stdin_closes && exited(&mut child, grace / 2) {
                return true;
            }
            let _ = kill_process(pid, Signal::TERM);
        }
        if exited(&mut child, grace / 2) {
            return true;
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
