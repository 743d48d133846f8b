//! The event queue: events come out in the order of their time, and events
//! due at the same millisecond in the order they were pushed (what a heap
//! ordered by (time, push sequence) gives, which is what this replaced).
//!
//! It is a calendar: one slot per millisecond for the next [`SLOTS`]
//! milliseconds, and a heap for events further ahead, moved into their slot
//! as the calendar reaches them. Nearly every event of a run (RPC delays,
//! refreshes, deadlines) lands in the calendar, where push and pop cost
//! O(1); the binary heap it replaced spent 29 % of a 100 000-client run in
//! `pop`. A slot is a list linked through one array of cells, so the
//! calendar allocates nothing per slot.
//!
//! Must not: reorder events due at the same millisecond, or let the clock go
//! back (an event pushed for a time already passed is due now).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use doorman_lease::Time;

/// Milliseconds the calendar covers ahead of the current one (65.5 s: more
/// than any refresh interval or RPC deadline of the scenarios).
const SLOTS: usize = 1 << 16;
const MASK: i64 = SLOTS as i64 - 1;
/// The end of a list of cells.
const NONE: u32 = u32::MAX;

/// Events in (time, push order).
pub(super) struct Queue<E> {
    /// Slot `t & MASK` lists the events due at millisecond `t`, for `t` in
    /// `[now, now + SLOTS)`: the first and last of its cells.
    slots: Vec<(u32, u32)>,
    /// Events in the slots.
    near: usize,
    /// The millisecond being drained: no event is due before it.
    now: i64,
    /// Events due at `now + SLOTS` or later: (time, push sequence, cell).
    far: BinaryHeap<Reverse<(i64, u64, u32)>>,
    seq: u64,
    /// Every event, each in a cell linked to the next of its slot; the
    /// empty cells are linked from `free`.
    cells: Vec<Cell<E>>,
    free: u32,
}

struct Cell<E> {
    ev: Option<E>,
    next: u32,
}

impl<E> Queue<E> {
    /// An empty queue whose clock starts at `start`.
    pub(super) fn new(start: Time) -> Self {
        Queue {
            slots: vec![(NONE, NONE); SLOTS],
            near: 0,
            now: start.as_millis(),
            far: BinaryHeap::new(),
            seq: 0,
            cells: Vec::new(),
            free: NONE,
        }
    }

    /// The millisecond being drained: the time of the event last taken
    /// (the start before the first).
    pub(super) fn now(&self) -> Time {
        Time::from_millis(self.now)
    }

    /// Adds `ev`, due at `at` (now, if `at` has passed).
    pub(super) fn push(&mut self, at: Time, ev: E) {
        let at = at.as_millis().max(self.now);
        let cell = self.store(ev);
        if at - self.now < SLOTS as i64 {
            self.append(at, cell);
        } else {
            self.seq += 1;
            self.far.push(Reverse((at, self.seq, cell)));
        }
    }

    /// Takes the next event and the time it is due.
    pub(super) fn pop(&mut self) -> Option<(Time, E)> {
        loop {
            let slot = &mut self.slots[(self.now & MASK) as usize];
            if slot.0 != NONE {
                let cell = slot.0;
                let next = self.cells[cell as usize].next;
                *slot = if next == NONE {
                    (NONE, NONE)
                } else {
                    (next, slot.1)
                };
                self.near -= 1;
                return Some((Time::from_millis(self.now), self.take(cell)));
            }
            if self.near == 0 {
                // Nothing in the calendar: jump to the first far event.
                let Reverse((at, _, _)) = *self.far.peek()?;
                self.now = at;
            } else {
                self.now += 1;
            }
            self.reach_far();
        }
    }

    /// Moves the far events now within the calendar into their slots. They
    /// were pushed before any event that went straight into those slots
    /// (which were out of reach until now), so they go first, in order.
    fn reach_far(&mut self) {
        while let Some(&Reverse((at, _, cell))) = self.far.peek() {
            if at - self.now >= SLOTS as i64 {
                break;
            }
            self.far.pop();
            self.append(at, cell);
        }
    }

    /// Links `cell` last in the slot of millisecond `at`.
    fn append(&mut self, at: i64, cell: u32) {
        self.cells[cell as usize].next = NONE;
        let slot = &mut self.slots[(at & MASK) as usize];
        if slot.1 == NONE {
            *slot = (cell, cell);
        } else {
            self.cells[slot.1 as usize].next = cell;
            slot.1 = cell;
        }
        self.near += 1;
    }

    fn store(&mut self, ev: E) -> u32 {
        if self.free == NONE {
            let cell = u32::try_from(self.cells.len())
                .ok()
                .filter(|&c| c != NONE)
                .expect("fewer than 2^32 - 1 pending events");
            self.cells.push(Cell {
                ev: Some(ev),
                next: NONE,
            });
            return cell;
        }
        let cell = self.free;
        let c = &mut self.cells[cell as usize];
        self.free = c.next;
        c.ev = Some(ev);
        cell
    }

    fn take(&mut self, cell: u32) -> E {
        let c = &mut self.cells[cell as usize];
        c.next = self.free;
        self.free = cell;
        c.ev.take().expect("a listed cell holds an event")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order a heap on (time, push sequence) gives, clamped to the
    /// clock as the queue is.
    #[test]
    fn pops_in_time_then_push_order_near_and_far() {
        let start = Time::from_secs(1_000);
        let mut q = Queue::new(start);
        let mut rng = crate::engine::Rng::new(7);
        let mut pushed: Vec<(i64, u64)> = Vec::new();
        let mut popped: Vec<(i64, u64)> = Vec::new();
        let mut now = start.as_millis();
        for n in 0..20_000u64 {
            // Mostly near, some far (up to 200 s), some in the past.
            let ahead = match rng.below(10) {
                0 => rng.below(200_000) as i64,
                1 => -(rng.below(50) as i64),
                _ => rng.below(30) as i64,
            };
            let at = (now + ahead).max(now);
            q.push(Time::from_millis(now + ahead), n);
            pushed.push((at, n));
            if rng.below(3) == 0 {
                let (t, ev) = q.pop().expect("something was pushed");
                assert!(t.as_millis() >= now, "the clock went back");
                now = t.as_millis();
                popped.push((now, ev));
            }
        }
        while let Some((t, ev)) = q.pop() {
            popped.push((t.as_millis(), ev));
        }
        assert_eq!(popped.len(), pushed.len());
        // Every event comes out at its (clamped) time…
        let mut due: Vec<i64> = vec![0; pushed.len()];
        for &(at, n) in &pushed {
            due[n as usize] = at;
        }
        for &(t, n) in &popped {
            assert_eq!(t, due[n as usize], "event {n}");
        }
        // …in time order, and in push order within a millisecond.
        for w in popped.windows(2) {
            assert!(w[0] < w[1], "{:?} then {:?}", w[0], w[1]);
        }
    }

    /// A far event reaches its slot before a later push straight into
    /// that slot, both after stepping and after a jump.
    #[test]
    fn a_far_event_goes_before_a_later_push_due_at_the_same_millisecond() {
        let slots = SLOTS as i64;
        let mut q: Queue<&str> = Queue::new(Time::ZERO);
        q.push(Time::from_millis(10), "near");
        q.push(Time::from_millis(slots + 5), "far, stepped");
        assert_eq!(q.pop(), Some((Time::from_millis(10), "near")));
        // The clock is at 10 ms: slots + 5 is now within the calendar.
        q.push(Time::from_millis(slots + 5), "direct, stepped");
        q.push(Time::from_millis(3 * slots), "far, jumped");
        assert_eq!(
            q.pop(),
            Some((Time::from_millis(slots + 5), "far, stepped"))
        );
        assert_eq!(
            q.pop(),
            Some((Time::from_millis(slots + 5), "direct, stepped"))
        );
        // Nothing in the calendar: the next pop jumps to 3 × slots, and a
        // push there goes after the event already due then.
        q.push(Time::from_millis(3 * slots + 1), "far, after the jump");
        assert_eq!(q.pop(), Some((Time::from_millis(3 * slots), "far, jumped")));
        q.push(Time::from_millis(3 * slots), "direct, after the jump");
        q.push(Time::from_millis(4 * slots - 1), "direct, last slot");
        assert_eq!(
            q.pop(),
            Some((Time::from_millis(3 * slots), "direct, after the jump"))
        );
        assert_eq!(
            q.pop(),
            Some((Time::from_millis(3 * slots + 1), "far, after the jump"))
        );
        assert_eq!(
            q.pop(),
            Some((Time::from_millis(4 * slots - 1), "direct, last slot"))
        );
        assert!(q.pop().is_none());
    }

    #[test]
    fn an_empty_queue_pops_nothing_and_jumps_to_far_events() {
        let mut q: Queue<u8> = Queue::new(Time::ZERO);
        assert!(q.pop().is_none());
        q.push(Time::from_secs(3_600), 2);
        q.push(Time::from_secs(3_600), 3);
        q.push(Time::from_secs(600), 1);
        assert_eq!(q.pop(), Some((Time::from_secs(600), 1)));
        assert_eq!(q.pop(), Some((Time::from_secs(3_600), 2)));
        assert_eq!(q.pop(), Some((Time::from_secs(3_600), 3)));
        assert!(q.pop().is_none());
    }
}
