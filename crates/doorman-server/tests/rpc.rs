//! Every RPC of a real server through a real tonic client.

// Times itself: the clock rule of clippy.toml is for the library.
#![allow(clippy::disallowed_methods)]

use doorman_testkit::rpc as common;

use common::*;
use doorman_core::server::Sharded;
use doorman_proto::doorman as pb;
use tonic::Code;

#[tokio::test]
async fn discovery_says_master_with_its_address() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    let d = c
        .discovery(pb::DiscoveryRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(d.is_master);
    assert_eq!(d.mastership.master_address, Some(s.grpc_addr.to_string()));
    s.shutdown().await;
}

#[tokio::test]
async fn get_capacity_shares_fairly_in_one_bulk_request() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    assert_eq!(cap(&mut c, "a", "fair", 80.0, None).await, 80.0);
    // b's share is 50 but only 20 is free until a refreshes.
    assert_eq!(cap(&mut c, "b", "fair", 80.0, None).await, 20.0);
    assert_eq!(cap(&mut c, "a", "fair", 80.0, Some(80.0)).await, 50.0);
    // a's 80 counts until it shows it got the 50 (a lowered grant).
    clock.advance(1.0);
    assert_eq!(cap(&mut c, "a", "fair", 80.0, Some(50.0)).await, 50.0);
    let r = get(
        &mut c,
        "b",
        vec![rr("fair", 80.0, Some(20.0)), rr("db/x", 10.0, None)],
    )
    .await;
    assert_eq!(r.response.len(), 2);
    assert_eq!(r.response[0].resource_id, "fair");
    assert_eq!(r.response[0].gets.capacity, 50.0);
    assert_eq!(r.response[0].gets.refresh_interval, 4);
    assert_eq!(r.response[0].gets.expiry_time, clock.now_secs() + 20);
    assert_eq!(
        r.response[0].safe_capacity,
        Some(50.0),
        "dynamic: 100 / 2 clients"
    );
    assert_eq!(r.response[1].gets.capacity, 10.0);
    assert_eq!(r.response[1].safe_capacity, Some(2.0), "configured");
    s.shutdown().await;
}

#[tokio::test]
async fn get_server_capacity_weights_bands_and_sends_the_algorithm() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    // Like our intermediates: they claim the lease they hold (`has`) and
    // report what they handed out.
    let req = |id: &str, n: i64, wants: f64, has: Option<pb::Lease>| pb::GetServerCapacityRequest {
        report: None,
        server_id: id.into(),
        resource: vec![pb::ServerCapacityResourceRequest {
            resource_id: "fair".into(),
            has,
            wants: vec![pb::PriorityBandAggregate {
                priority: 0,
                num_clients: n,
                wants,
            }],
            outstanding: Some(0.0),
            has_remaining_ms: None,
        }],
    };
    let mut last: Vec<pb::ServerCapacityResourceResponse> = vec![];
    for _ in 0..3 {
        let held: Vec<Option<pb::Lease>> = (0..2).map(|i| last.get(i).map(|r| r.gets)).collect();
        last.clear();
        for (i, (id, n)) in [("leaf1", 1), ("leaf2", 3)].into_iter().enumerate() {
            let r = c
                .get_server_capacity(req(id, n, 1000.0, held[i]))
                .await
                .unwrap()
                .into_inner();
            assert!(r.mastership.is_none());
            last.push(r.response[0].clone());
        }
    }
    assert_eq!(last[0].gets.capacity, 25.0);
    assert_eq!(last[1].gets.capacity, 75.0);
    let alg = last[0]
        .algorithm
        .as_ref()
        .expect("algorithm sent to downstream servers");
    assert_eq!(alg.kind, pb::algorithm::Kind::FairShare as i32);
    assert_eq!((alg.lease_length, alg.refresh_interval), (20, 4));
    assert_eq!(last[0].safe_capacity, Some(25.0));
    s.shutdown().await;
}

#[tokio::test]
async fn release_capacity_frees_the_share() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    assert_eq!(cap(&mut c, "a", "fair", 100.0, None).await, 100.0);
    assert_eq!(cap(&mut c, "b", "fair", 100.0, None).await, 0.0);
    let r = c
        .release_capacity(pb::ReleaseCapacityRequest {
            client_id: "a".into(),
            resource_id: vec!["fair".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.mastership.is_none());
    assert_eq!(cap(&mut c, "b", "fair", 100.0, None).await, 100.0);
    s.shutdown().await;
}

#[tokio::test]
async fn learning_mode_echoes_claims_then_shares() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    assert_eq!(
        cap(&mut c, "old", "learn", 90.0, Some(70.0)).await,
        70.0,
        "claimed has echoed"
    );
    assert_eq!(
        cap(&mut c, "new", "learn", 90.0, None).await,
        0.0,
        "newcomer gets 0"
    );
    clock.advance(10.0);
    // Learning over: the algorithm runs. new's share is 50, 30 is free.
    assert_eq!(cap(&mut c, "new", "learn", 90.0, Some(0.0)).await, 30.0);
    assert_eq!(cap(&mut c, "old", "learn", 90.0, Some(70.0)).await, 50.0);
    // old's 70 counts until it shows it got the 50 (a lowered grant).
    clock.advance(1.0);
    assert_eq!(cap(&mut c, "new", "learn", 90.0, Some(30.0)).await, 30.0);
    assert_eq!(cap(&mut c, "old", "learn", 90.0, Some(50.0)).await, 50.0);
    clock.advance(1.0);
    assert_eq!(cap(&mut c, "new", "learn", 90.0, Some(30.0)).await, 50.0);
    s.shutdown().await;
}

#[tokio::test]
async fn expired_leases_are_reclaimed() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    assert_eq!(cap(&mut c, "a", "fair", 100.0, None).await, 100.0);
    clock.advance(19.0);
    assert_eq!(cap(&mut c, "b", "fair", 100.0, None).await, 0.0);
    clock.advance(1.0);
    assert_eq!(cap(&mut c, "b", "fair", 100.0, None).await, 100.0);
    s.shutdown().await;
}

#[tokio::test]
async fn templates_exact_match_first_then_globs_in_file_order() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    assert_eq!(
        cap(&mut c, "a", "db/special", 100.0, None).await,
        5.0,
        "exact STATIC template"
    );
    assert_eq!(
        cap(&mut c, "a", "db/other", 100.0, None).await,
        50.0,
        "db/* glob"
    );
    let (_, body) = http_get(s.http_addr.unwrap(), "/api/v1/status").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let templates: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["template"].as_str().unwrap())
        .collect();
    assert_eq!(templates, ["db/*", "db/special"]);
    s.shutdown().await;
}

#[tokio::test]
async fn unmatched_resource_gets_its_wants_and_is_counted() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    let r = get(&mut c, "a", vec![rr("no/template/here", 1234.0, None)]).await;
    assert_eq!(r.response[0].gets.capacity, 1234.0);
    assert_eq!(r.response[0].gets.expiry_time, clock.now_secs() + 60);
    let (status, body) = http_get(s.http_addr.unwrap(), "/metrics").await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(
        metric(&body, "doorman_server_unmatched_resource_requests_total"),
        Some(1.0)
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_standby_redirects_every_rpc() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    s.state.core().step_down(Some("127.0.0.1:9".into()));
    assert_redirects(&s.grpc_addr.to_string(), Some("127.0.0.1:9")).await;
    // Unknown master: UNAVAILABLE with the reason, not a redirect to
    // nowhere; Discovery still says "not master".
    s.state.core().step_down(None);
    assert_unavailable_standby(&s.grpc_addr.to_string()).await;
    s.shutdown().await;
}

async fn invalid(
    c: &mut doorman_proto::CapacityClient<tonic::transport::Channel>,
    req: pb::GetCapacityRequest,
) -> String {
    let e = c.get_capacity(req).await.expect_err("must be rejected");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    e.message().to_string()
}

#[tokio::test]
async fn bad_requests_get_invalid_argument_naming_the_field() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    let req = |id: &str, rs: Vec<pb::ResourceRequest>| pb::GetCapacityRequest {
        client_id: id.into(),
        resource: rs,
    };
    assert_eq!(
        invalid(&mut c, req("", vec![])).await,
        "client_id: must not be empty"
    );
    assert_eq!(
        invalid(&mut c, req(&"c".repeat(257), vec![])).await,
        "client_id: must be at most 256 bytes, got 257"
    );
    assert_eq!(
        invalid(&mut c, req("c", vec![rr("", 1.0, None)])).await,
        "resource[0].resource_id: must not be empty"
    );
    assert_eq!(
        invalid(&mut c, req("c", vec![rr(&"r".repeat(1025), 1.0, None)])).await,
        "resource[0].resource_id: must be at most 1024 bytes, got 1025"
    );
    for (w, shown) in [
        (f64::NAN, "NaN"),
        (f64::INFINITY, "inf"),
        (-1.0, "-1"),
        (1e16, "10000000000000000"),
    ] {
        assert_eq!(
            invalid(&mut c, req("c", vec![rr("fair", w, None)])).await,
            format!("resource[0].wants: must be a finite number from 0 to 1e15, got {shown}")
        );
        assert_eq!(
            invalid(&mut c, req("c", vec![rr("fair", 1.0, Some(w))])).await,
            format!(
                "resource[0].has.capacity: must be a finite number from 0 to 1e15, got {shown}"
            )
        );
    }
    let many: Vec<_> = (0..10_001)
        .map(|i| rr(&format!("r{i}"), 1.0, None))
        .collect();
    assert_eq!(
        invalid(&mut c, req("c", many)).await,
        "resource: must be at most 10000 resources per request, got 10001"
    );
    assert_eq!(
        invalid(
            &mut c,
            req("c", vec![rr("", 1.0, None), rr("fair", f64::NAN, None)])
        )
        .await,
        "resource[0].resource_id: must not be empty; \
         resource[1].wants: must be a finite number from 0 to 1e15, got NaN",
        "no valid entry: every bad one is named"
    );
    let e = c
        .get_server_capacity(pb::GetServerCapacityRequest {
            report: None,
            server_id: "s".into(),
            resource: vec![pb::ServerCapacityResourceRequest {
                resource_id: "fair".into(),
                has: None,
                wants: vec![pb::PriorityBandAggregate {
                    priority: 1,
                    num_clients: 0,
                    wants: 5.0,
                }],
                outstanding: None,
                has_remaining_ms: None,
            }],
        })
        .await
        .expect_err("num_clients 0 is rejected");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "resource[0].wants[0].num_clients: must be >= 1, got 0"
    );
    // The server is still up and its state intact.
    assert_eq!(cap(&mut c, "a", "fair", 10.0, None).await, 10.0);
    let (_, body) = http_get(s.http_addr.unwrap(), "/metrics").await;
    assert!(
        metric(
            &body,
            "doorman_server_request_errors_total{code=\"InvalidArgument\",method=\"GetCapacity\"}"
        )
        .unwrap()
            >= 11.0,
        "{body}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn http_endpoints_answer() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    cap(&mut c, "client<1>", "fair", 10.0, None).await;
    let http = s.http_addr.unwrap();
    let (st, body) = http_get(http, "/healthz").await;
    assert!(st.contains("200") && body == "ok\n", "{st} {body}");
    let (st, body) = http_get(http, "/debug/status").await;
    assert!(st.contains("200"));
    assert!(body.contains("<h1>doorman server"), "{body}");
    assert!(
        body.contains("client:client&lt;1&gt;"),
        "ids are escaped: {body}"
    );
    let (_, body) = http_get(http, "/metrics").await;
    assert_eq!(
        metric(&body, "doorman_server_resource_has{template=\"fair\"}"),
        Some(10.0)
    );
    assert_eq!(
        metric(&body, "doorman_server_resource_clients{template=\"fair\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&body, "doorman_server_is_master"), Some(1.0));
    assert!(body.contains("doorman_server_request_duration_seconds_bucket"));
    s.shutdown().await;
}

#[tokio::test]
async fn a_bulk_request_answers_its_valid_entries_and_counts_the_others() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    let r = get(
        &mut c,
        "bulk",
        vec![
            rr("fair", 30.0, None),
            rr("db/1", f64::NAN, None),
            rr("fair", 50.0, None),
            rr("", 1.0, None),
            rr("db/2", 10.0, Some(-1.0)),
            rr("db/3", 10.0, None),
        ],
    )
    .await;
    let got: Vec<(&str, f64)> = r
        .response
        .iter()
        .map(|x| (x.resource_id.as_str(), x.gets.capacity))
        .collect();
    assert_eq!(got, [("fair", 30.0), ("db/3", 10.0)]);
    let (_, body) = http_get(s.http_addr.unwrap(), "/metrics").await;
    let counted = |reason: &str| {
        let name = format!(
            "doorman_server_rejected_resources_total{{method=\"GetCapacity\",reason=\"{reason}\"}}"
        );
        metric(&body, &name)
    };
    assert_eq!(counted("wants"), Some(1.0));
    assert_eq!(counted("duplicate"), Some(1.0));
    assert_eq!(counted("resource_id"), Some(1.0));
    assert_eq!(counted("has"), Some(1.0));
    s.shutdown().await;
}

#[tokio::test]
async fn the_original_go_clients_close_releases_its_leases() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    assert_eq!(cap(&mut c, "go", "fair", 100.0, None).await, 100.0);
    assert_eq!(cap(&mut c, "go", "db/7", 50.0, None).await, 50.0);
    assert_eq!(cap(&mut c, "other", "fair", 100.0, None).await, 0.0);
    // Close() in the original Go client builds its id list with
    // make([]string, n) and then appends: n empty ids, then the real ones.
    let r = c
        .release_capacity(pb::ReleaseCapacityRequest {
            client_id: "go".into(),
            resource_id: vec![String::new(), String::new(), "fair".into(), "db/7".into()],
        })
        .await
        .expect("the release is answered OK")
        .into_inner();
    assert!(r.mastership.is_none());
    assert_eq!(
        s.state.core().lease_count(),
        1,
        "only other's lease is left"
    );
    assert_eq!(cap(&mut c, "other", "fair", 100.0, None).await, 100.0);
    // Unknown ids are ignored too.
    let r = c
        .release_capacity(pb::ReleaseCapacityRequest {
            client_id: "go".into(),
            resource_id: vec!["never/seen".into(), "fair".into()],
        })
        .await;
    assert!(r.is_ok(), "{r:?}");
    s.shutdown().await;
}

/// A GetCapacityRequest whose client_id is not UTF-8: undecodable.
#[derive(Clone, PartialEq, prost::Message)]
struct RawGetCapacity {
    #[prost(bytes = "vec", tag = "1")]
    client_id: Vec<u8>,
}

#[tokio::test]
async fn an_undecodable_request_is_invalid_argument_and_a_maximal_one_is_served() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", s.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let path =
        tonic::codegen::http::uri::PathAndQuery::from_static("/doorman.Capacity/GetCapacity");
    let codec: tonic_prost::ProstCodec<RawGetCapacity, pb::GetCapacityResponse> =
        tonic_prost::ProstCodec::default();
    let bad = RawGetCapacity {
        client_id: vec![0xff, 0xfe, 0x00],
    };
    let e = grpc
        .unary(tonic::Request::new(bad), path, codec)
        .await
        .expect_err("not UTF-8");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("failed to decode"), "{e:?}");
    // The largest request the limits allow (10 000 resources with
    // 1024-byte ids, about 10.4 MB) is answered, not refused for its size.
    let mut c = doorman_proto::CapacityClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let resources: Vec<_> = (0..10_000)
        .map(|i| rr(&format!("db/{i:01021}"), 1.0, None))
        .collect();
    assert_eq!(resources[0].resource_id.len(), 1024);
    let r = c
        .get_capacity(pb::GetCapacityRequest {
            client_id: "big".into(),
            resource: resources,
        })
        .await
        .expect("a request at the limits is served")
        .into_inner();
    assert_eq!(r.response.len(), 10_000);
    s.shutdown().await;
}

#[tokio::test]
async fn scrapes_within_a_second_share_one_page() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    let http = s.http_addr.unwrap();
    let count = |body: &str| {
        metric(
            body,
            "doorman_server_requests_total{method=\"GetCapacity\"}",
        )
    };
    // Two scrapes less than a second apart, an RPC between them: the second
    // page is the first one. Retried if this machine was too slow to stay
    // within the second.
    let mut shared = false;
    for _ in 0..5 {
        // Past the last page's second, so the first scrape builds anew.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let start = std::time::Instant::now();
        let (_, first) = http_get(http, "/metrics").await;
        cap(&mut c, "a", "fair", 10.0, None).await;
        let (_, second) = http_get(http, "/metrics").await;
        if start.elapsed() < std::time::Duration::from_millis(900) {
            assert_eq!(count(&first), count(&second), "the page was rebuilt");
            shared = true;
            break;
        }
    }
    assert!(shared, "never two scrapes within a second");
    // A second later the page is built again and shows the RPCs.
    let (_, before) = http_get(http, "/metrics").await;
    cap(&mut c, "a", "fair", 10.0, None).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (_, after) = http_get(http, "/metrics").await;
    assert!(
        count(&after) > count(&before),
        "{:?} {:?}",
        count(&before),
        count(&after)
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_request_larger_than_one_decide_step_is_answered_whole() {
    let clock = ManualClock::new();
    let s = server_with(CONFIG, &clock).await;
    let mut c = client(s.grpc_addr).await;
    let n = doorman_core::server::DECIDE_STEP * 2 + 7;
    let resources = (0..n).map(|i| rr(&format!("db/{i}"), 1.0, None)).collect();
    let r = get(&mut c, "big", resources).await;
    assert_eq!(r.response.len(), n);
    let mut ids: Vec<&str> = r.response.iter().map(|x| x.resource_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), n, "each resource once, in order");
    assert_eq!(r.response[n - 1].resource_id, format!("db/{}", n - 1));
    s.shutdown().await;
}
