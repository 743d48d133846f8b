//! Running sums over a resource's downstream servers: what they claim and
//! what they count for (`open_share.rs` bounds the one by the other), kept
//! as records come, change and go, so no decision walks the requesters.
//!
//! Must not: decide a bound (`open_share.rs` does).

use doorman_algorithms::{RequesterId, Shares};

use super::record::Record;

/// What a resource's downstream servers claim and count for, in all.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ServerCounts {
    /// Σ of what they claim (each up to `max_clients_per_server`).
    claimed: u64,
    /// Σ of what they count for (bounded).
    counted: u64,
}

impl ServerCounts {
    /// (Σ claimed, Σ counted).
    pub fn sums(&self) -> (u64, u64) {
        (self.claimed, self.counted)
    }

    /// A requester that claimed and counted for `before` now claims and
    /// counts for `now`.
    pub fn replace(&mut self, before: (u64, u64), now: (u64, u64)) {
        self.claimed = self.claimed - before.0.min(self.claimed) + now.0;
        self.counted = self.counted - before.1.min(self.counted) + now.1;
    }

    /// Requester `id`, about to be removed, no longer counts.
    pub fn forget(&mut self, shares: &Shares<Record>, id: RequesterId) {
        let Some(rec) = shares.get(id) else {
            return;
        };
        self.replace((u64::from(rec.claimed), counted(shares, id)), (0, 0));
    }
}

/// Σ subclients `id` counts for now.
pub(crate) fn counted(shares: &Shares<Record>, id: RequesterId) -> u64 {
    shares.demands(id).iter().map(|d| d.1 as u64).sum()
}
