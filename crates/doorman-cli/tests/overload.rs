//! A `doorman server` process out of file descriptors (run under
//! `prlimit --nofile`), flooded with connections: it does not spin, and a
//! connection opened before keeps being served.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use doorman_testkit::config::{Resource, TestConfig};

const BIN: &str = env!("CARGO_BIN_EXE_doorman");

fn config() -> String {
    let r = Resource::fair("*", 10.0).lease(30).refresh(5);
    TestConfig::new().resource(r.learning_default()).toml()
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU time (user + system) the process has used, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("process alive");
    let after_name = stat.rsplit_once(')').expect("stat format").1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); after the name, state is the first.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// One request on a kept-alive HTTP/1.1 connection; the response head.
fn healthz(conn: &mut TcpStream) -> String {
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 512];
    let n = conn.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).to_string()
}

/// Runs `doorman server` under `prlimit --nofile=<nofile>`: the server,
/// its gRPC and its HTTP address.
fn spawn(nofile: &str) -> (Server, tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doorman.toml");
    std::fs::write(&path, config()).unwrap();
    let mut child = Command::new("prlimit")
        .args([
            &format!("--nofile={nofile}"),
            "--",
            BIN,
            "server",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--http", "127.0.0.1:0", "--config"])
        .arg(&path)
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) runs the server");
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let line = loop {
        let l = lines.next().expect("server prints its addresses").unwrap();
        if l.contains("listening on") {
            break l;
        }
    };
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let field = |after: &str, until: char| {
        line.split(after)
            .nth(1)
            .unwrap()
            .split(until)
            .next()
            .unwrap()
            .to_string()
    };
    let (grpc, http) = (field("listening on ", ' '), field("http://", '/'));
    (server, dir, grpc, http)
}

/// The (soft, hard) limits of open files of process `pid` ("self": this one).
fn open_files_limits(pid: &str) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

#[test]
fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
    // Any hard limit will do, as long as the soft one starts below it.
    let hard = open_files_limits("self").1.min(4096);
    assert!(
        hard > 32,
        "a hard limit of {hard} open files leaves nothing to raise"
    );
    let (server, _dir, _, http) = spawn(&format!("32:{hard}"));
    let mut conn = TcpStream::connect(&http).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(healthz(&mut conn).starts_with("HTTP/1.1 200"));
    let limits = open_files_limits(&server.0.id().to_string());
    assert_eq!(limits, (hard, hard));
}

#[test]
fn out_of_file_descriptors_the_server_backs_off_and_keeps_serving() {
    let (server, _dir, grpc, http) = spawn("64:64");
    let mut kept = TcpStream::connect(&http).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(
        healthz(&mut kept).starts_with("HTTP/1.1 200"),
        "served before the flood"
    );
    // More connections than the process has file descriptors.
    let flood: Vec<TcpStream> = (0..120)
        .filter_map(|_| TcpStream::connect(&grpc).ok())
        .collect();
    assert!(flood.len() > 64, "the kernel queues them: {}", flood.len());
    std::thread::sleep(Duration::from_millis(500));
    let pid = server.0.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    // A spinning accept loop burns most of a core (~150 of 200 ticks);
    // backing off 100 ms between failed accepts uses next to nothing.
    assert!(
        used < 50,
        "the server used {used} ticks of CPU in 2 s while out of descriptors"
    );
    let head = healthz(&mut kept);
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "a connection opened before is served: {head:?}"
    );
    drop(flood);
}
