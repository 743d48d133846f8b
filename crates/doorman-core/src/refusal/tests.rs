//! The human message of a refusal: what each reason reads as, and the
//! byte bound with its "and N more".

use super::*;

fn invalid(index: usize, field: &str, problem: &str) -> ResourceRefusal {
    ResourceRefusal {
        index,
        resource_id: format!("r{index}"),
        reason: Reason::Invalid {
            field: field.into(),
            problem: problem.into(),
        },
    }
}

fn denied(index: usize, id: &str) -> ResourceRefusal {
    ResourceRefusal {
        index,
        resource_id: id.into(),
        reason: Reason::Denied {
            identity: Some(Arc::from("web")),
            action: Action::Acquire,
        },
    }
}

#[test]
fn each_reason_reads_as_before() {
    let r = RequestRefusal::of(vec![
        invalid(0, "resource_id", "must not be empty"),
        invalid(
            1,
            "wants",
            "must be a finite number from 0 to 1e15, got NaN",
        ),
    ])
    .unwrap();
    assert!(!r.is_denial());
    assert_eq!(
        r.message(),
        "resource[0].resource_id: must not be empty; \
         resource[1].wants: must be a finite number from 0 to 1e15, got NaN"
    );
    let over = RequestRefusal::whole(Reason::OverLimit {
        field: "resource".into(),
        problem: "must be at most 10000 resources per request, got 10001".into(),
    });
    assert_eq!(
        over.message(),
        "resource: must be at most 10000 resources per request, got 10001"
    );
    assert_eq!(RequestRefusal::default().message(), "");
    assert_eq!(RequestRefusal::of(vec![]), None);
}

#[test]
fn a_message_stays_short_and_says_how_many_it_left_out() {
    let many: Vec<_> = (0..10_000).map(|i| invalid(i, "wants", "bad")).collect();
    let m = RequestRefusal::of(many).unwrap().message();
    assert!(m.len() <= MESSAGE_BYTES, "{}", m.len());
    assert!(m.starts_with("resource[0].wants: bad; resource[1].wants: bad"));
    let named = m.matches(": bad").count();
    assert!(
        m.ends_with(&format!("; and {} more", 10_000 - named)),
        "{m}"
    );

    let many: Vec<_> = (0..500).map(|i| denied(i, &format!("db/{i}"))).collect();
    let r = RequestRefusal::of(many).unwrap();
    assert!(r.is_denial());
    let m = r.message();
    assert!(m.len() <= MESSAGE_BYTES, "{}", m.len());
    assert!(m.starts_with(
        "identity \"web\" may not acquire resource \"db/0\": no access rule allows it \
         (also denied: \"db/1\", \"db/2\""
    ));
    let named = m.matches("\"db/").count();
    assert!(m.ends_with(&format!(", and {} more)", 500 - named)), "{m}");
}

#[test]
fn long_items_are_cut_at_a_character_boundary() {
    let long = "é".repeat(400);
    let r = RequestRefusal::of(vec![denied(0, &long), denied(1, &long)]).unwrap();
    let m = r.message();
    assert!(m.len() < 2 * ITEM_BYTES + 100, "{}", m.len());
    assert_eq!(m.matches('…').count(), 2, "{m}");
    assert_eq!(cut("abc", 2), "ab…");
    assert_eq!(cut("abc", 3), "abc");
}

#[test]
fn indices_map_back_to_the_request() {
    let r = RequestRefusal::of(vec![denied(0, "a"), denied(1, "b")]).unwrap();
    let r = r.reindex(|i| [3, 7][i]);
    let at: Vec<usize> = r.resources.iter().map(|x| x.index).collect();
    assert_eq!(at, [3, 7]);
    assert_eq!(r.first(), Some(&r.resources[0].reason));
}
