//! Who a push pass looks at: the requesters whose grant may differ from
//! what they would get now, so that a server pushing grants looks at those
//! and not at every holder of a resource.
//!
//! A requester holding its target (`has` = target) would get exactly that
//! ([`Shares::would_get`] is `min(target, max(free, has))`), whatever the
//! others do, until its own target moves: its demand changes (noted), or a
//! band's rule, the capacity or the algorithm changes (everyone is noted).
//! So a pass needs to look only at the requesters noted since they were
//! last taken: a new one, one whose demand or grant moved, one left short
//! of (or above) its target by a decision or a pass, and everyone after a
//! change of rule.
//!
//! A pass may take them a part at a time (a server's push budget,
//! `doorman-core` `push_budget.rs`): those not taken stay noted, in the
//! order they were noted, and "everyone" is a sweep over the requesters
//! that a new change of rule extends to a whole round from where it is,
//! so a stream of changes never starves the requesters at its end.
//!
//! Must not: decide or record grants; hold anyone twice (a flag per slot,
//! and the sweep's range).

use std::collections::VecDeque;

use super::{RequesterId, Shares};

/// The requesters noted and not yet taken.
#[derive(Debug, Clone, Default)]
pub(super) struct Movers {
    /// Noted one by one, oldest first, each once.
    queue: VecDeque<RequesterId>,
    /// By slot index: in `queue`.
    queued: Vec<bool>,
    /// Everyone, still to visit.
    sweep: Sweep,
}

/// A round over the slots, from `next`, wrapping at `len`, with `left`
/// slots still to visit.
#[derive(Debug, Clone, Copy, Default)]
struct Sweep {
    next: usize,
    left: usize,
    len: usize,
}

impl Sweep {
    /// Slot `i` is still to be visited.
    fn covers(&self, i: usize) -> bool {
        self.left > 0 && i < self.len && (i + self.len - self.next) % self.len < self.left
    }
}

impl Movers {
    fn note(&mut self, id: RequesterId) {
        let i = id.index();
        if self.sweep.covers(i) {
            return;
        }
        if self.queued.len() <= i {
            self.queued.resize(i + 1, false);
        }
        if !self.queued[i] {
            self.queued[i] = true;
            self.queue.push_back(id);
        }
    }

    /// Everyone among `len` slots: a whole round from where the sweep is.
    fn everyone(&mut self, len: usize) {
        let next = if self.sweep.len == 0 {
            0
        } else {
            self.sweep.next % self.sweep.len
        };
        self.sweep = Sweep {
            next: next % len.max(1),
            left: len,
            len,
        };
    }

    /// The next slot the sweep visits that is not queued (one queued
    /// before the sweep reached it is taken from the queue).
    fn sweep_next(&mut self) -> Option<usize> {
        while self.sweep.left > 0 {
            let i = self.sweep.next;
            self.sweep.next = (i + 1) % self.sweep.len;
            self.sweep.left -= 1;
            if !self.queued.get(i).copied().unwrap_or(false) {
                return Some(i);
            }
        }
        None
    }

    fn pending(&self) -> bool {
        !self.queue.is_empty() || self.sweep.left > 0
    }
}

impl<T> Shares<T> {
    /// `id`'s grant, demand or target may have moved.
    pub(super) fn moved(&mut self, id: RequesterId) {
        self.movers.note(id);
    }

    /// Everyone's target may have moved.
    pub(super) fn all_moved(&mut self) {
        let len = self.slots.len();
        self.movers.everyone(len);
    }

    /// True when `id` holds its target (to rounding): it would get what
    /// it has until its target moves.
    pub fn settled(&mut self, id: RequesterId) -> bool {
        self.refresh_rules();
        let (has, target) = (self.has(id), self.target_cached(id));
        (has - target).abs() <= 1e-9 * has.max(target).max(1e-9)
    }

    /// Keeps `id` for a later pass unless it holds its target (a pass
    /// left it short, or held its push back).
    pub fn keep_mover(&mut self, id: RequesterId) {
        if !self.settled(id) {
            self.moved(id);
        }
    }

    /// Up to `limit` of the live requesters whose grant may differ from
    /// what they would get now ([`Shares::would_get`]), each once: the
    /// ones noted one by one first, oldest first, then the sweep after a
    /// change of rule, capacity or algorithm. The others stay noted;
    /// says whether any do.
    pub fn take_movers(&mut self, limit: usize) -> (Vec<RequesterId>, bool) {
        self.refresh_rules();
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(id) = self.movers.queue.pop_front() else {
                break;
            };
            self.movers.queued[id.index()] = false;
            // One the sweep will reach is taken then, once.
            if !self.movers.sweep.covers(id.index()) && self.slot(id).is_some() {
                out.push(id);
            }
        }
        while out.len() < limit {
            let Some(i) = self.movers.sweep_next() else {
                break;
            };
            let id = RequesterId(i as u32);
            if self.slot(id).is_some() {
                out.push(id);
            }
        }
        (out, self.movers.pending())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;
    use doorman_lease::{Amount, Demand};

    fn shares(capacity: f64) -> Shares<()> {
        Shares::new(Kind::FairShare, Amount::new("capacity", capacity).unwrap())
    }

    fn take(s: &mut Shares<()>) -> Vec<RequesterId> {
        s.take_movers(usize::MAX).0
    }

    fn add(s: &mut Shares<()>, wants: f64) -> RequesterId {
        let id = s.insert(&[Demand::new(0, 1, wants).unwrap()], ());
        s.decide(id);
        id
    }

    #[test]
    fn a_newcomer_with_room_moves_no_one_else() {
        let mut s = shares(100.0);
        let ids: Vec<_> = (0..10).map(|_| add(&mut s, 5.0)).collect();
        take(&mut s);
        let new = add(&mut s, 5.0);
        assert_eq!(take(&mut s), vec![new]);
        assert!(ids.iter().all(|id| s.would_get(*id) == s.has(*id)));
        assert!(take(&mut s).is_empty(), "taken: the list starts again");
    }

    #[test]
    fn a_change_of_level_moves_everyone() {
        let mut s = shares(100.0);
        for _ in 0..4 {
            add(&mut s, 25.0);
        }
        take(&mut s);
        add(&mut s, 25.0);
        assert_eq!(take(&mut s).len(), 5, "the fair level fell to 20");
        s.set_capacity(Amount::new("capacity", 200.0).unwrap());
        assert_eq!(take(&mut s).len(), 5);
    }

    #[test]
    fn a_requester_short_of_its_target_is_noted_by_its_decision() {
        let mut s = shares(100.0);
        let a = add(&mut s, 100.0);
        let b = s.insert(&[Demand::new(0, 1, 100.0).unwrap()], ());
        s.decide(b); // b gets 0 of its 50: a still holds 100
        assert!(!s.settled(b) && !s.settled(a));
        assert_eq!(take(&mut s), vec![a, b], "the level fell: everyone");
        // b asks again and still gets 0: its grant did not move, but it
        // is short of its target.
        s.decide(b);
        assert_eq!(take(&mut s), vec![b]);
        // Nothing moves, but a pass that left b short keeps it.
        s.keep_mover(b);
        assert_eq!(take(&mut s), vec![b]);
    }

    #[test]
    fn a_part_taken_leaves_the_rest_noted_in_order() {
        let mut s = shares(1000.0);
        let ids: Vec<_> = (0..5).map(|_| add(&mut s, 10.0)).collect();
        assert_eq!(s.take_movers(2), (ids[..2].to_vec(), true));
        s.moved(ids[0]);
        assert_eq!(
            s.take_movers(10),
            (vec![ids[2], ids[3], ids[4], ids[0]], false)
        );
        assert_eq!(s.take_movers(10), (vec![], false));
    }

    #[test]
    fn everyone_is_a_sweep_that_a_new_change_does_not_restart() {
        let mut s = shares(100.0);
        let ids: Vec<_> = (0..6).map(|_| add(&mut s, 50.0)).collect();
        take(&mut s);
        s.set_capacity(Amount::new("capacity", 90.0).unwrap());
        assert_eq!(s.take_movers(4), (ids[..4].to_vec(), true));
        // Another change: a whole round from where the sweep stands, so
        // the last two come next, not the first four again.
        s.set_capacity(Amount::new("capacity", 80.0).unwrap());
        assert_eq!(s.take_movers(2), (ids[4..].to_vec(), true));
        assert_eq!(s.take_movers(10), (ids[..4].to_vec(), false));
    }

    #[test]
    fn one_noted_and_swept_is_taken_once() {
        let mut s = shares(100.0);
        let ids: Vec<_> = (0..3).map(|_| add(&mut s, 50.0)).collect();
        take(&mut s);
        s.moved(ids[1]);
        s.set_capacity(Amount::new("capacity", 90.0).unwrap());
        assert_eq!(take(&mut s), ids, "the sweep takes ids[1]");
        // Queued before the sweep starts: taken by the sweep, once, even
        // across parts.
        s.moved(ids[2]);
        s.moved(ids[0]);
        s.set_capacity(Amount::new("capacity", 80.0).unwrap());
        assert_eq!(s.take_movers(1), (vec![ids[0]], true));
        assert_eq!(take(&mut s), ids[1..].to_vec());
        // Noted after the sweep passed it: taken again.
        s.set_capacity(Amount::new("capacity", 70.0).unwrap());
        assert_eq!(s.take_movers(1), (vec![ids[0]], true));
        s.moved(ids[0]);
        assert_eq!(take(&mut s), vec![ids[0], ids[1], ids[2]]);
    }

    #[test]
    fn a_removed_requester_is_not_taken() {
        let mut s = shares(100.0);
        let a = add(&mut s, 10.0);
        let b = add(&mut s, 10.0);
        s.remove(a);
        assert_eq!(take(&mut s), vec![b]);
    }
}
