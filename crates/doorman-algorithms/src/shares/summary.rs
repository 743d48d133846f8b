//! What a resource's shares add up to: the totals, each band's figures,
//! and the safe capacity derived from them (status pages, metrics, the
//! fallback a client uses without a lease).
//!
//! Must not: change anything but the cached band rules.

use std::cmp::Reverse;

use super::{BandSummary, Shares, Totals};
use crate::kind::Kind;

impl<T> Shares<T> {
    /// Safe capacity: the configured value if any, else capacity / Σ
    /// subclients (capacity itself when there are none).
    pub fn safe_capacity(&self, configured: Option<f64>) -> f64 {
        configured.unwrap_or_else(|| {
            let sub = self.totals().subclients;
            if sub >= 1.0 {
                self.capacity / sub
            } else {
                self.capacity
            }
        })
    }

    /// Aggregates over the whole resource: O(bands).
    pub fn totals(&self) -> Totals {
        let mut t = Totals {
            has: self.has.total(),
            taken: self.taken_total(),
            requesters: self.live,
            ..Totals::default()
        };
        for band in self.bands.values() {
            let s = self.forest.sums(band.root);
            t.wants += s.wants;
            t.subclients += s.subclients;
        }
        t
    }

    /// Per-band aggregates, highest priority first: O(bands).
    pub fn bands(&mut self) -> Vec<BandSummary> {
        self.refresh_rules();
        self.bands
            .iter()
            .map(|(Reverse(p), b)| {
                let s = self.forest.sums(b.root);
                let allotted = match self.kind {
                    Kind::NoAlgorithm => s.wants,
                    Kind::Static => f64::NAN, // per-client cap: not a band figure
                    _ => s.wants.min(b.share),
                };
                BandSummary {
                    priority: *p,
                    demands: b.demands,
                    subclients: s.subclients,
                    wants: s.wants,
                    allotted,
                }
            })
            .collect()
    }
}
