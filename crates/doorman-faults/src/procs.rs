//! The harness's processes: each started on its host (`ip netns exec`, which
//! execs the program under the same pid), with its standard error in a log
//! file, its standard output read line by line by a thread, and, unless it
//! is a Go program or etcd, libfaketime preloaded with its own offset file,
//! so its wall clock can be set off or stepped while it runs (the
//! monotonic clock stays true, as on a real host). Signals go to its pid:
//! SIGKILL, SIGSTOP and SIGCONT for faults, SIGTERM then SIGKILL to stop.
//!
//! Must not: signal a pid it did not start, or leave a process running.

use std::collections::HashMap;
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

/// What every process printed, line by line, with when the harness read
/// each, by the process's index: a reader thread appends while the
/// harness reads one process's lines at a time (a thousand clients print
/// a thousand lines a second: the lock is held only to append or copy
/// one process's lines, so no process blocks on its output pipe).
#[derive(Debug, Clone, Default)]
pub struct Sink(Arc<Mutex<HashMap<usize, Lines>>>);

/// One process's lines: (when read, line).
type Lines = Vec<(f64, String)>;

impl Sink {
    fn push(&self, index: usize, t: f64, line: String) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(index).or_default().push((t, line));
    }

    /// Process `index`'s lines so far: (when read, line).
    pub fn lines(&self, index: usize) -> Vec<(f64, String)> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&index).cloned().unwrap_or_default()
    }

    /// Its last `n` lines.
    pub fn tail(&self, index: usize, n: usize) -> Vec<(f64, String)> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&index)
            .map(|v| v[v.len().saturating_sub(n)..].to_vec())
            .unwrap_or_default()
    }
}

/// What the harness did to a process, or saw it do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Life {
    /// Started (again), its wall clock this many seconds off.
    Started(i64),
    /// kill -9.
    Killed,
    /// SIGSTOP.
    Paused,
    /// SIGCONT.
    Resumed,
    /// Its wall clock set this many seconds off while it ran.
    Clock(i64),
    /// Stopped at the end of the run.
    Stopped,
    /// It exited by itself (the harness did not stop it).
    Exited,
}

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
    /// Its wall clock's offset at start, seconds (with `faketime`).
    pub clock: i64,
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
    /// What happened to it, when (monotonic s).
    pub life: Vec<(f64, Life)>,
}

impl Proc {
    /// Starts `spec`, logging to `dir`, its output lines into `sink` as
    /// `index`.
    pub fn start(spec: Spec, dir: &Path, index: usize, sink: Sink) -> anyhow::Result<Proc> {
        let log = dir.join(format!("{}.log", spec.name));
        let clock_file = dir.join(format!("{}.clock", spec.name));
        let mut p = Proc {
            spec,
            index,
            child: None,
            stdin: None,
            log,
            clock_file,
            sink,
            life: Vec::new(),
        };
        p.write_clock(p.spec.clock)?;
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
                    sink.push(index, crate::clock::mono(), line);
                }
            });
        }
        self.child = Some(child);
        self.life
            .push((crate::clock::mono(), Life::Started(self.spec.clock)));
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
        self.life.push((crate::clock::mono(), Life::Killed));
        Ok(())
    }

    /// SIGSTOP: the process stops running (its sockets stay open).
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.signal(Signal::STOP)?;
        self.life.push((crate::clock::mono(), Life::Paused));
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.life.push((crate::clock::mono(), Life::Resumed));
        self.signal(Signal::CONT)
    }

    /// Starts it again (after [`Proc::kill`]), same arguments, same log,
    /// its wall clock `clock` seconds off from the start.
    pub fn restart(&mut self, clock: i64) -> anyhow::Result<()> {
        if self.child.is_none() {
            self.spec.clock = clock;
            self.write_clock(clock)?;
            self.spawn()?;
        }
        Ok(())
    }

    /// Sets its wall clock `offset` seconds off the true time (a step if
    /// it was elsewhere): libfaketime rereads the file within a second.
    pub fn set_clock(&mut self, offset: i64) -> anyhow::Result<()> {
        self.write_clock(offset)?;
        self.life.push((crate::clock::mono(), Life::Clock(offset)));
        Ok(())
    }

    fn write_clock(&self, offset: i64) -> anyhow::Result<()> {
        let text = if offset >= 0 {
            format!("+{offset}s\n")
        } else {
            format!("{offset}s\n")
        };
        std::fs::write(&self.clock_file, text)?;
        Ok(())
    }

    /// Whether it exited by itself since the last look (recorded once).
    pub fn exited_by_itself(&mut self) -> bool {
        let Some(c) = self.child.as_mut() else {
            return false;
        };
        if let Ok(Some(_)) = c.try_wait() {
            self.child = None;
            self.stdin = None;
            self.life.push((crate::clock::mono(), Life::Exited));
            return true;
        }
        false
    }

    /// Its exit code once it exits by itself within `within` (`None`: it
    /// did not, and was killed; or a signal ended it). Its output lines
    /// are all read when this returns.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let mut child = self.child.take()?;
        self.stdin = None;
        let until = Instant::now() + within;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => break None,
            }
        };
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.life.push((crate::clock::mono(), Life::Exited));
        // The reader thread takes the pipe's last lines after the exit.
        std::thread::sleep(Duration::from_millis(300));
        status.and_then(|s| s.code())
    }

    /// Closes its input (a client then closes and exits), SIGTERM, then
    /// SIGKILL if it has not exited within `grace`; returns whether it
    /// exited by itself.
    pub fn stop(&mut self, grace: Duration) -> bool {
        self.stdin = None;
        let Some(mut child) = self.child.take() else {
            return true;
        };
        self.life.push((crate::clock::mono(), Life::Stopped));
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
        // A client closes on the end of its input (half the grace, then
        // SIGTERM and the other half); a server on SIGTERM (the whole
        // grace).
        let mut after_term = grace;
        if let Ok(pid) = Pid::from_raw(child.id() as i32).context("pid") {
            let _ = kill_process(pid, Signal::CONT);
            if self.spec.stdin_closes {
                if exited(&mut child, grace / 2) {
                    return true;
                }
                after_term = grace / 2;
            }
            let _ = kill_process(pid, Signal::TERM);
        }
        if exited(&mut child, after_term) {
            return true;
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// What it printed so far, line by line.
    pub fn lines(&self) -> Vec<String> {
        self.sink
            .lines(self.index)
            .into_iter()
            .map(|l| l.1)
            .collect()
    }

    /// Its last `n` lines.
    pub fn tail(&self, n: usize) -> Vec<String> {
        self.sink
            .tail(self.index, n)
            .into_iter()
            .map(|l| l.1)
            .collect()
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
