//! A refusal written as a status reads back the same, within the bound of
//! the response headers, and a plain client still gets code and message.

use super::*;

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("deny/{i:03}")).collect()
}

fn denied(ids: &[String], identity: Option<&str>) -> RequestRefusal {
    let reason = Reason::Denied {
        identity: identity.map(Arc::from),
        action: Action::Acquire,
    };
    let each = ids.iter().enumerate().map(|(index, id)| ResourceRefusal {
        index,
        resource_id: id.clone(),
        reason: reason.clone(),
    });
    RequestRefusal::of(each.collect()).unwrap()
}

/// Bytes the status takes in the response headers as h2 counts them
/// (name + value + 32 per header).
fn header_bytes(s: &Status) -> usize {
    let resp: tonic::codegen::http::Response<()> = s.clone().into_http();
    resp.headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 32)
        .sum()
}

#[test]
fn fifty_denials_read_back_as_fifty_typed_refusals() {
    let ids = ids(50);
    let r = denied(&ids, Some("web"));
    let s = to_status(&r, "resource");
    assert_eq!(s.code(), Code::PermissionDenied);
    assert!(
        s.message().starts_with(
            "identity \"web\" may not acquire resource \"deny/000\": no access rule allows it (also denied: \"deny/001\""
        ),
        "{}",
        s.message()
    );
    let back = from_status(&s, &ids).unwrap();
    assert_eq!(back.unnamed, 0);
    assert_eq!(back.refusal, r);
    let anonymous = denied(&ids, None);
    let back = from_status(&to_status(&anonymous, "resource"), &ids).unwrap();
    assert_eq!(back.refusal, anonymous);
}

#[test]
fn invalid_fields_and_request_problems_read_back() {
    let ids = ids(3);
    let r = RequestRefusal::of(vec![
        ResourceRefusal {
            index: 0,
            resource_id: ids[0].clone(),
            reason: Reason::Invalid {
                field: "wants[1].num_clients".into(),
                problem: "must be >= 1, got 0".into(),
            },
        },
        ResourceRefusal {
            index: 2,
            resource_id: ids[2].clone(),
            reason: Reason::OverLimit {
                field: "resource_id".into(),
                problem: "must be at most 1024 bytes, got 2000".into(),
            },
        },
    ])
    .unwrap();
    let s = to_status(&r, "resource");
    assert_eq!(s.code(), Code::InvalidArgument);
    assert_eq!(
        s.message(),
        "resource[0].wants[1].num_clients: must be >= 1, got 0; \
         resource[2].resource_id: must be at most 1024 bytes, got 2000"
    );
    assert_eq!(from_status(&s, &ids).unwrap().refusal, r);
    let whole = RequestRefusal::whole(Reason::Invalid {
        field: "client_id".into(),
        problem: "must not be empty".into(),
    });
    let s = to_status(&whole, "resource");
    assert_eq!(s.message(), "client_id: must not be empty");
    assert_eq!(from_status(&s, &ids).unwrap().refusal, whole);
}

#[test]
fn the_details_stay_within_the_headers_a_client_accepts() {
    for n in [1, 50, 150, 10_000] {
        let ids = ids(n);
        let s = to_status(&denied(&ids, Some("web")), "resource");
        let used = header_bytes(&s);
        assert!(used <= HEADER_BYTES, "{n}: {used}");
        let back = from_status(&s, &ids).unwrap();
        assert_eq!(back.refusal.resources.len() + back.unnamed, n);
        assert_eq!(
            back.refusal.resources[..],
            denied(&ids, Some("web")).resources[..back.refusal.resources.len()]
        );
    }
    let ids = ids(10_000);
    let back = from_status(&to_status(&denied(&ids, Some("web")), "resource"), &ids).unwrap();
    let named = back.refusal.resources.len();
    eprintln!(
        "named {named} of 10000 denied, {} header bytes",
        header_bytes(&to_status(&denied(&ids, Some("web")), "resource"))
    );
    assert!(named >= 150, "{named}");
    // Long ids cost the message, not the details.
    let long: Vec<String> = (0..200)
        .map(|i| format!("{i:04}{}", "é".repeat(500)))
        .collect();
    let s = to_status(&denied(&long, Some(&"w".repeat(256))), "resource");
    assert!(header_bytes(&s) <= HEADER_BYTES, "{}", header_bytes(&s));
}

#[test]
fn the_details_need_no_base64_padding() {
    for n in 0..40 {
        let ids = ids(n + 1);
        for identity in [None, Some("web"), Some("a-longer-identity")] {
            let s = to_status(&denied(&ids[..=n], identity), "resource");
            assert!(s.details().len().is_multiple_of(3), "{n} {identity:?}");
            assert_eq!(
                from_status(&s, &ids).unwrap().refusal.resources.len(),
                n + 1
            );
        }
    }
}

#[test]
fn other_statuses_and_foreign_details_are_not_refusals() {
    let ids = ids(2);
    assert_eq!(from_status(&Status::unavailable("x"), &ids), None);
    assert_eq!(
        from_status(&Status::permission_denied("no details"), &ids),
        None
    );
    let foreign = Status::with_error_details_vec(
        Code::PermissionDenied,
        "x",
        [ErrorDetail::from(ErrorInfo::new(
            "R",
            "example.com",
            HashMap::new(),
        ))],
    );
    assert_eq!(from_status(&foreign, &ids), None);
    // A violation naming an entry the request did not have is left out.
    let r = denied(&ids, Some("web"));
    let back = from_status(&to_status(&r, "resource"), &ids[..1]).unwrap();
    assert_eq!(back.refusal.resources.len(), 1);
}
