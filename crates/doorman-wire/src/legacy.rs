//! How demand from a downstream server that is not doorman-rs (the
//! original Go Doorman's intermediate server) is read.
//!
//! The original intermediate sends one band per resource, always at
//! priority 1 whatever its clients asked for, with the number of its
//! clients and the sum of their wants, and never `has` (youtube/doorman
//! `go/server/doorman/server.go`: `defaultPriority = 1`, one
//! `PriorityBandAggregate`). Its priority carries no information, and the
//! original root ignores band priorities altogether (it sums wants and
//! clients over the bands). Taken at face value, band 1 would outrank the
//! priority-0 band where both the original Go client and ours put their
//! demand by default, and every client under an original intermediate
//! would be served before every client of ours.
//!
//! So: a GetServerCapacity entry without the `outstanding` field, which
//! every doorman-rs intermediate sends, comes from such a server; its bands
//! are merged into one demand at priority 0 (the clients' default), with
//! the summed clients and wants, as the original root would count them.
//! Entries with `outstanding` keep their bands as sent.
//!
//! Must not: touch entries from doorman-rs servers, or raise a demand.

use doorman_lease::Demand;

/// The band a legacy downstream server's demand is filed in.
pub const LEGACY_PRIORITY: i64 = 0;

/// `demands` as this server counts them; `ours` is true when the entry
/// carried `outstanding` (a doorman-rs downstream server).
pub fn demands(demands: Vec<Demand>, ours: bool) -> Vec<Demand> {
    if ours || demands.is_empty() {
        return demands;
    }
    let subclients: i64 = demands.iter().map(|d| i64::from(d.subclients())).sum();
    let wants: f64 = demands.iter().map(Demand::wants).sum();
    // Each part was validated, so with wants capped at the limit the
    // merged demand is valid (`Demand::new` clamps the client count).
    let wants = wants.min(doorman_core::limits::MAX_AMOUNT);
    match Demand::new(LEGACY_PRIORITY, subclients, wants) {
        Ok(d) => vec![d],
        Err(_) => demands,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_original_intermediates_band_is_filed_at_the_default_priority() {
        // What an original intermediate sends for 2 clients wanting 80 each.
        let sent = vec![Demand::new(1, 2, 160.0).unwrap()];
        assert_eq!(
            demands(sent, false),
            vec![Demand::new(0, 2, 160.0).unwrap()]
        );
    }

    #[test]
    fn several_legacy_bands_are_summed_as_the_original_root_does() {
        let sent = vec![
            Demand::new(1, 2, 10.0).unwrap(),
            Demand::new(7, 3, 5.0).unwrap(),
        ];
        assert_eq!(demands(sent, false), vec![Demand::new(0, 5, 15.0).unwrap()]);
    }

    #[test]
    fn bands_from_our_servers_are_kept() {
        let sent = vec![
            Demand::new(1, 2, 10.0).unwrap(),
            Demand::new(7, 3, 5.0).unwrap(),
        ];
        assert_eq!(demands(sent.clone(), true), sent);
    }
}
