//! The lazy deadline indexes of one resource (expiry: when a record may be
//! forgotten; absence: when a requester counts as absent). One rule for
//! both: each record holds one key in the index, at or before its
//! deadline. A renewal leaves a key that is not yet due where it was (a
//! remove and an insert at random places in a B-tree cost a cache miss or
//! more each); when the key comes up it is re-filed at the record's
//! deadline if that has moved on, and otherwise the deadline has come.
//!
//! Must not: decide what happens at a deadline (the callers do).

use std::collections::BTreeSet;

use doorman_algorithms::{RequesterId, Shares};
use doorman_lease::Time;

use super::record::Record;

/// Keys of each index handled by one `Resource::expire` at most.
pub const KEYS_PER_CALL: usize = 512;

/// A deadline index: (time, requester), earliest first.
pub(super) type Deadlines = BTreeSet<(Time, RequesterId)>;

/// Whether the first key of `index` is due at `now`.
pub(super) fn is_due(index: &Deadlines, now: Time) -> bool {
    index.first().is_some_and(|k| k.0 <= now)
}

/// At a renewal of record `id`, whose key in `index` is `*key`
/// (`Time::ZERO`: none) and whose deadline is now `deadline`: a key that
/// is not yet due and not later than the deadline stays where it is; any
/// other (none; due, e.g. a new record's, or one that came up in learning
/// mode, which re-files nothing; later than the deadline, e.g. a reload
/// shortened the lease) is re-filed at the deadline.
pub(super) fn refile(
    index: &mut Deadlines,
    key: &mut Time,
    id: RequesterId,
    deadline: Time,
    now: Time,
) {
    if *key > now && *key <= deadline {
        return;
    }
    index.remove(&(*key, id));
    index.insert((deadline, id));
    *key = deadline;
}

/// Takes the keys of `index` due at `now`, in order, at most
/// [`KEYS_PER_CALL`]: a key that is not its record's any more (`key_of`:
/// the record was removed, or its slot taken by a new requester) is
/// dropped; one whose record's `deadline` has moved later is re-filed there
/// (and comes up again in order if that has passed too); for the others
/// the deadline has come, and `act` is called with the record's id. If
/// `act` returns a time, the record keeps a key there (its next deadline).
pub(super) fn for_due(
    index: &mut Deadlines,
    shares: &mut Shares<Record>,
    now: Time,
    key_of: fn(&mut Record) -> &mut Time,
    deadline: impl Fn(&Record) -> Time,
    mut act: impl FnMut(&mut Shares<Record>, RequesterId) -> Option<Time>,
) {
    for _ in 0..KEYS_PER_CALL {
        let Some((key, id)) = is_due(index, now).then(|| index.pop_first()).flatten() else {
            break;
        };
        let Some(rec) = shares.get_mut(id) else {
            continue;
        };
        if *key_of(rec) != key {
            continue;
        }
        let at = deadline(rec);
        if at > key {
            *key_of(rec) = at;
            index.insert((at, id));
        } else if let Some(next) = act(shares, id) {
            if let Some(rec) = shares.get_mut(id) {
                *key_of(rec) = next;
                index.insert((next, id));
            }
        }
    }
}
