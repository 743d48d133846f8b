//! Time as a value: milliseconds since the Unix epoch. The whole system
//! passes time in as an argument, so tests and the simulation use virtual
//! time and production uses the real clock, through the same code.
//!
//! Must not: read a clock (`doorman_net::clock::lease_clock` is the one
//! reader).

use std::fmt;
use std::ops::{Add, Sub};

/// An instant, in milliseconds since the Unix epoch.
///
/// ```
/// use doorman_algorithms::Time;
/// let t = Time::from_secs(100) + Time::secs(5);
/// assert_eq!(t.whole_secs(), 105);
/// assert_eq!(Time::from_millis(1999).whole_secs(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(i64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// The far future (used for "no expiry").
    pub const MAX: Time = Time(i64::MAX / 4);

    /// From milliseconds since the epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Time(ms)
    }

    /// From whole seconds since the epoch (saturating).
    pub const fn from_secs(s: i64) -> Self {
        Time(s.saturating_mul(1000))
    }

    /// A duration of `s` seconds, as a `Time` offset.
    pub const fn secs(s: i64) -> Self {
        Time::from_secs(s)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds since the epoch, rounded down (the wire format).
    pub const fn whole_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// A duration as a `Time` offset (saturating at `i64::MAX` ms).
    ///
    /// ```
    /// use doorman_algorithms::Time;
    /// assert_eq!(Time::from_duration(std::time::Duration::from_millis(1500)), Time::from_millis(1500));
    /// assert_eq!(Time::from_duration(std::time::Duration::MAX), Time::from_millis(i64::MAX));
    /// ```
    pub fn from_duration(d: std::time::Duration) -> Self {
        Time(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// This offset as a duration; negative offsets are zero.
    ///
    /// ```
    /// use doorman_algorithms::Time;
    /// assert_eq!((Time::from_secs(5) - Time::from_secs(3)).to_duration(), std::time::Duration::from_secs(2));
    /// assert_eq!((Time::from_secs(3) - Time::from_secs(5)).to_duration(), std::time::Duration::ZERO);
    /// ```
    pub fn to_duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.max(0) as u64)
    }

    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        Time(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:03}s",
            self.0.div_euclid(1000),
            self.0.rem_euclid(1000)
        )
    }
}
