//! Validated input values. The algorithms only ever see values that passed
//! these constructors: finite, non-negative amounts and subclient counts ≥ 1.
//! Everything a request or a config can influence enters through here.
//!
//! Must not: accept NaN, infinities or negative amounts.

use thiserror::Error;

/// Why a value was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum InvalidValue {
    /// NaN or ±infinity.
    #[error("{field} must be a finite number, got {value}")]
    NotFinite {
        /// The field that carried the value.
        field: &'static str,
        /// The value refused.
        value: f64,
    },
    /// A negative amount.
    #[error("{field} must be >= 0, got {value}")]
    Negative {
        /// The field that carried the value.
        field: &'static str,
        /// The value refused.
        value: f64,
    },
    /// A subclient count below one.
    #[error("subclients must be >= 1, got {0}")]
    NoSubclients(i64),
}

/// A finite, non-negative quantity of capacity (a capacity, a want, a grant).
///
/// ```
/// use doorman_lease::Amount;
/// assert_eq!(Amount::new("wants", 2.5).unwrap().get(), 2.5);
/// assert!(Amount::new("wants", f64::NAN).is_err());
/// assert!(Amount::new("wants", -1.0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Amount(f64);

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount(0.0);

    /// Validates `value`; `field` names it in the error.
    pub fn new(field: &'static str, value: f64) -> Result<Self, InvalidValue> {
        if !value.is_finite() {
            return Err(InvalidValue::NotFinite { field, value });
        }
        if value < 0.0 {
            return Err(InvalidValue::Negative { field, value });
        }
        // Normalise -0.0 to 0.0 so sums and displays stay clean.
        Ok(Amount(value + 0.0))
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// One priority band of one requester's demand.
///
/// ```
/// use doorman_lease::Demand;
/// let d = Demand::new(10, 3, 42.0).unwrap(); // band 10, 3 subclients, wants 42
/// assert_eq!(d.subclients(), 3);
/// assert!(Demand::new(0, 0, 1.0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    priority: i64,
    subclients: u32,
    wants: Amount,
}

impl Demand {
    /// Largest accepted subclient count.
    pub const MAX_SUBCLIENTS: i64 = u32::MAX as i64;

    /// Validates and builds a demand. `subclients` is 1 for an end client
    /// and the number of clients a downstream server aggregates in the band.
    /// Counts above [`Demand::MAX_SUBCLIENTS`] are clamped to it.
    pub fn new(priority: i64, subclients: i64, wants: f64) -> Result<Self, InvalidValue> {
        if subclients < 1 {
            return Err(InvalidValue::NoSubclients(subclients));
        }
        Ok(Demand {
            priority,
            subclients: subclients.min(Self::MAX_SUBCLIENTS) as u32,
            wants: Amount::new("wants", wants)?,
        })
    }

    /// A demand of one end client.
    pub fn client(priority: i64, wants: Amount) -> Self {
        Demand {
            priority,
            subclients: 1,
            wants,
        }
    }

    /// Priority band (higher = more important).
    pub fn priority(&self) -> i64 {
        self.priority
    }

    /// Weight of the demand.
    pub fn subclients(&self) -> u32 {
        self.subclients
    }

    /// What the band wants.
    pub fn wants(&self) -> f64 {
        self.wants.get()
    }
}
