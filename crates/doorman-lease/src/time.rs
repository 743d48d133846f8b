//! Time as values: an instant ([`Time`], milliseconds since the Unix
//! epoch) and a length of time ([`Span`], milliseconds), which cannot be
//! confused: an instant plus a span is an instant, two instants apart are
//! a span, and two instants never add. The whole system passes time in as
//! an argument, so tests and the simulation use virtual time and
//! production uses the real clock, through the same code.
//!
//! Must not: read a clock (each shell has one injected clock).

use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};

/// What an instant and a length of time share: a count of milliseconds,
/// zero, a far bound, and the readings in milliseconds, whole seconds
/// (rounded down, the wire's unit) and seconds as a float.
macro_rules! millis {
    ($t:ident, $what:literal, $since:literal) => {
        impl $t {
            #[doc = concat!($what, " of zero milliseconds.")]
            pub const ZERO: $t = $t(0);
            #[doc = concat!($what, " beyond anything that happens (\"forever\", \"no expiry\").")]
            pub const MAX: $t = $t(i64::MAX / 4);

            #[doc = concat!("From milliseconds ", $since, ".")]
            pub const fn from_millis(ms: i64) -> Self {
                $t(ms)
            }

            #[doc = concat!("Milliseconds ", $since, ".")]
            pub const fn as_millis(self) -> i64 {
                self.0
            }

            #[doc = concat!("Whole seconds ", $since, ", rounded down (the wire format).")]
            pub const fn whole_secs(self) -> i64 {
                self.0.div_euclid(1000)
            }

            /// Seconds as a float.
            pub fn as_secs_f64(self) -> f64 {
                self.0 as f64 / 1000.0
            }
        }
    };
}

/// An instant, in milliseconds since the Unix epoch.
///
/// ```
/// use doorman_lease::{Span, Time};
/// let t = Time::from_secs(100) + Span::secs(5);
/// assert_eq!(t.whole_secs(), 105);
/// assert_eq!(t - Time::from_secs(100), Span::secs(5));
/// assert_eq!(Time::from_millis(1999).whole_secs(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(i64);

millis!(Time, "An instant", "since the epoch");

impl Time {
    /// From whole seconds since the epoch (saturating).
    pub const fn from_secs(s: i64) -> Self {
        Time(s.saturating_mul(1000))
    }
}

impl Add<Span> for Time {
    type Output = Time;
    fn add(self, rhs: Span) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl Sub<Span> for Time {
    type Output = Time;
    fn sub(self, rhs: Span) -> Time {
        Time(self.0.saturating_sub(rhs.0))
    }
}

impl AddAssign<Span> for Time {
    fn add_assign(&mut self, rhs: Span) {
        *self = *self + rhs;
    }
}

impl SubAssign<Span> for Time {
    fn sub_assign(&mut self, rhs: Span) {
        *self = *self - rhs;
    }
}

/// How far apart two instants are (negative when `rhs` is later).
impl Sub for Time {
    type Output = Span;
    fn sub(self, rhs: Time) -> Span {
        Span(self.0.saturating_sub(rhs.0))
    }
}

/// A length of time, in milliseconds; negative for the distance back to
/// an earlier instant.
///
/// ```
/// use doorman_lease::Span;
/// assert_eq!(Span::secs(2) + Span::from_millis(500), Span::from_millis(2500));
/// assert_eq!(Span::from_millis(2500).whole_secs(), 2);
/// assert_eq!(Span::from_duration(std::time::Duration::from_millis(1500)), Span::from_millis(1500));
/// assert_eq!(Span::from_duration(std::time::Duration::MAX), Span::from_millis(i64::MAX));
/// assert_eq!(Span::secs(-2).to_duration(), std::time::Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(i64);

millis!(Span, "A length of time", "");

impl Span {
    /// `s` seconds (saturating).
    pub const fn secs(s: i64) -> Self {
        Span(s.saturating_mul(1000))
    }

    /// A std duration as a span (saturating at `i64::MAX` ms).
    pub fn from_duration(d: std::time::Duration) -> Self {
        Span(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// This span as a std duration; negative spans are zero.
    pub fn to_duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.max(0) as u64)
    }

    /// This span times `n` (saturating).
    pub const fn times(self, n: i64) -> Span {
        Span(self.0.saturating_mul(n))
    }
}

impl Add for Span {
    type Output = Span;
    fn add(self, rhs: Span) -> Span {
        Span(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Span {
    type Output = Span;
    fn sub(self, rhs: Span) -> Span {
        Span(self.0.saturating_sub(rhs.0))
    }
}

impl Neg for Span {
    type Output = Span;
    fn neg(self) -> Span {
        Span(self.0.saturating_neg())
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let ms = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}s", ms / 1000, ms % 1000)
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
