//! A segment tree of `f64` values indexed by requester slot, giving the total
//! in O(1) and updates in O(log n). Sums are recomputed from the leaves up
//! the changed path, so the total never drifts the way a running
//! `total += new - old` does after millions of updates.
//!
//! Must not: know what the values mean.

#[derive(Debug, Clone, Default)]
pub(crate) struct SumTree {
    /// Number of leaves (a power of two, or 0).
    leaves: usize,
    /// `tree[1]` is the root; leaf `i` lives at `leaves + i`.
    tree: Vec<f64>,
}

impl SumTree {
    pub fn total(&self) -> f64 {
        self.tree.get(1).copied().unwrap_or(0.0)
    }

    pub fn get(&self, i: usize) -> f64 {
        if i < self.leaves {
            self.tree[self.leaves + i]
        } else {
            0.0
        }
    }

    pub fn set(&mut self, i: usize, value: f64) {
        if i >= self.leaves {
            if value == 0.0 {
                return;
            }
            self.grow(i + 1);
        }
        let mut p = self.leaves + i;
        self.tree[p] = value;
        while p > 1 {
            p /= 2;
            self.tree[p] = self.tree[2 * p] + self.tree[2 * p + 1];
        }
    }

    fn grow(&mut self, need: usize) {
        let leaves = need.next_power_of_two().max(16);
        let mut tree = vec![0.0; 2 * leaves];
        if self.leaves > 0 {
            tree[leaves..leaves + self.leaves]
                .copy_from_slice(&self.tree[self.leaves..2 * self.leaves]);
        }
        for p in (1..leaves).rev() {
            tree[p] = tree[2 * p] + tree[2 * p + 1];
        }
        self.leaves = leaves;
        self.tree = tree;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_tracks_sets_and_growth() {
        let mut t = SumTree::default();
        assert_eq!(t.total(), 0.0);
        for i in 0..100 {
            t.set(i, i as f64);
        }
        assert_eq!(t.total(), 4950.0);
        t.set(50, 0.0);
        assert_eq!(t.total(), 4900.0);
        assert_eq!(t.get(49), 49.0);
        assert_eq!(t.get(1000), 0.0);
    }

    #[test]
    fn no_drift_after_many_updates() {
        let mut t = SumTree::default();
        for round in 0..10_000u32 {
            t.set((round % 7) as usize, 0.1 * f64::from(round % 13));
        }
        let exact: f64 = (0..7).map(|i| t.get(i)).sum();
        assert!((t.total() - exact).abs() < 1e-12);
    }
}
