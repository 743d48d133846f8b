//! Python arguments checked and turned into the Rust client's types:
//! fallback, timeouts, permit counts and wants. Every refusal is an
//! `InvalidArgument` naming the argument.
//!
//! Must not: touch the client or the runtime.

use std::time::Duration;

use doorman_client::{Fallback, Wants};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::errors::invalid;

const FALLBACK_HELP: &str =
    "fallback must be \"pessimistic\", \"optimistic\" or (\"safe\", default capacity)";

/// `"pessimistic"`, `"optimistic"` or `("safe", default)`.
pub(crate) fn fallback(value: &Bound<'_, PyAny>) -> PyResult<Fallback> {
    if value.is_instance_of::<PyString>() {
        return match value.extract::<String>()?.as_str() {
            "pessimistic" => Ok(Fallback::Pessimistic),
            "optimistic" => Ok(Fallback::Optimistic),
            other => Err(invalid(format!("{FALLBACK_HELP}, got {other:?}"))),
        };
    }
    if let Ok(t) = value.cast::<PyTuple>() {
        if t.len() == 2 && t.get_item(0)?.extract::<String>().ok().as_deref() == Some("safe") {
            let default: f64 = t
                .get_item(1)?
                .extract()
                .map_err(|_| invalid(format!("{FALLBACK_HELP}: the default must be a number")))?;
            if !(default.is_finite() && default >= 0.0) {
                return Err(invalid(format!(
                    "the safe fallback's default must be a finite number >= 0, got {default}"
                )));
            }
            return Ok(Fallback::Safe { default });
        }
    }
    Err(invalid(FALLBACK_HELP))
}

/// A duration in seconds: finite and ≥ 0 (`name` is the argument's name).
pub(crate) fn seconds(name: &str, secs: f64) -> PyResult<Duration> {
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(invalid(format!(
            "{name} must be a finite number of seconds >= 0, got {secs}"
        )));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| invalid(format!("{name} is too large: {secs} s")))
}

/// An optional timeout (None waits as long as it takes).
pub(crate) fn timeout(secs: Option<f64>) -> PyResult<Option<Duration>> {
    secs.map(|s| seconds("timeout", s)).transpose()
}

/// A permit count: 1 to 2³² − 1.
pub(crate) fn permits(n: i64) -> PyResult<u32> {
    match u32::try_from(n) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(invalid(format!(
            "n must be a whole number of permits from 1 to {}, got {n}",
            u32::MAX
        ))),
    }
}

/// Wants: a number, or None for an estimate from use. The Rust client
/// checks the number (finite, ≥ 0) when a resource is opened; `set_wants`
/// checks it here.
pub(crate) fn wants(w: Option<f64>) -> Wants {
    match w {
        Some(w) => Wants::Fixed(w),
        None => Wants::Auto,
    }
}

/// Wants given to `set_wants`, checked as the Rust client checks them when a
/// resource is opened.
pub(crate) fn new_wants(w: Option<f64>) -> PyResult<Wants> {
    match w {
        Some(v) if !(v.is_finite() && v >= 0.0) => Err(invalid(format!(
            "wants must be a finite number >= 0 or None, got {v}"
        ))),
        other => Ok(wants(other)),
    }
}
