//! The priority bands of one [`Shares`]: where each requester's demands
//! sit (one treap per band), and each band's rule (the FAIR_SHARE water
//! level or the PROPORTIONAL_SHARE factor), recomputed highest band first
//! only after a change.
//!
//! Must not: record grants (that is [`Shares::decide`]).

use std::cmp::Reverse;

use super::{RequesterId, Shares};
use crate::kind::Kind;
use crate::tree::{NodeId, NIL};
use doorman_lease::Demand;

/// How a band's capacity is divided, computed once per change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rule {
    /// Everyone in the band gets what they want.
    All,
    /// FAIR_SHARE: `min(wants, level · subclients)`.
    Fair { level: f64 },
    /// PROPORTIONAL_SHARE: equal share `e` per subclient plus `factor` of the
    /// extra need.
    Proportional { e: f64, factor: f64 },
}

impl Rule {
    fn apply(self, wants: f64, subclients: f64) -> f64 {
        match self {
            Rule::All => wants,
            Rule::Fair { level } => wants.min(level * subclients),
            Rule::Proportional { e, factor } => {
                if wants / subclients <= e {
                    wants
                } else {
                    let fair = e * subclients;
                    (fair + (wants - fair) * factor).min(wants)
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Band {
    pub root: NodeId,
    pub rule: Rule,
    /// What the bands above left for this one (set with `rule`).
    pub share: f64,
    /// Number of demands in the band.
    pub demands: usize,
}

/// The bands a requester has demands in: nearly always exactly one.
#[derive(Debug, Clone)]
pub(super) enum Placement {
    One([(i64, NodeId); 1]),
    Many(Box<[(i64, NodeId)]>),
}

impl Placement {
    pub(super) fn as_slice(&self) -> &[(i64, NodeId)] {
        match self {
            Placement::One(one) => one,
            Placement::Many(many) => many,
        }
    }
}

impl<T> Shares<T> {
    pub(super) fn target_cached(&self, id: RequesterId) -> f64 {
        let Some(slot) = self.slot(id) else {
            return 0.0;
        };
        let mut t = 0.0;
        for &(priority, node) in slot.placement.as_slice() {
            let (w, sc) = self.forest.demand(node);
            t += match self.kind {
                Kind::NoAlgorithm => w,
                Kind::Static => w.min(self.capacity * sc),
                Kind::ProportionalShare | Kind::FairShare => self
                    .bands
                    .get(&Reverse(priority))
                    .map(|b| b.rule.apply(w, sc))
                    .unwrap_or(0.0),
            };
        }
        t
    }

    pub(super) fn place(&mut self, demands: &[Demand]) -> Placement {
        let merged = merge_bands(demands);
        let mut placed: Vec<(i64, NodeId)> = Vec::with_capacity(merged.len());
        for (priority, wants, sub) in merged {
            let band = self.bands.entry(Reverse(priority)).or_insert(Band {
                root: NIL,
                rule: Rule::All,
                share: 0.0,
                demands: 0,
            });
            let node = self.forest.insert(&mut band.root, wants, sub);
            band.demands += 1;
            placed.push((priority, node));
        }
        if placed.len() == 1 {
            Placement::One([placed[0]])
        } else {
            Placement::Many(placed.into_boxed_slice())
        }
    }

    pub(super) fn unplace(&mut self, priority: i64, node: NodeId) {
        if let Some(band) = self.bands.get_mut(&Reverse(priority)) {
            self.forest.remove(&mut band.root, node);
            band.demands -= 1;
            if band.demands == 0 {
                self.bands.remove(&Reverse(priority));
            }
        }
    }

    /// Recomputes each band's rule, highest band first: each band shares
    /// what the bands above it left.
    pub(super) fn refresh_rules(&mut self) {
        if self.rules_valid {
            return;
        }
        let mut remaining = self.capacity;
        let mut changed = false;
        for band in self.bands.values_mut() {
            let sums = self.forest.sums(band.root);
            band.share = remaining;
            let before = band.rule;
            band.rule = match self.kind {
                Kind::FairShare => match self.forest.water_level(band.root, remaining) {
                    None => Rule::All,
                    Some(level) => Rule::Fair { level },
                },
                Kind::ProportionalShare if sums.wants > remaining => {
                    let e = remaining / sums.subclients;
                    let under = self.forest.sums_at_or_below(band.root, e);
                    let left_over = (e * under.subclients - under.wants).max(0.0);
                    let extra =
                        (sums.wants - under.wants) - e * (sums.subclients - under.subclients);
                    let factor = if extra > 0.0 {
                        (left_over / extra).min(1.0)
                    } else {
                        1.0
                    };
                    Rule::Proportional { e, factor }
                }
                _ => Rule::All,
            };
            changed |= band.rule != before;
            remaining = (remaining - sums.wants.min(remaining)).max(0.0);
        }
        self.rules_valid = true;
        if changed {
            // Everyone's target in a band may have moved.
            self.all_moved();
        }
    }
}

/// Merges demands of the same band: (priority, Σ wants, Σ subclients),
/// highest priority first.
pub(super) fn merge_bands(demands: &[Demand]) -> Vec<(i64, f64, u32)> {
    let mut out: Vec<(i64, f64, u32)> = Vec::with_capacity(demands.len());
    for d in demands {
        match out.iter_mut().find(|x| x.0 == d.priority()) {
            Some(x) => {
                x.1 += d.wants();
                x.2 = x.2.saturating_add(d.subclients());
            }
            None => out.push((d.priority(), d.wants(), d.subclients())),
        }
    }
    out.sort_by_key(|x| std::cmp::Reverse(x.0));
    out
}
