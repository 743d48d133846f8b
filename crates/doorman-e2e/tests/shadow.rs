//! Shadow mode through a real server, with our client and a real Envoy:
//! a resource in shadow mode is decided and granted as usual, but nothing
//! waits or is refused for it; our client counts what it would have
//! refused, RLS answers OK and counts OVER_LIMIT apart, RLQS assigns
//! allow-all; a config push turning shadow off makes each enforce again.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use doorman_client::{Client, GaugeOptions, RateOptions};
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::envoy::{offer, EnvoyProcess};
use doorman_testkit::{eventually, eventually_blocking, free_port, IsolatedServer};

/// Capacity of every resource, per second or in flight.
const C: f64 = 20.0;

fn write_config(dir: &Path, shadow: bool) -> PathBuf {
    let r = Resource::fair("*", C)
        .lease(20)
        .refresh(1)
        .learning(0)
        .with("shadow", shadow);
    let path = dir.join("config.toml");
    std::fs::write(&path, TestConfig::new().resource(r).toml()).expect("config written");
    path
}

fn server(file: &Path) -> IsolatedServer {
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port().expect("a free port")));
    let mut o = ServerOptions::new(listen, ConfigSource::File(file.to_path_buf()));
    o.reload_interval = Duration::from_millis(100);
    o.min_request_interval = Duration::ZERO;
    IsolatedServer::start(o).expect("server starts")
}

/// A labelled sample of `/metrics` (0 when absent).
fn sample(s: &IsolatedServer, name_and_labels: &str) -> f64 {
    let text = s.state.metrics_text();
    let value = text.lines().find_map(|l| {
        let rest = l.strip_prefix(name_and_labels)?.strip_prefix(' ')?;
        rest.parse().ok()
    });
    value.unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_counts_what_it_would_refuse_until_a_push_turns_shadow_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), true);
    let s = server(&file);
    let c = Client::builder().servers([s.addr()]).build().await.unwrap();
    let rate = c.rate_resource("db/r", RateOptions::wants(C)).unwrap();
    let gauge = c
        .gauge_resource("pool/g", GaugeOptions::wants(2.0))
        .unwrap();
    let limit = Duration::from_secs(10);
    eventually("shadow leases", limit, || rate.shadow() && gauge.shadow()).await;
    assert_eq!(gauge.capacity(), 2.0, "granted as usual");
    // Ten times the rate, at once: every wait returns, every try succeeds.
    for _ in 0..100 {
        rate.wait_timeout(Duration::from_millis(1)).await.unwrap();
        assert!(rate.try_acquire());
    }
    assert!(rate.would_refuse() >= 150, "{}", rate.would_refuse());
    let permits: Vec<_> = (0..5).map(|_| gauge.try_mark()).collect();
    assert!(permits.iter().all(Option::is_some));
    assert_eq!(gauge.would_refuse(), 3);
    let status = s.state.status(10);
    assert!(status.templates.iter().all(|t| t.shadow));
    let page = doorman_http::render_html(&status, None);
    assert!(page.contains("<b>shadow</b> (not enforced)"), "{page}");
    assert_eq!(
        sample(&s, r#"doorman_server_resource_shadow{template="*"}"#),
        2.0
    );
    drop(permits);

    write_config(dir.path(), false);
    eventually("shadow off", limit, || !rate.shadow() && !gauge.shadow()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let counted = rate.would_refuse();
    let taken = (0..100).filter(|_| rate.try_acquire()).count();
    assert!(taken < 10, "enforced again: took {taken} of 100 at once");
    let held: Vec<_> = (0..5).filter_map(|_| gauge.try_mark()).collect();
    assert_eq!(held.len(), 2);
    assert_eq!(
        rate.would_refuse(),
        counted,
        "nothing counted once enforced"
    );
    assert_eq!(
        sample(&s, r#"doorman_server_resource_shadow{template="*"}"#),
        0.0
    );
}

#[test]
fn rls_answers_ok_in_shadow_mode_and_counts_over_limit_apart() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), true);
    let doorman = server(&file);
    let envoy = EnvoyProcess::start("rls.yaml", doorman.grpc_addr.port()).expect("envoy");
    offer(envoy.listen, 3.0 * C, 3.0, &[]); // demand becomes known
    let got = offer(envoy.listen, 3.0 * C, 5.0, &[]);
    assert_eq!((got.limited, got.other), (0, 0), "{got:?}");
    let apart =
        r#"doorman_server_envoy_descriptors_total{protocol="rls",result="shadow_over_limit"}"#;
    let over = r#"doorman_server_envoy_descriptors_total{protocol="rls",result="over_limit"}"#;
    // About two thirds of 3 C were over the limit.
    let counted = sample(&doorman, apart);
    assert!(counted > 3.0 * C * 5.0 * 0.4, "{counted}");
    assert_eq!(sample(&doorman, over), 0.0);

    write_config(dir.path(), false);
    eventually_blocking("RLS limits again", Duration::from_secs(15), || {
        offer(envoy.listen, 3.0 * C, 1.0, &[]).limited > 0
    });
    let got = offer(envoy.listen, 3.0 * C, 5.0, &[]);
    assert!(got.limited > 0, "{got:?}");
    assert!(sample(&doorman, over) > 0.0);
}

#[test]
fn rlqs_assigns_allow_all_in_shadow_mode_and_limits_after_a_push() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), true);
    let doorman = server(&file);
    let envoy = EnvoyProcess::start("rlqs.yaml", doorman.grpc_addr.port()).expect("envoy");
    offer(envoy.listen, 3.0 * C, 8.0, &[]); // a report or two: the demand is known
    let got = offer(envoy.listen, 3.0 * C, 5.0, &[]);
    assert_eq!((got.limited, got.other), (0, 0), "{got:?}");
    let shadowed =
        r#"doorman_server_envoy_descriptors_total{protocol="rlqs",result="shadow_assigned"}"#;
    assert!(sample(&doorman, shadowed) > 0.0);

    write_config(dir.path(), false);
    eventually_blocking("RLQS limits again", Duration::from_secs(20), || {
        offer(envoy.listen, 3.0 * C, 2.0, &[]).limited > 0
    });
    let got = offer(envoy.listen, 3.0 * C, 5.0, &[]);
    let assigned = r#"doorman_server_envoy_descriptors_total{protocol="rlqs",result="assigned"}"#;
    assert!(
        got.limited > 0 && sample(&doorman, assigned) > 0.0,
        "{got:?}"
    );
}
