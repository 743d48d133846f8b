//! The requester index of one resource: who → `RequesterId`, storing only
//! the 4-byte id per entry. The key itself lives once, in the lease record
//! (`Record::who`), and the table hashes it from there; a `HashMap<Who, _>`
//! would store every client id a second time (≈ 60 bytes per lease at 1 M
//! leases, bucket slack included).
//!
//! Must not: own requester data (`Shares` does) or change grants.

use std::hash::BuildHasher;

use doorman_algorithms::{RequesterId, Shares};
use hashbrown::HashTable;

use super::record::Record;
use super::request::Who;

#[derive(Debug, Default)]
pub(crate) struct Index {
    table: HashTable<RequesterId>,
    hasher: std::hash::RandomState,
}

impl Index {
    fn hash(&self, who: &Who) -> u64 {
        self.hasher.hash_one(who)
    }

    /// The requester's id.
    pub fn get(&self, shares: &Shares<Record>, who: &Who) -> Option<RequesterId> {
        self.table
            .find(self.hash(who), |id| {
                shares.get(*id).is_some_and(|r| r.who == *who)
            })
            .copied()
    }

    /// Adds a requester whose record (with `who`) is already in `shares`.
    pub fn insert(&mut self, shares: &Shares<Record>, who: &Who, id: RequesterId) {
        let hasher = &self.hasher;
        self.table.insert_unique(self.hash(who), id, |id| {
            shares.get(*id).map_or(0, |r| hasher.hash_one(&r.who))
        });
    }

    /// Removes `id`, which is indexed under `who`. Call before removing the
    /// record from `shares`.
    pub fn remove(&mut self, who: &Who, id: RequesterId) -> bool {
        match self.table.find_entry(self.hash(who), |x| *x == id) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }
}
