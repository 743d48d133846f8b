//! Shadow mode in the core: a template's `shadow`, a server's
//! `shadow_all`, a parent's word to an intermediate; decided and granted
//! exactly as usual, marked on each grant, and turned off by a reload.

use super::intermediate::{leaf, leaf_granted, parent_grant};
use super::*;

const SHADOW: &str = r#"
[[resources]]
identifier_glob = "watched"
capacity = 10
shadow = true
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 5
learning_mode_duration = 0

[[resources]]
identifier_glob = "enforced"
capacity = 10
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 5
learning_mode_duration = 0
"#;

fn root(shadow_all: bool) -> ServerCore {
    let cfg = Arc::new(Config::parse(SHADOW, "shadow.toml").unwrap());
    let mut c = ServerCore::new(
        CoreOptions {
            role: Role::Root,
            server_id: "root:1".into(),
            min_request_interval: Span::ZERO,
            shadow_all,
        },
        cfg,
    );
    c.become_master(t(0));
    c
}

#[test]
fn a_shadow_template_is_granted_as_usual_and_marked() {
    let mut c = root(false);
    let g = get(&mut c, t(1), "a", ask("watched", 30.0, None));
    assert_eq!((g.lease.capacity, g.shadow), (10.0, true));
    let g = get(&mut c, t(1), "b", ask("watched", 30.0, None));
    assert_eq!(g.lease.capacity, 0.0, "the capacity is shared as usual");
    let g = get(&mut c, t(1), "a", ask("enforced", 30.0, None));
    assert_eq!((g.lease.capacity, g.shadow), (10.0, false));
    let status = c.status(t(1), 10);
    let shadowed: Vec<(&str, bool)> = status
        .templates
        .iter()
        .map(|t| (t.identifier_glob.as_str(), t.shadow))
        .collect();
    assert_eq!(shadowed, [("watched", true), ("enforced", false)]);
}

#[test]
fn a_shadow_server_marks_every_grant_and_keeps_doing_so_after_a_reload() {
    let mut c = root(true);
    let g = get(&mut c, t(1), "a", ask("enforced", 30.0, None));
    assert!(g.shadow);
    let plain = SHADOW.replace("shadow = true\n", "");
    c.replace_config(Arc::new(Config::parse(&plain, "plain.toml").unwrap()));
    let g = get(&mut c, t(2), "a", ask("watched", 30.0, None));
    assert!(g.shadow, "--shadow holds whatever the config says");
}

#[test]
fn a_reload_turns_shadow_off() {
    let mut c = root(false);
    assert!(get(&mut c, t(1), "a", ask("watched", 30.0, None)).shadow);
    let plain = SHADOW.replace("shadow = true\n", "");
    c.replace_config(Arc::new(Config::parse(&plain, "plain.toml").unwrap()));
    let g = get(&mut c, t(2), "a", ask("watched", 30.0, Some(10.0)));
    assert_eq!((g.lease.capacity, g.shadow), (10.0, false));
}

#[test]
fn an_intermediate_follows_its_parent_or_its_own_word() {
    let mut shadowed = parent_grant(8.0, 30, 5, 0);
    shadowed.shadow = true;
    let mut c = leaf_granted(5.0, shadowed);
    let g = get(&mut c, t(2), "a", ask("r", 5.0, None));
    assert_eq!((g.lease.capacity, g.shadow), (5.0, true));
    // The parent's next answer without it turns it off.
    c.upstream_request(t(6)).unwrap();
    c.upstream_response(t(6), &["r".to_string()], &[parent_grant(8.0, 40, 5, 0)]);
    assert!(!get(&mut c, t(7), "a", ask("r", 5.0, Some(5.0))).shadow);
    // A leaf run with --shadow marks what its parent serves plainly.
    let mut own = leaf(None);
    own.replace_config(Arc::new(Config::empty().shadowing_all()));
    get(&mut own, t(1), "a", ask("r", 5.0, None));
    own.upstream_request(t(1)).unwrap();
    own.upstream_response(t(1), &["r".to_string()], &[parent_grant(8.0, 30, 5, 0)]);
    assert!(get(&mut own, t(2), "a", ask("r", 5.0, None)).shadow);
}
