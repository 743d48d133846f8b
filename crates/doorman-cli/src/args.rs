//! Value parsers shared by the subcommands' flags: every number a user can
//! type is checked by clap with its range, so a negative, NaN, huge or tiny
//! value is a usage error naming the flag, never a panic or a dead task
//! later (`Duration::from_secs_f64` panics on such input).
//!
//! Must not: know about any one subcommand.

use std::time::Duration;

use doorman_core::limits::MAX_AMOUNT;

/// `x` if it is a finite number from `min` to `max` (inclusive).
pub fn in_range(x: f64, min: f64, max: f64) -> Result<f64, String> {
    if !x.is_finite() || x < min || x > max {
        return Err(format!("must be a number from {min} to {max}, got {x}"));
    }
    Ok(x)
}

/// A parser for a finite number from `min` to `max` (inclusive).
pub fn number(min: f64, max: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s: &str| {
        let x: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number"))?;
        in_range(x, min, max)
    }
}

/// `n` if it is a count from 1 to `max`.
pub fn count_in_range(n: usize, max: usize) -> Result<usize, String> {
    if !(1..=max).contains(&n) {
        return Err(format!("must be a whole number from 1 to {max}, got {n}"));
    }
    Ok(n)
}

/// A parser for a count from 1 to `max`.
pub fn count(max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |s: &str| {
        let n: usize = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number"))?;
        count_in_range(n, max)
    }
}

/// A number of seconds from `min` to `max` (inclusive), as a [`Duration`].
pub fn seconds(min: f64, max: f64) -> impl Fn(&str) -> Result<Duration, String> + Clone {
    let n = number(min, max);
    move |s: &str| {
        n(s).map(Duration::from_secs_f64)
            .map_err(|e| format!("{e} (seconds)"))
    }
}

/// A capacity or demand: a finite number from 0 to the protocol's maximum.
pub fn amount(s: &str) -> Result<f64, String> {
    number(0.0, MAX_AMOUNT)(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_numbers_are_refused_with_the_range() {
        let p = seconds(0.01, 3600.0);
        assert_eq!(p("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["-1", "NaN", "inf", "1e-10", "1e300", "x", ""] {
            let e = p(bad).unwrap_err();
            assert!(
                e.contains("from 0.01 to 3600") || e.contains("not a number"),
                "{bad}: {e}"
            );
        }
        assert!(amount("1e16").is_err() && amount("-0.5").is_err());
        assert_eq!(amount("1e15"), Ok(1e15));
    }
}
