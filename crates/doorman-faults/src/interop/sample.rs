//! The mixed trees' invariant, sampled every 100 ms: Σ of unexpired grants
//! at each server within its capacity, with one allowance: below a parent
//! that ignores `outstanding` (the original root), a lowered grant's
//! difference goes to others at once while the clients below keep their
//! larger leases until they next ask ([`Lowering`]); and each side's mean
//! share at the root after a warm-up (FAIR_SHARE gives each half).
//!
//! Must not: start or stop anything but the one action it is given.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::tree::Tree;
use super::views::{self, View};
use super::Checks;
use crate::clock::mono;

/// Samples before this many seconds do not count for the shares.
pub const WARM_UP_S: f64 = 20.0;
/// Each side's mean share within this fraction of 50.
pub const TOLERANCE: f64 = 0.10;
/// How long a server below a parent that lowered its grant may hold more
/// than its new grant: its clients learn the lower amount at their next
/// refresh, at most the refresh interval it hands out (the root's 5 s ×
/// the decay factor 0.5, rounded down: 2 s), plus 1 s for the request and
/// the sampling.
pub const GRACE_S: f64 = 3.0;
const EPS: f64 = 1e-6;

/// A server whose page is read.
#[derive(Debug, Clone, Copy)]
pub enum Page {
    /// Ours, at its HTTP address.
    Ours(SocketAddr),
    /// The original's, at its debug address.
    Original(SocketAddr),
}

/// One server watched: its page, and the capacity it must keep to (`None`:
/// what it holds from its parent, lowerings allowed).
pub struct Watched {
    /// How it is named in the output.
    pub name: &'static str,
    /// Where it is read.
    pub page: Page,
    /// Its fixed capacity, if it is the root.
    pub fixed: Option<f64>,
}

/// What a side holds at the root, from the root's leases.
pub type Side = (&'static str, Box<dyn Fn(&BTreeMap<String, f64>) -> f64>);

/// Whether a view's Σ above its capacity is a parent's lowering still
/// reaching the clients: the capacity dropped at most [`GRACE_S`] ago,
/// what was held when the drop was seen was within the capacity before
/// it, and no holder has more than it had then.
#[derive(Debug, Default)]
pub struct Lowering {
    capacity: Option<f64>,
    until: f64,
    held: BTreeMap<String, f64>,
    within: bool,
    /// Each drop: (at s, from, to, Σ held).
    pub drops: Vec<(f64, f64, f64, f64)>,
    excused: usize,
    whole: Vec<f64>,
}

impl Lowering {
    fn see(&mut self, t: f64, capacity: f64, leases: &BTreeMap<String, f64>) {
        let total: f64 = leases.values().sum();
        if let Some(before) = self.capacity.filter(|c| capacity < c - EPS) {
            self.until = t + GRACE_S;
            self.held = leases.clone();
            self.within = total <= before + EPS;
            self.drops
                .push(((t * 10.0).round() / 10.0, before, capacity, total));
        }
        self.capacity = Some(capacity);
    }

    fn excuses(&self, t: f64, leases: &BTreeMap<String, f64>) -> bool {
        let grew = |(k, v): (&String, &f64)| *v > self.held.get(k).copied().unwrap_or(0.0) + EPS;
        t <= self.until && self.within && !leases.iter().any(grew)
    }
}

/// What a sampling found.
#[derive(Default)]
pub struct Sampled {
    /// Every reading over its capacity, unexcused.
    pub over: Vec<String>,
    /// How many samples were taken.
    pub samples: usize,
    /// Each side's holding at the root, after the warm-up.
    pub shares: BTreeMap<&'static str, Vec<f64>>,
    /// Each watched server's lowerings.
    pub lowering: BTreeMap<&'static str, Lowering>,
}

/// The whole tree's check: the watched server below the root, and what
/// the root's other holders hold.
pub type Whole = (&'static str, Box<dyn Fn(&BTreeMap<String, f64>) -> f64>);

/// An action run once, that far into the sampling.
pub type At<'t, 'a> = (
    f64,
    Box<dyn FnOnce(&mut Tree<'a>) -> anyhow::Result<()> + 't>,
);

/// Samples `watched` every 100 ms for `seconds` (the root first), runs
/// `at`, and checks the whole tree against the root's capacity if asked.
pub async fn sample<'a>(
    tree: &mut Tree<'a>,
    seconds: f64,
    watched: &[Watched],
    sides: &[Side],
    mut at: Option<At<'_, 'a>>,
    whole: Option<Whole>,
) -> anyhow::Result<Sampled> {
    let mut s = Sampled::default();
    for w in watched {
        s.lowering.insert(w.name, Lowering::default());
    }
    for (side, _) in sides {
        s.shares.insert(side, Vec::new());
    }
    let start = mono();
    while mono() - start < seconds {
        let t0 = mono();
        let t = t0 - start;
        if at.as_ref().is_some_and(|(when, _)| t >= *when) {
            let (_, action) = at.take().expect("checked");
            action(tree)?;
        }
        let mut readings = BTreeMap::new();
        for w in watched {
            readings.insert(w.name, read(tree, w.page).await);
        }
        for w in watched {
            if let Some(view) = &readings[w.name] {
                s.see(t, w, view, sides);
            }
        }
        if let Some((below, others)) = &whole {
            s.whole(t, watched, &readings, below, others);
        }
        s.samples += 1;
        let left = 0.1 - (mono() - t0);
        tokio::time::sleep(Duration::from_secs_f64(left.max(0.0))).await;
    }
    Ok(s)
}

async fn read(tree: &Tree<'_>, page: Page) -> Option<View> {
    match page {
        Page::Ours(a) => views::ours(&tree.http, a, "res").await,
        Page::Original(a) => {
            let now = std::time::SystemTime::UNIX_EPOCH
                .elapsed()
                .ok()?
                .as_secs_f64();
            views::original(&tree.http, a, "res", now).await
        }
    }
}

impl Sampled {
    fn see(&mut self, t: f64, w: &Watched, (capacity, leases): &View, sides: &[Side]) {
        let total: f64 = leases.values().sum();
        let low = self.lowering.get_mut(w.name).expect("every watched server");
        low.see(t, *capacity, leases);
        let limit = w.fixed.unwrap_or(*capacity);
        if total > limit + EPS && w.fixed.is_none() && low.excuses(t, leases) {
            low.excused += 1;
        } else if total > limit + EPS {
            let name = w.name;
            self.over.push(format!(
                "{name} at +{t:.1} s: Σ {total} > {limit} {leases:?}"
            ));
        }
        if w.fixed.is_some() && t >= WARM_UP_S {
            for (side, of) in sides {
                self.shares.entry(side).or_default().push(of(leases));
            }
        }
    }

    fn whole(
        &mut self,
        t: f64,
        watched: &[Watched],
        readings: &BTreeMap<&'static str, Option<View>>,
        below: &'static str,
        others: &dyn Fn(&BTreeMap<String, f64>) -> f64,
    ) {
        let root = &watched[0];
        let (Some(Some(root_view)), Some(Some((below_cap, below_leases)))) =
            (readings.get(root.name), readings.get(below))
        else {
            return;
        };
        let capacity = root.fixed.unwrap_or(root_view.0);
        let below_held: f64 = below_leases.values().sum();
        let held = others(&root_view.1) + below_held;
        // A root true to its own books leaves the tree over by no more
        // than the lowered server holds above its grant.
        let slack = (below_held - below_cap).max(0.0);
        let low = self.lowering.get_mut(below).expect("watched");
        if held > capacity + EPS && t <= low.until && held <= capacity + slack + EPS {
            low.whole.push(held);
        } else if held > capacity + EPS {
            self.over.push(format!(
                "the whole tree at +{t:.1} s: Σ held {held} > {capacity}"
            ));
        }
    }
}

/// The checks of one sampling, printed with the lowerings seen.
pub fn judge(checks: &mut Checks, label: &str, s: &Sampled) {
    checks.check(
        &format!(
            "{label}: Σ of unexpired grants within capacity at every one of {} samples \
             (100 ms; below a parent that lowered a grant, within {GRACE_S} s and no lease growing)",
            s.samples
        ),
        s.over.is_empty() && s.samples > 0,
        &s.over.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
    );
    for (name, low) in &s.lowering {
        if !low.drops.is_empty() {
            println!(
                "   {name}: capacity lowered (at +s, from, to, Σ held): {:?}; Σ above it at {} samples after that",
                low.drops, low.excused
            );
        }
        if let Some(most) = low.whole.iter().copied().reduce(f64::max) {
            let n = low.whole.len();
            println!("   the whole tree: above its capacity at {n} samples (100 ms) after that, at most {most}");
        }
    }
    for (side, values) in &s.shares {
        let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
        checks.check(
            &format!(
                "{label}: {side} holds {mean:.1} of 100 at the root on average after {WARM_UP_S} s \
                 (FAIR_SHARE: 50 ± {:.0}%)",
                TOLERANCE * 100.0
            ),
            (mean - 50.0).abs() <= 50.0 * TOLERANCE,
            &format!("{} samples", values.len()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leases(v: &[(&str, f64)]) -> BTreeMap<String, f64> {
        v.iter().map(|(k, x)| (k.to_string(), *x)).collect()
    }

    #[test]
    fn a_lowering_excuses_only_its_window_and_no_lease_that_grows() {
        let mut low = Lowering::default();
        let before = leases(&[("a", 80.0), ("b", 20.0)]);
        low.see(5.0, 100.0, &before);
        low.see(6.0, 50.0, &before);
        assert_eq!(low.drops, vec![(6.0, 100.0, 50.0, 100.0)]);
        assert!(low.excuses(6.0 + GRACE_S, &before), "within the window");
        assert!(!low.excuses(6.1 + GRACE_S, &before), "after it");
        let grown = leases(&[("a", 80.0), ("b", 30.0)]);
        assert!(!low.excuses(6.5, &grown), "a lease that grew");
        let mut over = Lowering::default();
        over.see(5.0, 100.0, &leases(&[("a", 120.0)]));
        over.see(6.0, 50.0, &leases(&[("a", 120.0)]));
        assert!(
            !over.excuses(6.5, &leases(&[("a", 120.0)])),
            "over before the drop"
        );
    }

    #[test]
    fn the_root_over_its_fixed_capacity_is_never_excused() {
        let mut s = Sampled::default();
        let root = Watched {
            name: "root",
            page: Page::Ours(([127, 0, 0, 1], 1).into()),
            fixed: Some(100.0),
        };
        s.lowering.insert("root", Lowering::default());
        s.see(
            1.0,
            &root,
            &(200.0, leases(&[("a", 60.0), ("b", 50.0)])),
            &[],
        );
        assert_eq!(s.over.len(), 1, "{:?}", s.over);
        s.see(
            1.1,
            &root,
            &(100.0, leases(&[("a", 50.0), ("b", 50.0)])),
            &[],
        );
        assert_eq!(s.over.len(), 1, "{:?}", s.over);
    }
}
