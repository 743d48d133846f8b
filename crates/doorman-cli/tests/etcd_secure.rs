//! etcd with TLS (client certificates required) and authentication
//! enabled, as a production etcd runs: `doorman config push`, `history` and
//! `rollback` with `--etcd-ca/--etcd-cert/--etcd-key/--etcd-user/
//! --etcd-password-file`, and a server electing itself and watching its
//! config through the same etcd with a least-privilege user. Connections
//! without the password or without TLS are refused by etcd.

use doorman_core::server::Sharded;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use doorman_etcd::audit;
use doorman_etcd::{connect, EtcdElection, EtcdFiles, EtcdOptions};
use doorman_server::server::{start, ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{eventually, EtcdProcess, EtcdTlsFiles, Name, Pki};
use etcd_client::Permission;

const BIN: &str = env!("CARGO_BIN_EXE_doorman");
const KEY: &str = "/doorman/config";

fn config(capacity: u32) -> String {
    let r = Resource::fair("*", f64::from(capacity))
        .lease(20)
        .refresh(5);
    TestConfig::new().resource(r.learning_default()).toml()
}

/// Enables auth with a root user and a `doorman` user that may read and
/// write `/doorman/` only.
async fn enable_auth(admin: &EtcdOptions) {
    let mut c = connect(admin, Duration::from_secs(5)).await.unwrap();
    c.user_add("root", "root-password", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.role_add("doorman").await.unwrap();
    let perm = Permission::read_write("/doorman/").with_prefix();
    c.role_grant_permission("doorman", perm).await.unwrap();
    c.user_add("doorman", "doorman-password", None)
        .await
        .unwrap();
    c.user_grant_role("doorman", "doorman").await.unwrap();
    c.auth_enable().await.unwrap();
}

struct Etcd {
    process: EtcdProcess,
    pki: Pki,
    dir: tempfile::TempDir,
}

impl Etcd {
    fn args(&self, user: Option<&str>) -> Vec<String> {
        let client = self.pki.dir().join("client");
        let mut a = vec![
            "--etcd".to_string(),
            self.process.endpoint(),
            "--etcd-ca".into(),
            self.pki.ca().display().to_string(),
            "--etcd-cert".into(),
            client.with_extension("pem").display().to_string(),
            "--etcd-key".into(),
            client.with_extension("key").display().to_string(),
        ];
        if let Some(u) = user {
            let pw = self.dir.path().join(u);
            a.extend(["--etcd-user".into(), u.into()]);
            a.extend(["--etcd-password-file".into(), pw.display().to_string()]);
        }
        a
    }

    fn options(&self, user: Option<&str>) -> EtcdOptions {
        let client = self.pki.dir().join("client");
        let (cert, key) = (client.with_extension("pem"), client.with_extension("key"));
        let files = EtcdFiles {
            ca: Some(self.pki.ca()),
            cert: Some(cert),
            key: Some(key),
            user: user.map(str::to_string),
            password_file: user.map(|u| self.dir.path().join(u)),
        };
        EtcdOptions::from_files(self.process.endpoints(), files).unwrap()
    }

    fn doorman(&self, sub: &[&str], user: Option<&str>, file: Option<&Path>) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.arg("config")
            .args(&sub[..1])
            .args(self.args(user))
            .args(&sub[1..]);
        if let Some(f) = file {
            cmd.arg(f);
        }
        cmd.output().unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn secure_etcd() -> Etcd {
    let pki = Pki::new("etcd");
    let server = pki.server("etcd-server");
    pki.client("client", Name::CommonName("doorman-client"));
    let tls = EtcdTlsFiles {
        ca: pki.ca(),
        cert: server.cert,
        key: server.key,
    };
    let process = EtcdProcess::start_tls(tls).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("root"), "root-password\n").unwrap();
    std::fs::write(dir.path().join("doorman"), "doorman-password\n").unwrap();
    let e = Etcd { process, pki, dir };
    enable_auth(&e.options(None)).await;
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_push_history_and_rollback_over_tls_with_auth() {
    let e = secure_etcd().await;
    let file = e.dir.path().join("c.toml");
    std::fs::write(&file, config(100)).unwrap();
    let out = e.doorman(&["push", "--key", KEY], Some("doorman"), Some(&file));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("by etcd user doorman"),
        "{}",
        text(&out)
    );

    // Without the password etcd refuses (the certificate's CN names no
    // user); without TLS the connection fails.
    let out = e.doorman(&["push", "--key", KEY], None, Some(&file));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let plain = Command::new(BIN)
        .args([
            "config",
            "get",
            "--etcd",
            &e.process.endpoint(),
            "--key",
            KEY,
        ])
        .output()
        .unwrap();
    assert!(!plain.status.success(), "{}", text(&plain));

    // A server electing itself and watching its config with the
    // least-privilege user.
    let opts = e.options(Some("doorman"));
    let mut o = ServerOptions::new(
        "127.0.0.1:0".parse().unwrap(),
        ConfigSource::Etcd {
            etcd: opts.clone(),
            key: KEY.into(),
        },
    );
    o.election = Arc::new(EtcdElection {
        etcd: opts.clone(),
        key: "/doorman/election/root".into(),
        ttl: Duration::from_secs(2),
    });
    let s = start(o).await.expect("starts with etcd over TLS and auth");
    eventually("master", Duration::from_secs(10), || {
        s.state.core().is_master()
    })
    .await;
    let v = s.state.config_version().expect("a config version");
    assert_eq!(v.pusher.as_deref(), Some("etcd user doorman"));
    let first = v.version.unwrap();

    std::fs::write(&file, config(40)).unwrap();
    let out = e.doorman(&["push", "--key", KEY], Some("doorman"), Some(&file));
    assert!(out.status.success(), "{}", text(&out));
    let capacity = || s.state.core().config().templates()[0].capacity;
    eventually("40 applied", Duration::from_secs(5), || capacity() == 40.0).await;

    let out = e.doorman(&["history", KEY], Some("doorman"), None);
    let listing = text(&out);
    assert!(out.status.success(), "{listing}");
    assert_eq!(listing.lines().count(), 2, "{listing}");
    assert!(
        listing.lines().nth(1).unwrap().contains("+1 -1 lines"),
        "{listing}"
    );

    let to = first.to_string();
    let out = e.doorman(&["rollback", KEY, "--to", &to], Some("doorman"), None);
    assert!(out.status.success(), "{}", text(&out));
    eventually("100 restored", Duration::from_secs(5), || {
        capacity() == 100.0
    })
    .await;
    let v = s.state.config_version().unwrap();
    let records = audit::history(&opts, KEY).await.unwrap();
    let last = records.last().unwrap();
    assert_eq!(last.action, format!("rollback to {first}"));
    assert_eq!(v.version, Some(last.version));
    assert_eq!(
        v.sha256, records[0].sha256,
        "the same content as version {first}"
    );
    s.shutdown().await;
}

/// The password file is read again at every connection: after the
/// password is changed in etcd and in the file, the same options connect
/// with the new one, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_password_file_is_used_at_the_next_connection() {
    let e = secure_etcd().await;
    let opts = e.options(Some("doorman"));
    let step = Duration::from_secs(5);
    let mut c = connect(&opts, step).await.expect("the first password");
    c.put("/doorman/probe", "1", None).await.unwrap();

    let admin = e.options(Some("root"));
    let mut root = connect(&admin, step).await.unwrap();
    root.user_change_password("doorman", "rotated-password")
        .await
        .unwrap();
    let refused = match connect(&opts, step).await {
        Ok(mut c) => c.put("/doorman/probe", "2", None).await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "the old password must no longer work");

    std::fs::write(e.dir.path().join("doorman"), "rotated-password\n").unwrap();
    let mut c = connect(&opts, step).await.expect("the new password");
    c.put("/doorman/probe", "3", None).await.unwrap();
}
