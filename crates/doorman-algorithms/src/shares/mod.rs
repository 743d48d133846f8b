//! `Shares`: the capacity-sharing state of one resource and the decisions
//! made from it.
//!
//! It owns the demands of every requester (grouped in priority bands), each
//! requester's current grant (`has`) and running aggregates, and answers the
//! two questions callers ask: "what does this requester get now?"
//! ([`Shares::decide`]) and "what would it get in steady state?"
//! ([`Shares::target`]). The band machinery (placement in the per-band
//! treaps, the cached rules) is in `bands.rs`.
//!
//! Cost: a demand change is O(log n) (treap re-key). A decision is
//! O(bands + log n): the band rules (water level or proportional factor) are
//! cached and recomputed, O(bands · log n), only after a change, and
//! recording the grant updates the Σ has segment tree in O(log n). Nothing is
//! linear in the number of requesters except listing them.
//!
//! Must not: read a clock, do I/O, or accept unvalidated numbers.

mod bands;
mod generation;
mod learning;
mod movers;
mod summary;

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::kind::Kind;
use crate::sumtree::SumTree;
use crate::tree::{Forest, NodeId};
use bands::{merge_bands, Band, Placement};
use doorman_lease::{Amount, Demand};

/// Handle of a requester inside one [`Shares`]. Valid until removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequesterId(u32);

impl RequesterId {
    /// The slot index (dense, reused after removal).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone)]
struct Slot<T> {
    placement: Placement,
    data: T,
    /// What the requester (a downstream server) reports having handed out
    /// itself; 0 when not reported. See [`Shares::set_outstanding`].
    outstanding: f64,
}

/// Aggregates over a whole resource.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Σ wants over every band.
    pub wants: f64,
    /// Σ has (current grants).
    pub has: f64,
    /// Σ max(has, outstanding): the capacity counted as taken, which
    /// includes what downstream servers still have handed out of earlier,
    /// larger grants (see [`Shares::set_outstanding`]).
    pub taken: f64,
    /// Σ subclients over every band.
    pub subclients: f64,
    /// Number of requesters.
    pub requesters: usize,
}

/// Aggregates of one priority band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandSummary {
    /// The band's priority.
    pub priority: i64,
    /// Number of demands in the band.
    pub demands: usize,
    /// Σ subclients.
    pub subclients: f64,
    /// Σ wants.
    pub wants: f64,
    /// What the band is allotted: min(Σ wants, what higher bands left) for
    /// the share algorithms, Σ targets otherwise.
    pub allotted: f64,
}

/// The sharing state of one resource. `T` is data the caller keeps per
/// requester (a lease expiry, a name, …).
///
/// ```
/// use doorman_algorithms::{Kind, Shares};
/// use doorman_lease::{Amount, Demand};
/// let mut s = Shares::new(Kind::FairShare, Amount::new("capacity", 120.0).unwrap());
/// let ids: Vec<_> = [1000.0, 50.0, 10.0]
///     .iter()
///     .map(|w| s.insert(&[Demand::new(0, 1, *w).unwrap()], ()))
///     .collect();
/// for _ in 0..2 {
///     for id in &ids {
///         s.decide(*id);
///     }
/// }
/// let got: Vec<f64> = ids.iter().map(|id| s.has(*id)).collect();
/// assert_eq!(got, vec![60.0, 50.0, 10.0]);
/// ```
#[derive(Debug, Clone)]
pub struct Shares<T> {
    kind: Kind,
    capacity: f64,
    bands: BTreeMap<Reverse<i64>, Band>,
    forest: Forest,
    slots: Vec<Option<Slot<T>>>,
    free: Vec<u32>,
    has: SumTree,
    /// Per requester max(0, outstanding − has): handed out below it beyond
    /// its grant, still counted as taken.
    beyond: SumTree,
    live: usize,
    rules_valid: bool,
    /// Bumped by every change that may change what someone would get
    /// ([`Shares::generation`]).
    generation: u64,
    movers: movers::Movers,
}

impl<T> Shares<T> {
    /// An empty resource with the given algorithm and capacity.
    pub fn new(kind: Kind, capacity: Amount) -> Self {
        Shares {
            kind,
            capacity: capacity.get(),
            bands: BTreeMap::new(),
            forest: Forest::default(),
            slots: Vec::new(),
            free: Vec::new(),
            has: SumTree::default(),
            beyond: SumTree::default(),
            live: 0,
            rules_valid: false,
            generation: 0,
            movers: movers::Movers::default(),
        }
    }

    /// The algorithm.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Changes the algorithm (e.g. on a config reload); grants are kept.
    pub fn set_kind(&mut self, kind: Kind) {
        if kind != self.kind {
            self.kind = kind;
            self.invalidate();
            self.all_moved();
        }
    }

    /// The capacity being shared.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// Changes the capacity (config reload, new upstream lease). Current
    /// grants stay until their holders refresh; the share algorithms then
    /// hand out only what the others' grants leave free.
    pub fn set_capacity(&mut self, capacity: Amount) {
        if capacity.get() != self.capacity {
            self.capacity = capacity.get();
            self.invalidate();
            self.all_moved();
        }
    }

    /// Number of requesters.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when there are no requesters.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Adds a requester with its demands (one per band; demands in the same
    /// band are merged) and no grant yet.
    pub fn insert(&mut self, demands: &[Demand], data: T) -> RequesterId {
        let placement = self.place(demands);
        let slot = Slot {
            placement,
            data,
            outstanding: 0.0,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        self.invalidate();
        self.moved(RequesterId(idx));
        RequesterId(idx)
    }

    /// Removes a requester, forgetting its demands and grant. Returns its
    /// data, or `None` if the id was not live.
    pub fn remove(&mut self, id: RequesterId) -> Option<T> {
        let slot = self.slots.get_mut(id.index())?.take()?;
        for &(priority, node) in slot.placement.as_slice() {
            self.unplace(priority, node);
        }
        self.has.set(id.index(), 0.0);
        self.beyond.set(id.index(), 0.0);
        self.free.push(id.0);
        self.live -= 1;
        self.invalidate();
        Some(slot.data)
    }

    /// The requester's data.
    pub fn get(&self, id: RequesterId) -> Option<&T> {
        self.slot(id).map(|s| &s.data)
    }

    /// The requester's data, mutably.
    pub fn get_mut(&mut self, id: RequesterId) -> Option<&mut T> {
        self.slots
            .get_mut(id.index())
            .and_then(|s| s.as_mut())
            .map(|s| &mut s.data)
    }

    fn slot(&self, id: RequesterId) -> Option<&Slot<T>> {
        self.slots.get(id.index()).and_then(|s| s.as_ref())
    }

    /// Replaces the requester's demands. Unchanged demands cost O(1) and
    /// keep the cached band rules valid.
    pub fn set_demands(&mut self, id: RequesterId, demands: &[Demand]) {
        let Some(slot) = self.slots.get(id.index()).and_then(|s| s.as_ref()) else {
            return;
        };
        // Fast path, no allocation: one band before and after, same priority.
        if let ([d], Placement::One([(priority, node)])) = (demands, &slot.placement) {
            if d.priority() == *priority {
                let node = *node;
                if let Some(band) = self.bands.get_mut(&Reverse(d.priority())) {
                    if self
                        .forest
                        .update(&mut band.root, node, d.wants(), d.subclients())
                    {
                        self.invalidate();
                        self.moved(id);
                    }
                }
                return;
            }
        }
        let merged = merge_bands(demands);
        let old = slot.placement.as_slice();
        let same_bands =
            old.len() == merged.len() && old.iter().zip(&merged).all(|(o, m)| o.0 == m.0);
        if same_bands {
            let mut changed = false;
            let pairs: Vec<(i64, NodeId, f64, u32)> = old
                .iter()
                .zip(&merged)
                .map(|(o, m)| (o.0, o.1, m.1, m.2))
                .collect();
            for (priority, node, wants, sub) in pairs {
                if let Some(band) = self.bands.get_mut(&Reverse(priority)) {
                    changed |= self.forest.update(&mut band.root, node, wants, sub);
                }
            }
            if changed {
                self.invalidate();
                self.moved(id);
            }
            return;
        }
        let old: Vec<(i64, NodeId)> = old.to_vec();
        for (priority, node) in old {
            self.unplace(priority, node);
        }
        let placement = self.place(demands);
        if let Some(slot) = self.slots.get_mut(id.index()).and_then(|s| s.as_mut()) {
            slot.placement = placement;
        }
        self.invalidate();
        self.moved(id);
    }

    /// The requester's current grant.
    pub fn has(&self, id: RequesterId) -> f64 {
        self.has.get(id.index())
    }

    /// What is counted as taken by the requester: its grant, or what it
    /// reported still having handed out if that is more
    /// ([`Shares::set_outstanding`]).
    pub fn taken(&self, id: RequesterId) -> f64 {
        self.has(id) + self.beyond.get(id.index())
    }

    /// Σ taken over every requester: what they hold, and what they still
    /// have handed out below them beyond it. O(1).
    pub fn taken_total(&self) -> f64 {
        self.has.total() + self.beyond.total()
    }

    /// Records the requester's grant without running an algorithm.
    pub fn set_has(&mut self, id: RequesterId, has: Amount) {
        if self.slot(id).is_some() {
            self.put_has(id, has.get());
        }
    }

    /// Records what the requester, a downstream server, reports having
    /// handed out itself (`None`: not reported, counts as 0). While that
    /// is more than its grant (its grant shrank, and its own requesters
    /// still hold leases from the larger one until they refresh), the
    /// difference counts as taken in everybody else's decisions, so the
    /// sum of what is handed out below this point stays within the
    /// capacity even if the requester cannot reach its requesters or this
    /// server again before its lease runs out. The requester's own grant
    /// is not affected. The report counts only up to what the requester is
    /// already counted as taking (its grant, or an earlier report): it can
    /// have handed out no more than it was granted, so a report can never
    /// raise what a requester holds.
    pub fn set_outstanding(&mut self, id: RequesterId, outstanding: Option<Amount>) {
        let has = self.has.get(id.index());
        let taken = has + self.beyond.get(id.index());
        let Some(slot) = self.slots.get_mut(id.index()).and_then(|s| s.as_mut()) else {
            return;
        };
        slot.outstanding = outstanding.map_or(0.0, |o| o.get().min(taken));
        self.put_has(id, has);
    }

    /// What the requester last reported having handed out (0 if never).
    pub fn outstanding(&self, id: RequesterId) -> f64 {
        self.slot(id).map_or(0.0, |s| s.outstanding)
    }

    /// Records a grant and what it leaves counted as taken beyond it.
    fn put_has(&mut self, id: RequesterId, has: f64) {
        let outstanding = self.slot(id).map_or(0.0, |s| s.outstanding);
        let beyond = (outstanding - has).max(0.0);
        let i = id.index();
        if self.has.get(i) != has || self.beyond.get(i) != beyond {
            self.generation += 1;
            self.moved(id);
        }
        self.has.set(i, has);
        self.beyond.set(i, beyond);
    }

    /// The requester's demands, highest band first, as (priority,
    /// subclients, wants).
    pub fn demands(&self, id: RequesterId) -> Vec<(i64, f64, f64)> {
        self.slot(id)
            .map(|s| {
                s.placement
                    .as_slice()
                    .iter()
                    .map(|&(p, n)| {
                        let (w, sc) = self.forest.demand(n);
                        (p, sc, w)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Σ wants of the requester over its bands.
    pub fn wants(&self, id: RequesterId) -> f64 {
        self.slot(id)
            .map(|s| {
                s.placement
                    .as_slice()
                    .iter()
                    .map(|&(_, n)| self.forest.demand(n).0)
                    .sum()
            })
            .unwrap_or(0.0)
    }

    /// What the algorithm would give the requester if nothing were leased to
    /// anyone: its steady-state share.
    pub fn target(&mut self, id: RequesterId) -> f64 {
        self.refresh_rules();
        self.target_cached(id)
    }

    /// Decides and records the requester's new grant.
    ///
    /// NO_ALGORITHM and STATIC grant the target. PROPORTIONAL_SHARE and
    /// FAIR_SHARE grant `min(target, max(0, capacity − Σ has of the others))`:
    /// capacity still leased to someone else is never handed out, so the sum
    /// of all grants stays within capacity and a newcomer may have to wait
    /// until others refresh and shrink.
    pub fn decide(&mut self, id: RequesterId) -> f64 {
        if self.slot(id).is_none() {
            return 0.0;
        }
        let grant = self.would_get(id);
        self.put_has(id, grant);
        if !self.settled(id) {
            // Short of its target (or above it): a pass looks at it.
            self.moved(id);
        }
        grant
    }

    /// What [`Shares::decide`] would grant the requester now, recording
    /// nothing (a server pushing grants asks this of each holder).
    pub fn would_get(&mut self, id: RequesterId) -> f64 {
        if self.slot(id).is_none() {
            return 0.0;
        }
        let target = self.target(id);
        if self.kind.is_share() {
            // What it holds now is its own to keep, up to its target, even
            // when the others hold more than is free (the capacity shrank
            // and they have not refreshed yet): a decision never raises Σ
            // above what it was, and the requesters that refresh first are
            // not squeezed below their targets while the rest catch up.
            target.min(self.free_for(id).max(self.has(id)))
        } else {
            target
        }
    }

    /// The capacity not held by the other requesters.
    pub fn free_for(&self, id: RequesterId) -> f64 {
        self.free_within(id, self.capacity)
    }

    /// `bound` less what the other requesters hold, or still have handed
    /// out below them beyond it (see [`Shares::set_outstanding`]), at
    /// least 0.
    fn free_within(&self, id: RequesterId, bound: f64) -> f64 {
        let others = (self.taken_total() - self.taken(id)).max(0.0);
        (bound - others).max(0.0)
    }

    /// The live requesters.
    pub fn ids(&self) -> impl Iterator<Item = RequesterId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| RequesterId(i as u32))
    }
}

#[cfg(test)]
mod tests;
