//! When what someone would get may have moved: the generation of a
//! resource's shares, bumped by every change that can move a grant and by
//! nothing else, so a server pushing grants looks at a resource only when
//! it has moved.
//!
//! Must not: bump for a change that moves nothing (a renewal as it was).

use super::Shares;

impl<T> Shares<T> {
    /// A change of demands, kind or capacity: the cached rules are stale,
    /// and what anyone would get may have moved.
    pub(super) fn invalidate(&mut self) {
        self.rules_valid = false;
        self.generation += 1;
    }

    /// A number that changes whenever what some requester would get may
    /// have changed (a demand, a grant, what is counted beyond a grant,
    /// the capacity or the algorithm; a requester added or removed), and
    /// only then: a renewal that leaves all of them as they were leaves
    /// it too. A server pushing grants skips a resource whose generation
    /// it has seen.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}
