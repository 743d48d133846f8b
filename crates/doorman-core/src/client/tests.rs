use super::*;
use crate::action::Action;
use doorman_lease::Span;

fn t(ms: i64) -> Time {
    Time::from_millis(1_000_000_000 + ms)
}

fn core(fallback: Fallback) -> ClientCore {
    ClientCore::new(
        "c",
        CoreOptions {
            fallback,
            ..CoreOptions::default()
        },
    )
}

fn grant(id: &str, cap: f64, expiry: Time, refresh: i64, safe: Option<f64>) -> GrantItem {
    GrantItem {
        resource_id: id.into(),
        lease: Lease {
            capacity: cap,
            expiry,
            refresh_interval: refresh,
        },
        safe_capacity: safe,
        shadow: false,
    }
}

fn ids(items: &[RequestItem]) -> Vec<String> {
    items.iter().map(|i| i.resource_id.clone()).collect()
}

#[test]
fn new_resources_are_asked_for_at_once_in_one_bulk_request() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 1, 10.0, t(0));
    c.add("b", 2, 20.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    assert_eq!(ids(&req), ["a", "b"]);
    assert_eq!((req[1].priority, req[1].wants, req[1].has), (2, 20.0, None));
    assert!(c.poll_request(t(0)).is_none(), "nothing due right after");
}

#[test]
fn refreshes_at_the_smallest_refresh_interval_with_has() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 10.0, t(0));
    c.add("b", 0, 10.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(
        t(10),
        &ids(&req),
        &[
            grant("a", 5.0, t(60_000), 5, None),
            grant("b", 7.0, t(60_000), 20, None),
        ],
    );
    assert_eq!(c.next_wakeup(t(10)), Some(t(5_010)));
    assert!(c.poll_request(t(5_000)).is_none());
    let req = c.poll_request(t(5_010)).unwrap();
    assert_eq!(ids(&req), ["a", "b"], "b rides along with a");
    assert_eq!(req[0].has.unwrap().capacity, 5.0);
}

#[test]
fn wants_changes_over_ten_percent_refresh_early_but_not_within_min_interval() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 100.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(t(0), &ids(&req), &[grant("a", 100.0, t(60_000), 30, None)]);
    c.set_wants("a", 109.0, t(100));
    assert_eq!(c.next_wakeup(t(100)), Some(t(30_000)), "9 % is not enough");
    c.set_wants("a", 120.0, t(200));
    assert!(c.poll_request(t(500)).is_none(), "min interval 1 s");
    assert_eq!(c.next_wakeup(t(500)), Some(t(1_000)));
    let req = c.poll_request(t(1_000)).unwrap();
    assert_eq!(req[0].wants, 120.0);
}

#[test]
fn wants_that_move_while_a_request_is_out_still_go_early() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 1.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(t(0), &ids(&req), &[grant("a", 1.0, t(60_000), 8, None)]);
    let req = c.poll_request(t(8_000)).unwrap();
    // The wants move while that renewal is out; its answer must not put
    // them off to the next refresh (8 s).
    c.set_wants("a", 1000.0, t(8_010));
    c.on_response(t(8_020), &ids(&req), &[grant("a", 1.0, t(68_000), 8, None)]);
    assert_eq!(
        c.next_wakeup(t(8_020)),
        Some(t(9_000)),
        "after the min interval"
    );
    assert_eq!(c.poll_request(t(9_000)).unwrap()[0].wants, 1000.0);
}

#[test]
fn fallback_modes_apply_when_the_lease_expires() {
    for (fb, want) in [
        (Fallback::Pessimistic, (0.0, Mode::Pessimistic)),
        (Fallback::Optimistic, (40.0, Mode::Optimistic)),
        (Fallback::Safe { default: 3.0 }, (8.0, Mode::Safe)),
    ] {
        let mut c = core(fb);
        c.add("a", 0, 40.0, t(0));
        let req = c.poll_request(t(0)).unwrap();
        c.on_response(
            t(0),
            &ids(&req),
            &[grant("a", 20.0, t(10_000), 5, Some(8.0))],
        );
        assert_eq!(c.capacity("a", t(9_999)), Some((20.0, Mode::Lease)));
        assert_eq!(
            c.next_wakeup(t(6_000)),
            Some(t(5_000)),
            "refresh due before expiry"
        );
        assert_eq!(c.capacity("a", t(10_000)), Some(want), "{fb:?}");
        // A new lease ends the fallback at once.
        c.on_response(
            t(11_000),
            &["a".into()],
            &[grant("a", 15.0, t(70_000), 5, None)],
        );
        assert_eq!(c.capacity("a", t(11_000)), Some((15.0, Mode::Lease)));
    }
}

#[test]
fn safe_fallback_uses_the_default_without_a_server_value() {
    let mut c = core(Fallback::Safe { default: 3.0 });
    c.add("a", 0, 40.0, t(0));
    assert_eq!(c.capacity("a", t(0)), Some((3.0, Mode::Safe)));
}

#[test]
fn failures_retry_at_the_given_time() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 1.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_failure(t(0), &ids(&req), Span::from_millis(150));
    assert_eq!(c.next_wakeup(t(0)), Some(t(150)));
    assert!(c.poll_request(t(100)).is_none());
    assert!(c.poll_request(t(150)).is_some());
}

#[test]
fn failure_backoff_is_capped_at_the_refresh_interval() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 1.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(t(0), &ids(&req), &[grant("a", 1.0, t(60_000), 4, None)]);
    let req = c.poll_request(t(4_000)).unwrap();
    c.on_failure(t(4_000), &ids(&req), Span::secs(30));
    assert_eq!(c.next_wakeup(t(4_000)), Some(t(8_000)));
    // Shorter backoffs are kept.
    let req = c.poll_request(t(8_000)).unwrap();
    c.on_failure(t(8_000), &ids(&req), Span::from_millis(500));
    assert_eq!(c.next_wakeup(t(8_000)), Some(t(8_500)));
}

#[test]
fn resources_left_out_of_a_response_are_retried() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 1.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(t(0), &ids(&req), &[]);
    assert_eq!(c.next_wakeup(t(0)), Some(t(1_000)));
}

#[test]
fn expired_leases_are_not_sent_as_has() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 1.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(t(0), &ids(&req), &[grant("a", 1.0, t(2_000), 60, None)]);
    c.on_failure(t(2_000), &["a".into()], Span::secs(1));
    let req = c.poll_request(t(3_000)).unwrap();
    assert_eq!(req[0].has, None);
}

#[test]
fn removing_and_bad_values() {
    let mut c = core(Fallback::Optimistic);
    c.add("a", 0, f64::NAN, t(0));
    assert_eq!(c.wants("a"), Some(0.0));
    assert!(c.remove("a"));
    assert!(!c.remove("a"));
    assert_eq!(c.capacity("a", t(0)), None);
    assert!(c.next_wakeup(t(0)).is_none());
}

#[test]
fn a_refused_resource_gets_nothing_and_is_asked_again_only_after_the_retry() {
    let mut c = ClientCore::new("c", CoreOptions::default());
    c.add("a", 0, 10.0, t(0));
    c.add("b", 0, 10.0, t(0));
    let asked = c.poll_request(t(0)).unwrap();
    assert_eq!(asked.len(), 2);
    let why = Refused::Reason(Reason::Denied {
        identity: Some("x".into()),
        action: Action::Acquire,
    });
    c.on_refused(t(0), &[("a".to_string(), why.clone())]);
    assert!(why.is_denial());
    assert_eq!(
        why.describe("a"),
        "identity \"x\" may not acquire resource \"a\": no access rule allows it"
    );
    c.on_failure(t(0), &["b".to_string()], Span::secs(1));
    assert_eq!(c.capacity("a", t(1000)), Some((0.0, Mode::Refused)));
    assert_eq!(c.refusal("a"), Some(&why));
    c.set_wants("a", 50.0, t(1000));
    let next = c.poll_request(t(2000)).unwrap();
    let ids: Vec<&str> = next.iter().map(|i| i.resource_id.as_str()).collect();
    assert_eq!(ids, ["b"], "the refused one waits for its retry");
    let later = c.poll_request(t(61000)).unwrap();
    assert!(
        later.iter().any(|i| i.resource_id == "a"),
        "asked again after 60 s"
    );
    let grant = GrantItem {
        resource_id: "a".into(),
        lease: Lease {
            capacity: 5.0,
            expiry: t(80000),
            refresh_interval: 5,
        },
        safe_capacity: None,
        shadow: false,
    };
    c.on_response(t(61000), &["a".to_string()], &[grant]);
    assert_eq!(c.capacity("a", t(62000)), Some((5.0, Mode::Lease)));
    assert_eq!(c.refusal("a"), None);
}

#[test]
fn a_push_changes_capacity_keeps_the_lease_end_and_a_lowering_is_acked_at_once() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 100.0, t(0));
    c.add("b", 0, 100.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    let leases = [
        grant("a", 60.0, t(10_000), 5, None),
        grant("b", 10.0, t(10_000), 5, None),
    ];
    c.on_response(t(5), &ids(&req), &leases);
    // A raise applies at once, to the same end, and asks for nothing.
    assert!(!c.on_push(t(100), &[grant("b", 40.0, t(99_000), 1, Some(2.0))], false));
    assert_eq!(c.capacity("b", t(100)), Some((40.0, Mode::Lease)));
    assert_eq!(
        c.lease("b").unwrap().expiry,
        t(10_000),
        "a push renews nothing"
    );
    assert!(c.poll_request(t(100)).is_none());
    // A lowering is acknowledged by a request at once, inside the minimum
    // interval, claiming the lower lease; b rides along only when allowed.
    assert!(c.on_push(t(200), &[grant("a", 50.0, t(99_000), 1, None)], false));
    assert_eq!(c.next_wakeup(t(200)), Some(t(200)));
    let ack = c.poll_request(t(200)).unwrap();
    assert_eq!(ids(&ack), ["a"]);
    assert_eq!(ack[0].has.unwrap().capacity, 50.0);
    assert!(c.poll_request(t(201)).is_none(), "acknowledged once");
    // Nothing applies to a resource without an unexpired lease.
    assert!(!c.on_push(t(10_000), &[grant("a", 1.0, t(99_000), 1, None)], false));
    assert_eq!(c.capacity("a", t(10_000)), Some((0.0, Mode::Pessimistic)));
}

/// A raise pushed while a request is out was decided before it: the
/// answer supersedes it, and until then only what the request claims is
/// counted. A lowering applies whenever it comes.
#[test]
fn a_raise_pushed_while_asking_waits_for_the_answer() {
    let mut c = core(Fallback::Pessimistic);
    c.add("a", 0, 100.0, t(0));
    let req = c.poll_request(t(0)).unwrap();
    c.on_response(t(5), &ids(&req), &[grant("a", 10.0, t(10_000), 5, None)]);
    assert!(!c.on_push(t(100), &[grant("a", 40.0, t(99_000), 1, None)], true));
    assert_eq!(c.capacity("a", t(100)), Some((10.0, Mode::Lease)));
    assert!(c.on_push(t(200), &[grant("a", 5.0, t(99_000), 1, None)], true));
    assert_eq!(c.capacity("a", t(200)), Some((5.0, Mode::Lease)));
}
