//! A lowered grant counts at its old amount until the client shows it got
//! the lower one or the old lease ends (`lowered.rs`): an answer that
//! lowers a grant may be lost, and the client then uses the higher lease
//! to its end.

use super::*;

/// FAIR_SHARE of 100, leases of 10 s refreshed every 2 s, no learning.
const LOWERED: &str = "[[resources]]\nidentifier_glob = \"r\"\ncapacity = 100\n\
    [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 10\nrefresh_interval = 2\n\
    learning_mode_duration = 0\n";

pub(super) fn core(min_interval: Span) -> ServerCore {
    let cfg = Arc::new(Config::parse(LOWERED, "lowered.toml").unwrap());
    let mut c = ServerCore::new(
        CoreOptions {
            role: Role::Root,
            server_id: "me:1".into(),
            min_request_interval: min_interval,
            shadow_all: false,
        },
        cfg,
    );
    c.become_master(t(0));
    c
}

/// A request for "r" wanting 100, holding `has` with `left` ms of it left
/// by the client's clock (our clients say).
pub(super) fn holding(has: Option<f64>, left: i64) -> ResourceAsk {
    let mut a = ask("r", 100.0, has);
    if let Some(c) = a.claim.as_mut() {
        c.remaining = Some(Span::from_millis(left));
    }
    a
}

pub(super) fn ms(x: i64) -> Time {
    t(0) + Span::from_millis(x)
}

#[test]
fn a_lost_lowering_keeps_the_old_grant_counted_until_it_ends() {
    let mut c = core(Span::ZERO);
    let a = get(&mut c, t(1), "a", holding(None, 0));
    assert_eq!((a.lease.capacity, a.lease.expiry), (100.0, t(11)));
    assert_eq!(get(&mut c, t(2), "b", holding(None, 0)).lease.capacity, 0.0);
    // a is lowered to its share and told to come back in a second; the
    // answer is lost: a uses its 100 until 11.
    let g = get(&mut c, t(3), "a", holding(Some(100.0), 8_000));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 1));
    let b = get(&mut c, t(4), "b", holding(Some(0.0), 0));
    assert_eq!(b.lease.capacity, 0.0, "a's 100 still counts");
    // a asks again with the same lease (the answer was lost), and that
    // answer is lost too: the end it claims is still 11.
    get(&mut c, t(5), "a", holding(Some(100.0), 6_000));
    c.cleanup(ms(10_999));
    let b = get(&mut c, ms(10_999), "b", holding(Some(0.0), 0));
    assert_eq!(b.lease.capacity, 0.0, "until a's old lease ends");
    c.cleanup(t(11));
    let b = get(&mut c, t(11), "b", holding(Some(0.0), 0));
    assert_eq!(b.lease.capacity, 50.0, "then the difference is free");
}

#[test]
fn a_lowering_that_arrives_frees_the_difference_at_the_next_request() {
    let mut c = core(Span::secs(1));
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    get(&mut c, t(3), "a", holding(Some(100.0), 8_000));
    // a got the 50 and shows it a second later.
    let g = get(&mut c, t(4), "a", holding(Some(50.0), 9_000));
    assert_eq!((g.lease.capacity, g.lease.refresh_interval), (50.0, 2));
    let b = get(&mut c, t(4), "b", holding(Some(0.0), 0));
    assert_eq!(b.lease.capacity, 50.0);
}

/// Inside the minimum interval a request gets the lease it holds without
/// a decision, but what it claims still frees a lowered difference.
#[test]
fn a_repeat_inside_the_minimum_interval_shows_the_lower_grant() {
    let mut c = core(Span::secs(1));
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    get(&mut c, ms(3_000), "a", holding(Some(100.0), 8_000));
    let g = get(&mut c, ms(3_900), "a", holding(Some(50.0), 9_900));
    assert_eq!((g.decision, g.lease.capacity), (Decision::Repeat, 50.0));
    let b = get(&mut c, t(4), "b", holding(Some(0.0), 0));
    assert_eq!(b.lease.capacity, 50.0);
}

/// What a client claims beyond what this server counts for it (a lie, or
/// a lease of a predecessor outside learning mode) is not counted.
#[test]
fn a_claim_above_the_grant_counts_for_no_more_than_the_grant() {
    let mut c = core(Span::ZERO);
    get(&mut c, t(1), "a", ask("r", 30.0, None));
    let mut lie = ask("r", 30.0, Some(90.0));
    lie.claim = lie.claim.map(|c| Claim {
        remaining: Some(Span::secs(9)),
        ..c
    });
    let g = get(&mut c, t(2), "a", lie);
    assert_eq!(g.lease.capacity, 30.0);
    let b = get(&mut c, t(3), "b", holding(None, 0));
    assert_eq!(b.lease.capacity, 70.0);
}

/// A client that says its lease has ended (no claim, or none left) holds
/// nothing beyond its grant: a restarted process, or one whose lease ran
/// out on its own clock.
#[test]
fn a_client_without_a_lease_holds_only_its_grant() {
    let mut c = core(Span::ZERO);
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    get(&mut c, t(3), "a", holding(Some(100.0), 0));
    assert_eq!(
        get(&mut c, t(3), "b", holding(Some(0.0), 0)).lease.capacity,
        50.0
    );
    let mut c = core(Span::ZERO);
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    get(&mut c, t(3), "a", holding(None, 0));
    assert_eq!(
        get(&mut c, t(3), "b", holding(Some(0.0), 0)).lease.capacity,
        50.0
    );
}

/// The periodic cleanup ends a lowered difference at the old lease's end
/// too, whether or not anyone asks; the record itself stays until its
/// latest lease ends.
#[test]
fn cleanup_ends_the_difference_at_the_old_end_and_keeps_the_record() {
    let mut c = core(Span::ZERO);
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    get(&mut c, t(3), "a", holding(Some(100.0), 4_000));
    let has = |c: &mut ServerCore, at| c.status(at, 0).resources[0].has;
    assert_eq!(has(&mut c, t(6)), 50.0);
    let lowered = |c: &mut ServerCore, at| {
        let st = c.status(at, 10);
        let l = st.resources[0].leases.iter().find(|l| l.id == "a").cloned();
        l.and_then(|l| l.lowered_from)
    };
    assert_eq!(lowered(&mut c, t(6)), Some(100.0));
    c.cleanup(t(7));
    assert_eq!(lowered(&mut c, t(7)), None, "a's old lease ended at 7");
    assert!(
        c.lease_of("r", &client("a")).is_some(),
        "its 50 lasts to 13"
    );
    assert_eq!(
        get(&mut c, t(7), "b", holding(Some(0.0), 0)).lease.capacity,
        50.0
    );
}

/// A client that goes on claiming a higher lease after it was lowered (its
/// answers lost, or a liar) holds it no longer than that lease: the end
/// fixed when it was lowered does not move with the later, lower grants.
/// Here a liar's claim was echoed in learning mode (lease until 35).
#[test]
fn a_client_that_keeps_claiming_a_lowered_lease_holds_it_until_its_end() {
    let text = "[[resources]]\nidentifier_glob = \"db\"\ncapacity = 100\n[resources.algorithm]\n\
                kind = \"FAIR_SHARE\"\nlease_length = 20\nrefresh_interval = 5\n";
    let cfg = Arc::new(Config::parse(text, "liar.toml").unwrap());
    let mut c = ServerCore::new(CoreOptions::default(), cfg);
    c.become_master(t(0));
    let mut honest = Vec::new();
    for s in (0..=45).step_by(5) {
        c.cleanup(t(s));
        get(&mut c, t(s), "liar", ask("db", 0.0, Some(91_355.0)));
        honest.push(
            get(&mut c, t(s), "honest", ask("db", 10.0, Some(0.0)))
                .lease
                .capacity,
        );
    }
    // Learning until 20 (the liar's claim echoed: 100 until 35), its 100
    // counted until 35, then the honest client's share.
    assert_eq!(
        honest,
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0, 10.0, 10.0]
    );
}
