//! The algorithm kinds, named as in the wire protocol and the config.
//!
//! Must not: decide anything (`Shares` applies the kind).

use std::fmt;
use std::str::FromStr;

/// Which rule divides a resource's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Kind {
    /// Everyone gets what they want; capacity is ignored.
    #[default]
    NoAlgorithm,
    /// Everyone gets what they want up to `capacity × subclients`.
    Static,
    /// Equal share per subclient, leftovers in proportion to extra need.
    ProportionalShare,
    /// Weighted max-min fairness (water-filling).
    FairShare,
}

impl Kind {
    /// All kinds, in wire-enum order.
    pub const ALL: [Kind; 4] = [
        Kind::NoAlgorithm,
        Kind::Static,
        Kind::ProportionalShare,
        Kind::FairShare,
    ];

    /// The name used in configs and on the wire (`FAIR_SHARE`, …).
    pub fn name(self) -> &'static str {
        match self {
            Kind::NoAlgorithm => "NO_ALGORITHM",
            Kind::Static => "STATIC",
            Kind::ProportionalShare => "PROPORTIONAL_SHARE",
            Kind::FairShare => "FAIR_SHARE",
        }
    }

    /// True for the kinds that share a bounded capacity and therefore never
    /// hand out capacity still leased to someone else.
    pub fn is_share(self) -> bool {
        matches!(self, Kind::ProportionalShare | Kind::FairShare)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name was none of `NO_ALGORITHM`, `STATIC`, `PROPORTIONAL_SHARE`, `FAIR_SHARE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown algorithm kind {0:?} (expected NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE or FAIR_SHARE)")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in Kind::ALL {
            assert_eq!(k.name().parse::<Kind>(), Ok(k));
        }
        assert!("fair_share".parse::<Kind>().is_err());
    }
}
