//! An arena of augmented treaps holding demands ordered by their ratio
//! `wants / subclients`, with subtree sums of wants and subclients.
//!
//! One arena (`Forest`) serves every priority band of a resource; each band
//! owns one root. The sums let the share algorithms find the fair-share water
//! level and the proportional-share threshold in O(log n). Subtree sums are
//! recomputed from the children on every change (never updated by adding and
//! subtracting deltas), so they cannot drift however many updates happen.
//!
//! Must not: know about requesters, bands or capacity semantics.

/// Index of a node in the arena.
pub(crate) type NodeId = u32;
pub(crate) const NIL: NodeId = NodeId::MAX;

/// 48 bytes: subclients are whole numbers (≤ u32::MAX, see `Demand`), so
/// the node keeps them as u32 and only the subtree sum as f64.
#[derive(Debug, Clone)]
struct Node {
    ratio: f64,
    wants: f64,
    sum_wants: f64,
    sum_subclients: f64,
    subclients: u32,
    left: NodeId,
    right: NodeId,
    prio: u32,
}

/// Sums over a set of demands.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sums {
    pub wants: f64,
    pub subclients: f64,
}

/// The arena. Roots are held by the caller (one per band).
#[derive(Debug, Clone, Default)]
pub(crate) struct Forest {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    seed: u64,
}

fn splitmix(x: &mut u64) -> u32 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u32
}

impl Forest {
    /// Wants and subclients of one node.
    pub fn demand(&self, id: NodeId) -> (f64, f64) {
        let n = &self.nodes[id as usize];
        (n.wants, f64::from(n.subclients))
    }

    /// Ratio of one node.
    #[cfg(test)]
    pub fn ratio(&self, id: NodeId) -> f64 {
        self.nodes[id as usize].ratio
    }

    /// Sums over a whole tree.
    pub fn sums(&self, root: NodeId) -> Sums {
        if root == NIL {
            return Sums::default();
        }
        let n = &self.nodes[root as usize];
        Sums {
            wants: n.sum_wants,
            subclients: n.sum_subclients,
        }
    }

    /// Number of live nodes in the arena.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    fn less(&self, a: NodeId, b: NodeId) -> bool {
        let (na, nb) = (&self.nodes[a as usize], &self.nodes[b as usize]);
        match na.ratio.total_cmp(&nb.ratio) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => a < b,
        }
    }

    fn pull(&mut self, id: NodeId) {
        let (l, r) = {
            let n = &self.nodes[id as usize];
            (n.left, n.right)
        };
        let ls = self.sums(l);
        let rs = self.sums(r);
        let n = &mut self.nodes[id as usize];
        n.sum_wants = ls.wants + n.wants + rs.wants;
        n.sum_subclients = ls.subclients + f64::from(n.subclients) + rs.subclients;
    }

    fn alloc(&mut self, wants: f64, subclients: u32) -> NodeId {
        let prio = splitmix(&mut self.seed);
        let node = Node {
            ratio: wants / f64::from(subclients),
            wants,
            subclients,
            sum_wants: wants,
            sum_subclients: f64::from(subclients),
            left: NIL,
            right: NIL,
            prio,
        };
        if let Some(id) = self.free.pop() {
            self.nodes[id as usize] = node;
            id
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as NodeId
        }
    }

    /// Splits `t` into (nodes ordered before `key`, the rest).
    fn split(&mut self, t: NodeId, key: NodeId) -> (NodeId, NodeId) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.less(t, key) {
            let r = self.nodes[t as usize].right;
            let (a, b) = self.split(r, key);
            self.nodes[t as usize].right = a;
            self.pull(t);
            (t, b)
        } else {
            let l = self.nodes[t as usize].left;
            let (a, b) = self.split(l, key);
            self.nodes[t as usize].left = b;
            self.pull(t);
            (a, t)
        }
    }

    fn merge(&mut self, a: NodeId, b: NodeId) -> NodeId {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio >= self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.pull(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.pull(b);
            b
        }
    }

    /// Inserts a demand into the tree rooted at `*root`; returns its node.
    pub fn insert(&mut self, root: &mut NodeId, wants: f64, subclients: u32) -> NodeId {
        let id = self.alloc(wants, subclients);
        *root = self.insert_node(*root, id);
        id
    }

    fn insert_node(&mut self, t: NodeId, id: NodeId) -> NodeId {
        if t == NIL {
            return id;
        }
        if self.nodes[id as usize].prio > self.nodes[t as usize].prio {
            let (l, r) = self.split(t, id);
            let n = &mut self.nodes[id as usize];
            n.left = l;
            n.right = r;
            self.pull(id);
            return id;
        }
        self.descend(t, id, Self::insert_node)
    }

    /// Applies `f` to the subtree of `t` on `id`'s side, re-links the
    /// result as that child and updates `t`'s sums; returns `t`.
    fn descend(
        &mut self,
        t: NodeId,
        id: NodeId,
        f: fn(&mut Self, NodeId, NodeId) -> NodeId,
    ) -> NodeId {
        let left = self.less(id, t);
        let child = if left {
            self.nodes[t as usize].left
        } else {
            self.nodes[t as usize].right
        };
        let new = f(self, child, id);
        if left {
            self.nodes[t as usize].left = new;
        } else {
            self.nodes[t as usize].right = new;
        }
        self.pull(t);
        t
    }

    /// Detaches node `id` from the tree rooted at `t`; returns the new root.
    fn detach(&mut self, t: NodeId, id: NodeId) -> NodeId {
        if t == NIL {
            return NIL; // not found: cannot happen for a live node of this tree
        }
        if t == id {
            let (l, r) = {
                let n = &self.nodes[t as usize];
                (n.left, n.right)
            };
            return self.merge(l, r);
        }
        self.descend(t, id, Self::detach)
    }

    /// Removes node `id` from the tree rooted at `*root` and frees it.
    pub fn remove(&mut self, root: &mut NodeId, id: NodeId) {
        *root = self.detach(*root, id);
        self.free.push(id);
    }

    /// Changes a node's demand in place (re-keys it); the id stays valid.
    /// Returns false when nothing changed.
    pub fn update(&mut self, root: &mut NodeId, id: NodeId, wants: f64, subclients: u32) -> bool {
        let n = &self.nodes[id as usize];
        if n.wants == wants && n.subclients == subclients {
            return false;
        }
        *root = self.detach(*root, id);
        let n = &mut self.nodes[id as usize];
        n.wants = wants;
        n.subclients = subclients;
        n.ratio = wants / f64::from(subclients);
        n.sum_wants = wants;
        n.sum_subclients = f64::from(subclients);
        n.left = NIL;
        n.right = NIL;
        *root = self.insert_node(*root, id);
        true
    }

    /// Sums over the demands whose ratio is `<= threshold`.
    pub fn sums_at_or_below(&self, root: NodeId, threshold: f64) -> Sums {
        let mut acc = Sums::default();
        let mut t = root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if n.ratio <= threshold {
                let ls = self.sums(n.left);
                acc.wants += ls.wants + n.wants;
                acc.subclients += ls.subclients + f64::from(n.subclients);
                t = n.right;
            } else {
                t = n.left;
            }
        }
        acc
    }

    /// The weighted max-min water level `L` at which
    /// `Σ min(wants, L·subclients) = cap`, or `None` when `Σ wants <= cap`
    /// (everyone can have what they want).
    pub fn water_level(&self, root: NodeId, cap: f64) -> Option<f64> {
        let total = self.sums(root);
        if total.wants <= cap {
            return None;
        }
        // In ratio order, g(i) = W_before(i) + r_i · S_from(i) is
        // non-decreasing; find the first node with g(i) > cap. The level lies
        // between the previous ratio and r_i.
        let mut found = Sums::default();
        let mut acc = Sums::default();
        let mut t = root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let ls = self.sums(n.left);
            let before = Sums {
                wants: acc.wants + ls.wants,
                subclients: acc.subclients + ls.subclients,
            };
            let g = before.wants + n.ratio * (total.subclients - before.subclients);
            if g > cap {
                found = before;
                t = n.left;
            } else {
                acc = Sums {
                    wants: before.wants + n.wants,
                    subclients: before.subclients + f64::from(n.subclients),
                };
                t = n.right;
            }
        }
        let rest = total.subclients - found.subclients;
        if rest <= 0.0 {
            return Some(0.0);
        }
        Some(((cap - found.wants) / rest).max(0.0))
    }

    /// Visits the nodes of a tree in ratio order.
    #[cfg(test)]
    pub fn in_order(&self, root: NodeId, out: &mut Vec<NodeId>) {
        if root == NIL {
            return;
        }
        let n = &self.nodes[root as usize];
        self.in_order(n.left, out);
        out.push(root);
        self.in_order(n.right, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_level(d: &[(f64, f64)], cap: f64) -> Option<f64> {
        let total: f64 = d.iter().map(|x| x.0).sum();
        if total <= cap {
            return None;
        }
        let mut v: Vec<_> = d.to_vec();
        v.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        let mut left = cap;
        let mut s: f64 = v.iter().map(|x| x.1).sum();
        for (w, sc) in v {
            let l = left / s;
            if w / sc > l {
                return Some(l);
            }
            left -= w;
            s -= sc;
        }
        unreachable!()
    }

    #[test]
    fn water_level_matches_naive() {
        let mut f = Forest::default();
        let mut root = NIL;
        let d = [(1000.0, 1.0), (50.0, 1.0), (10.0, 1.0)];
        for (w, _) in d {
            f.insert(&mut root, w, 1);
        }
        assert_eq!(f.water_level(root, 120.0), Some(60.0));
        assert_eq!(naive_level(&d, 120.0), Some(60.0));
        assert_eq!(f.water_level(root, 2000.0), None);
    }

    #[test]
    fn order_and_sums_survive_updates_and_removals() {
        let mut f = Forest::default();
        let mut root = NIL;
        let mut ids = vec![];
        for i in 0..200 {
            ids.push(f.insert(&mut root, ((i * 37) % 101) as f64, 1 + i % 3));
        }
        for (k, id) in ids.iter().enumerate().step_by(3) {
            f.update(&mut root, *id, (k % 17) as f64, 2);
        }
        for id in ids.iter().skip(1).step_by(5) {
            f.remove(&mut root, *id);
        }
        let mut order = vec![];
        f.in_order(root, &mut order);
        assert_eq!(order.len(), f.len());
        for w in order.windows(2) {
            assert!(f.ratio(w[0]) <= f.ratio(w[1]));
        }
        let (sw, ss) = order.iter().fold((0.0, 0.0), |(a, b), id| {
            let (w, s) = f.demand(*id);
            (a + w, b + s)
        });
        let sums = f.sums(root);
        assert!((sums.wants - sw).abs() < 1e-9);
        assert!((sums.subclients - ss).abs() < 1e-9);
    }
}

#[cfg(test)]
#[test]
fn node_is_48_bytes() {
    assert_eq!(std::mem::size_of::<Node>(), 48);
}
