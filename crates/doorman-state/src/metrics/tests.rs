//! What `/metrics` writes from a scrape: per template, per resource with
//! a cap, the parent link.

use super::*;
use doorman_core::server::UpstreamGauge;

fn gauge(id: &str, template: &str, has: f64) -> ResourceGauge {
    ResourceGauge {
        id: id.into(),
        capacity: 10.0,
        has,
        wants: 2.0 * has,
        requesters: 1,
        learning: false,
        template: template.into(),
        learning_remaining: 0.0,
        shadow: false,
        bands: vec![(0, 2.0 * has)],
        upstream: None,
    }
}

fn scrape(gauges: Vec<ResourceGauge>, series: ResourceSeries) -> Scrape {
    Scrape {
        gauges,
        is_master: true,
        series,
        ..Default::default()
    }
}

#[test]
fn resources_are_summed_per_template_by_default() {
    let mut learning = gauge("db/b", "db/*", 2.5);
    learning.learning = true;
    learning.learning_remaining = 42.0;
    let mut shadow = gauge("x", "*", 1.0);
    shadow.shadow = true;
    let gauges = vec![gauge("db/a", "db/*", 1.0), learning, shadow];
    let text = Metrics::new().render(&scrape(gauges, ResourceSeries::PerTemplate));
    for line in [
        "doorman_server_resource_has{template=\"db/*\"} 3.5\n",
        "doorman_server_resource_capacity{template=\"db/*\"} 20\n",
        "doorman_server_resource_learning_mode{template=\"db/*\"} 1\n",
        "doorman_server_learning_seconds_left{template=\"db/*\"} 42\n",
        "doorman_server_resource_shadow{template=\"db/*\"} 0\n",
        "doorman_server_resource_shadow{template=\"*\"} 1\n",
        "doorman_server_resources{template=\"*\"} 1\n",
        "doorman_server_leases 3\n",
        "doorman_server_master_known 0\n",
        "# TYPE doorman_server_resource_capacity gauge",
        "doorman_build_info{",
    ] {
        assert!(text.contains(line), "missing {line:?} in {text}");
    }
    assert!(
        !text.contains("resource=\""),
        "no per-resource series: {text}"
    );
    assert!(
        !text.contains("doorman_server_parent_connected"),
        "a root: {text}"
    );
}

#[test]
fn per_resource_series_are_capped_and_escaped() {
    let gauges = vec![
        gauge("a\"b\\c\nd", "*", 1.5),
        gauge("two", "*", 1.0),
        gauge("three", "*", 2.0),
    ];
    let text = Metrics::new().render(&scrape(gauges, ResourceSeries::PerResource(1)));
    let first = "doorman_server_resource_has{template=\"*\",resource=\"a\\\"b\\\\c\\nd\"} 1.5\n";
    assert!(text.contains(first), "{text}");
    let other = "doorman_server_resource_has{template=\"*\",resource=\"_other\"} 3\n";
    assert!(text.contains(other), "the rest summed: {text}");
    assert!(!text.contains("resource=\"two\""), "{text}");
}

#[test]
fn the_parent_link_is_exported_by_intermediates() {
    let mut g = gauge("db/a", "db/*", 4.0);
    g.bands = vec![(1, 3.0), (0, 5.0)];
    g.upstream = Some(UpstreamGauge {
        granted: 4.0,
        expires_in: Some(-2.0),
    });
    let mut s = scrape(vec![g], ResourceSeries::PerTemplate);
    s.parent = Some(doorman_core::server::LinkStatus {
        calls: 3,
        failing: true,
        last_success_unix: Some(1700000000.0),
        last_error: Some("Unavailable".into()),
    });
    let text = Metrics::new().render(&s);
    for line in [
        "doorman_server_parent_connected 0\n",
        "doorman_server_parent_last_success_timestamp_seconds 1700000000\n",
        "doorman_server_parent_lease_seconds_left 0\n",
        "doorman_server_parent_asked{template=\"db/*\",priority=\"1\"} 3\n",
        "doorman_server_parent_granted{template=\"db/*\"} 4\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in {text}");
    }
}
