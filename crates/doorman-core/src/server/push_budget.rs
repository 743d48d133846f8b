//! How much a server's push passes may do: a budget of pushes per second
//! (a holder looked at and not pushed to costs a sixteenth of one), so
//! that pushing never costs more than a stated share of a server, however
//! many holders a change moves (docs/algorithms.md, "How grants move on a
//! lease stream").
//!
//! A change of a resource's fair level moves every holder of it. When
//! many arrive at once at a saturated resource, each arrival moves
//! everyone again; without a bound the pushes grow with the square of the
//! holders (150 000 arrivals took a server from 11 700 renewals a second
//! to 1 100, BENCHMARKS.md). With it, a pass looks at no more holders than
//! the budget holds, so pushes no more; the rest stay noted
//! (`Shares::take_movers`) and are looked at as the budget refills, oldest
//! first, or get what they would get at their next renewal, which is what
//! polling gives them anyway.
//!
//! Must not: read a clock (the shell passes `now`), or decide grants.

use doorman_lease::{Span, Time};

/// The budget a server runs with by default: 5 000 pushes a second, in
/// bursts of up to 20 000 (a newcomer among 10 000 holders lowers all of
/// them in one pass). A push and its acknowledgement cost a server about
/// 160 µs of CPU on a lease stream (BENCHMARKS.md), so 5 000 a second is
/// at most about 0.8 of a core of that machine.
pub const PUSH_BUDGET: PushBudgetRule = PushBudgetRule {
    per_second: 5_000.0,
    burst: 5_000.0 * BURST_SECONDS,
};

/// A budget holds this many seconds' worth.
const BURST_SECONDS: f64 = 4.0;

/// What looking at a holder without pushing to it costs, in pushes (a
/// look is a lookup and a comparison; a push is a message and its
/// acknowledgement, a decision).
const LOOK: f64 = 1.0 / 16.0;

/// The least a pass waits to have: 10 ms of budget, so a pass held back
/// by the budget is not woken for one holder at a time.
const LEAST_PART: Span = Span::from_millis(10);

/// How fast the budget refills, and how much it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PushBudgetRule {
    /// Pushes per second, on average.
    pub per_second: f64,
    /// The most in one go (the budget's size).
    pub burst: f64,
}

/// A server's push budget (the shell's pusher holds one).
#[derive(Debug, Clone)]
pub struct PushBudget {
    rule: PushBudgetRule,
    left: f64,
    at: Time,
}

impl PushBudgetRule {
    /// `n` holders a second, in bursts of up to four seconds' worth.
    pub fn per_second(n: f64) -> Self {
        PushBudgetRule {
            per_second: n,
            burst: n * BURST_SECONDS,
        }
    }
}

impl Default for PushBudget {
    /// The server's: a full [`PUSH_BUDGET`].
    fn default() -> Self {
        PushBudget::new(PUSH_BUDGET)
    }
}

impl PushBudget {
    /// A full budget.
    pub fn new(rule: PushBudgetRule) -> Self {
        PushBudget {
            rule,
            left: rule.burst,
            at: Time::ZERO,
        }
    }

    /// One resource's part of a pass at `now`: `look(limit)` looks at up
    /// to `limit` holders (each may get a push) and says how many it
    /// looked at, how many of them it pushed to, and whether some were
    /// left. Not called when the budget is spent. Returns when to pass the
    /// resource again (`None`: nobody is left).
    pub fn part(
        &mut self,
        now: Time,
        look: impl FnOnce(usize) -> (usize, usize, bool),
    ) -> Option<Time> {
        let limit = self.available(now);
        if limit == 0 {
            return Some(self.ready_at(now));
        }
        let (looked, pushed, more) = look(limit);
        self.spend(now, (looked, pushed));
        more.then(|| self.ready_at(now))
    }

    /// How many holders a pass may look at `now` (each may get a push).
    fn available(&mut self, now: Time) -> usize {
        self.refill(now);
        self.left.floor() as usize
    }

    /// A pass at `now` looked at `looked` holders and pushed to `pushed`
    /// of them.
    fn spend(&mut self, now: Time, (looked, pushed): (usize, usize)) {
        self.refill(now);
        let idle = looked.saturating_sub(pushed) as f64;
        self.left = (self.left - pushed as f64 - idle * LOOK).max(0.0);
    }

    /// When a pass held back by the budget at `now` may go on.
    fn ready_at(&mut self, now: Time) -> Time {
        self.refill(now);
        let part = (self.rule.per_second * LEAST_PART.as_secs_f64()).min(self.rule.burst);
        let short = (part - self.left).max(0.0);
        let wait = short / self.rule.per_second.max(1e-9);
        now + Span::from_millis((wait * 1000.0).ceil() as i64)
    }

    fn refill(&mut self, now: Time) {
        if now > self.at {
            let gained = (now - self.at).as_secs_f64() * self.rule.per_second;
            self.left = (self.left + gained).min(self.rule.burst);
            self.at = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: PushBudgetRule = PushBudgetRule {
        per_second: 1_000.0,
        burst: 4_000.0,
    };

    #[test]
    fn a_burst_then_the_rate() {
        let mut b = PushBudget::new(RULE);
        let t = Time::from_secs(100);
        assert_eq!(b.available(t), 4_000);
        b.spend(t, (1_600, 0));
        assert_eq!(b.available(t), 3_900, "a look is a sixteenth of a push");
        b.spend(t, (3_900, 3_900));
        assert_eq!(b.available(t), 0);
        assert_eq!(b.ready_at(t), t + Span::from_millis(10));
        let later = t + Span::from_millis(250);
        assert_eq!(b.available(later), 250);
        assert_eq!(b.ready_at(later), later, "enough for a part");
        let much_later = t + Span::secs(60);
        assert_eq!(b.available(much_later), 4_000, "never more than the burst");
    }

    #[test]
    fn a_part_within_the_budget_says_when_to_come_back() {
        let mut b = PushBudget::new(RULE);
        let t = Time::from_secs(100);
        assert_eq!(b.part(t, |limit| (limit.min(10), 10, false)), None);
        let left = b.part(t, |limit| {
            assert_eq!(limit, 3_990);
            (limit, limit, true)
        });
        assert_eq!(left, Some(t + Span::from_millis(10)), "spent: 10 ms");
        let spent = b.part(t, |_| panic!("not called with nothing left"));
        assert_eq!(spent, Some(t + Span::from_millis(10)));
    }

    #[test]
    fn time_going_back_refills_nothing() {
        let mut b = PushBudget::new(RULE);
        let t = Time::from_secs(100);
        b.spend(t, (4_000, 4_000));
        assert_eq!(b.available(Time::from_secs(50)), 0);
    }
}
