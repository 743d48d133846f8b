//! Pushed grants (`push.rs`): a holder on a lease stream gets what it
//! would get now without asking; a lowered push counts the old amount
//! until the holder acknowledges it; the rule holds pushes back.

use super::lowered::{core, holding, ms};
use super::*;

/// A push pass over `who` of "r" at `now`, none of them pushed to before:
/// those of them the core names (`push_candidates`) are asked what they
/// are due; the others get nothing.
fn pass(c: &mut ServerCore, now: Time, who: &[&str]) -> Vec<Push> {
    let named = c.push_candidates(now, "r", None, usize::MAX).whos;
    let holders: Vec<(Who, Option<Time>)> = who
        .iter()
        .map(|w| client(w))
        .filter(|w| named.contains(w))
        .map(|w| (w, None))
        .collect();
    let pushes = c.push(now, "r", &holders, &PUSH_RULE);
    let due = |w: &&str| holders.iter().position(|h| h.0 == client(w));
    let pick = |i: Option<usize>| i.map_or(Push::Nothing, |i| pushes[i].clone());
    who.iter().map(|w| pick(due(w))).collect()
}

fn pushed(p: &Push) -> Option<(f64, Time)> {
    match p {
        Push::Grant(g) => Some((g.lease.capacity, g.lease.expiry)),
        _ => None,
    }
}

#[test]
fn a_newcomer_lowers_the_holder_by_push_and_gets_its_share_after_the_ack() {
    let mut c = core(Span::secs(1));
    assert_eq!(
        get(&mut c, t(1), "a", holding(None, 0)).lease.capacity,
        100.0
    );
    assert_eq!(get(&mut c, t(2), "b", holding(None, 0)).lease.capacity, 0.0);
    // a is pushed its share, its lease keeping its end (11); b, waiting,
    // gets nothing yet: a's 100 counts until it acknowledges.
    let p = pass(&mut c, ms(2_010), &["a", "b"]);
    assert_eq!(pushed(&p[0]), Some((50.0, t(11))));
    assert_eq!(p[1], Push::Nothing);
    // a acknowledges (a request claiming the 50, inside the minimum
    // interval of nothing: pushes are not requests); b is pushed its half.
    let ack = get(&mut c, ms(2_020), "a", holding(Some(50.0), 8_980));
    assert_eq!(ack.lease.capacity, 50.0);
    let p = pass(&mut c, ms(2_030), &["a", "b"]);
    assert_eq!(p[0], Push::Nothing);
    assert_eq!(pushed(&p[1]), Some((50.0, t(12))));
}

#[test]
fn a_lost_lowering_push_keeps_the_old_grant_counted_until_the_lease_ends() {
    let mut c = core(Span::secs(1));
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    assert!(pushed(&pass(&mut c, ms(2_010), &["a"])[0]).is_some());
    // The push is lost: a renews claiming its 100, and is told 50 again.
    let g = get(&mut c, t(5), "a", holding(Some(100.0), 6_000));
    assert_eq!(g.lease.capacity, 50.0);
    assert_eq!(
        get(&mut c, t(6), "b", holding(Some(0.0), 0)).lease.capacity,
        0.0
    );
    c.cleanup(t(11));
    let b = get(&mut c, t(11), "b", holding(Some(0.0), 0));
    assert_eq!(b.lease.capacity, 50.0, "free once a's old lease ended");
}

#[test]
fn a_pass_looks_only_at_holders_whose_grant_may_have_moved() {
    let mut c = core(Span::secs(1));
    let named = |c: &mut ServerCore, now: Time| c.push_candidates(now, "r", None, usize::MAX).whos;
    for w in ["a", "b", "c"] {
        get(&mut c, t(1), w, ask("r", 30.0, None));
    }
    assert!(named(&mut c, t(2)).is_empty(), "all hold their targets");
    get(&mut c, t(3), "a", ask("r", 30.0, Some(30.0)));
    get(&mut c, t(3), "d", ask("r", 5.0, None));
    assert!(
        named(&mut c, t(3)).is_empty(),
        "a renewal as it was, a newcomer there is room for"
    );
    // e fills the resource past its capacity: the fair level falls to
    // 23.75, and everyone above or below it is named; d (5) is not.
    get(&mut c, t(4), "e", ask("r", 30.0, None));
    let n = named(&mut c, t(4));
    assert_eq!(n.len(), 4, "{n:?}");
    assert!(["a", "b", "c", "e"].iter().all(|w| n.contains(&client(w))));
    // Only a streams, and its push is held back: it alone is named next.
    let last = Some(t(4));
    let p = c.push(t(4), "r", &[(client("a"), last)], &PUSH_RULE);
    assert!(matches!(p[0], Push::Later(_)));
    assert_eq!(named(&mut c, t(4)), [client("a")]);
}

#[test]
fn a_pass_within_its_budget_leaves_the_rest_for_the_next() {
    let mut c = core(Span::secs(1));
    for w in ["a", "b", "c", "d"] {
        get(&mut c, t(1), w, ask("r", 30.0, None));
    }
    c.push_candidates(t(1), "r", None, usize::MAX);
    // e moves the fair level: all five may have moved. A budget of two
    // looks at two, and says some are left; the next part takes the rest.
    get(&mut c, t(2), "e", ask("r", 30.0, None));
    let first = c.push_candidates(t(2), "r", None, 2);
    assert_eq!((first.looked, first.more), (2, true));
    let rest = c.push_candidates(t(2), "r", None, 10);
    assert_eq!((rest.looked, rest.more), (3, false));
    let mut all = first.whos;
    all.extend(rest.whos);
    all.sort_by_key(|w| format!("{w:?}"));
    let five: Vec<Who> = ["a", "b", "c", "d", "e"].map(client).into();
    assert_eq!(all, five);
    // Nothing is left: a part looks at no one, and the generation is
    // still given (a pass that saw it skips the resource).
    let none = c.push_candidates(t(2), "r", None, 10);
    assert_eq!((none.looked, none.more, none.whos.len()), (0, false, 0));
    assert!(none.generation.is_some());
}

#[test]
fn the_rule_holds_back_small_raises_and_pushes_too_soon() {
    let rule = PUSH_RULE;
    assert!(rule.worth(10.0, 9.99), "any lowering");
    assert!(!rule.worth(10.0, 10.05), "a raise below 1 %");
    assert!(rule.worth(10.0, 10.2));
    assert!(rule.worth(0.0, 0.001), "from nothing");
    let mut c = core(Span::secs(1));
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    let last = Some(ms(2_000));
    let p = c.push(ms(2_005), "r", &[(client("a"), last)], &rule);
    assert_eq!(p[0], Push::Later(ms(2_010)));
    let p = c.push(ms(2_010), "r", &[(client("a"), last)], &rule);
    assert!(pushed(&p[0]).is_some());
}

#[test]
fn nothing_is_pushed_in_learning_mode_by_a_standby_or_after_the_lease() {
    let mut c = core_with(0);
    get(&mut c, t(1), "a", ask("fair", 80.0, Some(70.0)));
    let p = c.push(t(2), "fair", &[(client("a"), None)], &PUSH_RULE);
    assert_eq!(p[0], Push::Nothing, "learning");
    let mut c = core(Span::secs(1));
    get(&mut c, t(1), "a", holding(None, 0));
    get(&mut c, t(2), "b", holding(None, 0));
    assert_eq!(
        pass(&mut c, t(12), &["a"])[0],
        Push::Nothing,
        "a's lease ended"
    );
    c.step_down(None);
    assert_eq!(pass(&mut c, ms(2_010), &["a"])[0], Push::Nothing);
}

#[test]
fn an_intermediate_takes_a_pushed_grant_and_reports_once_down_to_it() {
    use super::intermediate::{leaf_granted, parent_grant};
    let mut c = leaf_granted(40.0, parent_grant(20.0, 60, 16, 0));
    assert_eq!(
        get(&mut c, t(2), "a", ask("r", 40.0, None)).lease.capacity,
        20.0
    );
    c.take_upstream_wake();
    // A raise crossing a request is dropped.
    let raise = [parent_grant(40.0, 99, 16, 0)];
    assert!(c.upstream_push(t(3), (&raise, true)).is_empty());
    assert_eq!(
        get(&mut c, t(3), "a", ask("r", 40.0, Some(20.0)))
            .lease
            .capacity,
        20.0
    );
    // A raise: taken at once, the upstream lease keeping its end (60)
    // whatever the push says.
    assert_eq!(c.upstream_push(t(3), (&raise, false)), ["r"]);
    let g = get(&mut c, t(4), "a", ask("r", 40.0, Some(20.0)));
    assert_eq!(g.lease.capacity, 40.0);
    assert!(g.lease.expiry <= t(60), "{:?}", g.lease.expiry);
    assert!(!c.take_upstream_wake());
    // A lowering: the parent counts the 40 until told what is out, which
    // is told as soon as a has come down to the new 10.
    assert_eq!(
        c.upstream_push(t(5), (&[parent_grant(10.0, 60, 16, 0)], false)),
        ["r"]
    );
    assert_eq!(
        get(&mut c, t(6), "a", ask("r", 40.0, Some(40.0)))
            .lease
            .capacity,
        10.0
    );
    assert!(!c.take_upstream_wake(), "40 still out");
    get(&mut c, t(7), "a", ask("r", 40.0, Some(10.0)));
    assert!(c.take_upstream_wake(), "down to the pushed 10");
    assert_eq!(c.upstream_request(t(7)).unwrap()[0].outstanding, 10.0);
}
