//! Who a push pass looks at: the requesters whose grant may differ from
//! what they would get now, so that a server pushing grants looks at those
//! and not at every holder of a resource.
//!
//! A requester holding its target (`has` = target) would get exactly that
//! ([`Shares::would_get`] is `min(target, max(free, has))`), whatever the
//! others do, until its own target moves: its demand changes (noted), or a
//! band's rule, the capacity or the algorithm changes (everyone is noted).
//! So a pass needs to look only at the requesters noted since the last
//! one: a new one, one whose demand or grant moved, one left short of (or
//! above) its target by a decision or a pass, and everyone after a change
//! of rule.
//!
//! Must not: decide or record grants; grow without bound while nobody
//! takes the list (past twice the requesters it becomes "everyone").

use super::{RequesterId, Shares};

/// The requesters noted since the last [`Shares::take_movers`].
#[derive(Debug, Clone, Default)]
pub(super) struct Movers {
    ids: Vec<RequesterId>,
    /// Everyone (a rule, the capacity or the algorithm changed).
    all: bool,
}

impl Movers {
    fn note(&mut self, id: RequesterId, live: usize) {
        if self.all {
            return;
        }
        if self.ids.len() > 2 * live + 64 {
            self.everyone();
            return;
        }
        self.ids.push(id);
    }

    fn everyone(&mut self) {
        self.all = true;
        self.ids = Vec::new();
    }
}

impl<T> Shares<T> {
    /// `id`'s grant, demand or target may have moved.
    pub(super) fn moved(&mut self, id: RequesterId) {
        let live = self.live;
        self.movers.note(id, live);
    }

    /// Everyone's target may have moved.
    pub(super) fn all_moved(&mut self) {
        self.movers.everyone();
    }

    /// True when `id` holds its target (to rounding): it would get what
    /// it has until its target moves.
    pub fn settled(&mut self, id: RequesterId) -> bool {
        self.refresh_rules();
        let (has, target) = (self.has(id), self.target_cached(id));
        (has - target).abs() <= 1e-9 * has.max(target).max(1e-9)
    }

    /// Keeps `id` for the next pass unless it holds its target (a pass
    /// left it short, or held its push back).
    pub fn keep_mover(&mut self, id: RequesterId) {
        if !self.settled(id) {
            self.moved(id);
        }
    }

    /// The requesters whose grant may differ from what they would get now
    /// ([`Shares::would_get`]): every live one noted since the last call
    /// (each once), or all of them after a change of rule, capacity or
    /// algorithm. The list starts empty again.
    pub fn take_movers(&mut self) -> Vec<RequesterId> {
        self.refresh_rules();
        if std::mem::take(&mut self.movers.all) {
            return self.ids().collect();
        }
        let mut ids = std::mem::take(&mut self.movers.ids);
        ids.sort_unstable();
        ids.dedup();
        ids.retain(|id| self.slot(*id).is_some());
        ids
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

    fn add(s: &mut Shares<()>, wants: f64) -> RequesterId {
        let id = s.insert(&[Demand::new(0, 1, wants).unwrap()], ());
        s.decide(id);
        id
    }

    #[test]
    fn a_newcomer_with_room_moves_no_one_else() {
        let mut s = shares(100.0);
        let ids: Vec<_> = (0..10).map(|_| add(&mut s, 5.0)).collect();
        s.take_movers();
        let new = add(&mut s, 5.0);
        assert_eq!(s.take_movers(), vec![new]);
        assert!(ids.iter().all(|id| s.would_get(*id) == s.has(*id)));
        assert!(s.take_movers().is_empty(), "taken: the list starts again");
    }

    #[test]
    fn a_change_of_level_moves_everyone() {
        let mut s = shares(100.0);
        for _ in 0..4 {
            add(&mut s, 25.0);
        }
        s.take_movers();
        add(&mut s, 25.0);
        assert_eq!(s.take_movers().len(), 5, "the fair level fell to 20");
        s.set_capacity(Amount::new("capacity", 200.0).unwrap());
        assert_eq!(s.take_movers().len(), 5);
    }

    #[test]
    fn a_requester_short_of_its_target_is_noted_by_its_decision() {
        let mut s = shares(100.0);
        let a = add(&mut s, 100.0);
        let b = s.insert(&[Demand::new(0, 1, 100.0).unwrap()], ());
        s.decide(b); // b gets 0 of its 50: a still holds 100
        assert!(!s.settled(b) && !s.settled(a));
        assert_eq!(s.take_movers(), vec![a, b], "the level fell: everyone");
        // b asks again and still gets 0: its grant did not move, but it
        // is short of its target.
        s.decide(b);
        assert_eq!(s.take_movers(), vec![b]);
        // Nothing moves, but a pass that left b short keeps it.
        s.keep_mover(b);
        assert_eq!(s.take_movers(), vec![b]);
    }

    #[test]
    fn the_list_is_bounded_without_a_taker() {
        let mut s = shares(1000.0);
        let a = add(&mut s, 10.0);
        for i in 0..200 {
            s.set_demands(a, &[Demand::new(0, 1, 10.0 + f64::from(i)).unwrap()]);
        }
        assert!(s.movers.all && s.movers.ids.is_empty());
        assert_eq!(s.take_movers(), vec![a]);
    }
}
