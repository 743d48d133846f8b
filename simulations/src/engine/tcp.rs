//! What TCP does with a message that meets a partition, as Linux does it:
//! the segment is lost, and the sender sends it again when its
//! retransmission timer fires, the timer doubling each time, until one
//! gets through (the cut is over) or the caller gives up at its deadline.
//! So a request sent during a cut still arrives when the cut ends, if the
//! next retransmission comes before the call's deadline; before, the
//! simulator lost it for good (docs/sim-vs-real.md, "TCP across a cut").
//!
//! Must not: decide anything about calls (the engine's `serve.rs` does).

use doorman_lease::{Span, Time};

/// The first retransmission timeout of a new connection's SYN (Linux's
/// `TCP_TIMEOUT_INIT`).
pub const SYN_RTO: Span = Span::secs(1);

/// The first retransmission timeout of a segment on an open connection:
/// Linux's floor (`TCP_RTO_MIN`), which loopback and LAN round trips of a
/// few milliseconds never raise.
pub const SEGMENT_RTO: Span = Span::from_millis(200);

/// How long a push waits for a cut to end: the server's HTTP/2 keep-alive
/// (`doorman-grpc` `KEEPALIVE_INTERVAL`, 30 s, and `KEEPALIVE_TIMEOUT`,
/// 10 s) closes a connection whose pings go unanswered that long.
pub const PUSH_GIVE_UP: Span = Span::secs(40);

/// When a message first sent at `sent`, lost until `until`, leaves its
/// sender for good: its first retransmission at or after `until` (a new
/// connection's SYN on `SYN_RTO`, a segment of an open one on
/// `SEGMENT_RTO`, each doubling), or `None` if that is not before
/// `give_up` (the caller's deadline).
///
/// ```
/// use doorman_lease::{Span, Time};
/// use doorman_sim::engine::tcp::retransmitted;
/// let t = Time::from_secs;
/// // A segment sent at 10 s, the cut over at 11 s: resent at 10.2, 10.6,
/// // 11.4 s: the third gets through.
/// assert_eq!(retransmitted(t(10), t(11), false, t(14)), Some(Time::from_millis(11_400)));
/// // A SYN: resent at 11, 13, 17 s; the deadline comes first.
/// assert_eq!(retransmitted(t(10), t(14), true, t(14)), None);
/// ```
pub fn retransmitted(sent: Time, until: Time, fresh: bool, give_up: Time) -> Option<Time> {
    let mut rto = if fresh { SYN_RTO } else { SEGMENT_RTO };
    let mut at = sent + rto;
    while at < until && at < give_up {
        rto = Span::from_millis(rto.as_millis().saturating_mul(2));
        at += rto;
    }
    (at >= until && at < give_up).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_lost_in_a_cut_gets_through_on_the_next_timer_after_it() {
        let t = Time::from_millis;
        // Sent after the cut: the first retransmission already passes.
        assert_eq!(
            retransmitted(t(5_000), t(4_000), false, t(9_000)),
            Some(t(5_200))
        );
        // Segments: 0.2, 0.6, 1.4, 3.0, 6.2 s after sending.
        assert_eq!(
            retransmitted(t(0), t(2_900), false, t(9_000)),
            Some(t(3_000))
        );
        assert_eq!(
            retransmitted(t(0), t(3_001), false, t(9_000)),
            Some(t(6_200))
        );
        // SYNs: 1, 3, 7 s.
        assert_eq!(
            retransmitted(t(0), t(2_500), true, t(9_000)),
            Some(t(3_000))
        );
        assert_eq!(
            retransmitted(t(0), t(3_500), true, t(9_000)),
            Some(t(7_000))
        );
        // Not before the deadline: lost.
        assert_eq!(retransmitted(t(0), t(3_500), true, t(7_000)), None);
        assert_eq!(retransmitted(t(0), t(60_000), false, t(4_000)), None);
    }
}
