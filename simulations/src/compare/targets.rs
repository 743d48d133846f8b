//! The targets a real run must meet against its simulated twin (issue 36,
//! "the simulator predicts the real tree"), in one place, and the report's
//! rows: each figure of both runs, their difference, and its target.
//!
//! Must not: compute a run's figures (`mod.rs` does, with `summary.rs`'s
//! rules).

use serde::Serialize;

use super::{Figures, PerSecond};

/// Utilisation (ours): the real run within 1 percentage point of the
/// simulated.
pub const UTILISATION_PP: f64 = 0.01;

/// Peak Σ has / capacity: the real run within 1 percentage point.
pub const PEAK_PP: f64 = 0.01;

/// A mark's dip (`marks.rs`): its start on the real side within this many
/// seconds of the simulated one's. The runs are sampled once a second, each side
/// seeing a crossing at the first sample after it: two crossings less
/// than a second apart can land a second apart. The second second is for
/// what the replay cannot pin to the millisecond (process start-up, RPC
/// latencies that move every refresh timer a little at each answer).
pub const MARK_EDGE_S: f64 = 2.0;

/// What the gate on a dip's start allows: a refresh interval of the
/// real-tree scenarios (8 s) and a second of sampling. A cut's dip starts
/// when the leases below it end, which is where the cut falls in the
/// parent's renewal cycle. On its own phases the simulator can be a cycle
/// apart (CI's run was: 82 / 88 s at 0b1b769); replaying the real run's
/// asks (`doorman-sim run --replay-asks`) pins every cycle, and the
/// starts then agree to the second in all but two cases of the doc's
/// table (4 s, and a dip on one side only; not traced yet:
/// docs/sim-vs-real.md). [`MARK_EDGE_S`] is where the gate would go once
/// they are understood.
pub const DIP_START_S: f64 = 9.0;

/// Seconds out of the band from settle: the real run within this share of
/// the simulated figure…
pub const OUT_OF_BAND_SHARE: f64 = 0.25;

/// …or within this many seconds per mark after which either run dips
/// (at least one mark's worth), whichever is larger: each of a dip's two
/// edges may fall [`MARK_EDGE_S`] apart (the 1 Hz samples, and what the
/// replay cannot pin to the millisecond; `marks.rs`).
pub const OUT_OF_BAND_MIN_S: f64 = 2.0 * MARK_EDGE_S;

/// Dips out of the band from settle: the real count within this share of
/// the simulated count…
pub const DIPS_SHARE: f64 = 0.25;

/// …or within this many dips per mark after which either run dips (at
/// least one), whichever is larger: a recovery that reaches the band's
/// edge for a few seconds before the last holders are back splits one
/// dip in two on one side, and who comes back when after a mark ends
/// follows retries the replay does not pin (backoff jitter, TCP's
/// retransmissions of a connection cut mid-way).
pub const DIPS_MIN: f64 = 1.0;

/// Seconds at which the real run is above capacity and the simulated run
/// is not: none.
pub const NEW_OVER_S: usize = 0;

/// Slack for rounding in the CSVs' three decimals.
const EPS: f64 = 1e-9;

/// How a row's values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A ratio, shown in % (differences in percentage points).
    Ratio,
    /// Seconds.
    Seconds,
    /// A count.
    Count,
}

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What it measures.
    pub figure: String,
    /// How its values read.
    pub unit: Unit,
    /// The simulated run's value (none for a figure of both runs).
    pub simulated: Option<f64>,
    /// The real run's value.
    pub real: Option<f64>,
    /// Real − simulated, or the figure of both runs.
    pub difference: Option<f64>,
    /// The target, in words (none: shown, not gated).
    pub target: Option<String>,
    /// Whether the target is met (none without a target).
    pub ok: Option<bool>,
}

impl Row {
    pub(super) fn shown(figure: &str, unit: Unit, sim: Option<f64>, real: Option<f64>) -> Row {
        let difference = sim.zip(real).map(|(s, r)| r - s);
        Row {
            figure: figure.into(),
            unit,
            simulated: sim,
            real,
            difference,
            target: None,
            ok: None,
        }
    }

    /// The row with a target of ± `allowed` around the simulated value
    /// (met when both values are missing).
    pub(super) fn within(mut self, allowed: f64, target: String) -> Row {
        self.ok = Some(match (self.simulated, self.real) {
            (Some(s), Some(r)) => (r - s).abs() <= allowed + EPS,
            (None, None) => true,
            _ => false,
        });
        self.target = Some(target);
        self
    }

    /// A value shown in the report's style.
    pub fn value(&self, x: Option<f64>) -> String {
        match (x, self.unit) {
            (None, _) => "–".into(),
            (Some(x), Unit::Ratio) => format!("{:.2} %", 100.0 * x),
            (Some(x), Unit::Seconds) => format!("{x:.0} s"),
            (Some(x), Unit::Count) => format!("{x:.0}"),
        }
    }

    /// The difference shown in the report's style.
    pub fn diff(&self) -> String {
        let signed = self.simulated.is_some();
        match (self.difference, self.unit) {
            (None, _) => "–".into(),
            (Some(d), Unit::Ratio) if signed => format!("{:+.2} pp", 100.0 * d),
            (Some(d), Unit::Ratio) => format!("{:.2} pp", 100.0 * d),
            (Some(d), Unit::Seconds) => format!("{d:+.0} s"),
            (Some(d), Unit::Count) => format!("{d:+.0}"),
        }
    }

    /// The row in one line (a missed target's description).
    pub fn describe(&self) -> String {
        format!(
            "{}: simulated {}, real {}, difference {}, target {}",
            self.figure,
            self.value(self.simulated),
            self.value(self.real),
            self.diff(),
            self.target.as_deref().unwrap_or("none")
        )
    }
}

/// An allowance with at most two decimals (`1.75`, `10`).
fn short(x: f64) -> String {
    format!("{}", (x * 100.0).round() / 100.0)
}

/// ± the larger of `share` of `sim` and `least`.
fn allowance(sim: f64, share: f64, least: f64) -> f64 {
    (share * sim).max(least)
}

/// The report's rows for one seed: utilisation and peak, seconds above
/// capacity, the dips (`dipping`: the marks after which either run dips),
/// then the runs second by second.
pub fn rows(sim: &Figures, real: &Figures, per: &PerSecond, dipping: usize) -> Vec<Row> {
    let mut rows = vec![
        Row::shown(
            "utilisation (ours)",
            Unit::Ratio,
            sim.utilisation,
            real.utilisation,
        )
        .within(
            UTILISATION_PP,
            format!("± {:.0} pp", 100.0 * UTILISATION_PP),
        ),
        Row::shown(
            "peak Σ has / capacity",
            Unit::Ratio,
            Some(sim.peak),
            Some(real.peak),
        )
        .within(PEAK_PP, format!("± {:.0} pp", 100.0 * PEAK_PP)),
    ];
    rows.extend(over_rows(sim, real, per));
    rows.extend(dip_rows(sim, real, dipping.max(1) as f64));
    rows.extend(per_second_rows(per));
    rows
}

/// A count of both runs (seconds, dips).
fn counts(figure: &str, unit: Unit, sim: usize, real: usize) -> Row {
    Row::shown(figure, unit, Some(sim as f64), Some(real as f64))
}

/// Seconds above capacity in each run, and in the real run alone.
fn over_rows(sim: &Figures, real: &Figures, per: &PerSecond) -> [Row; 2] {
    let alone = per.real_over_alone.len();
    let figure = "seconds above capacity where the simulated run is not";
    let mut new_over = Row::shown(figure, Unit::Seconds, None, Some(alone as f64));
    new_over.target = Some(format!("{NEW_OVER_S} s"));
    // The target may be raised above 0; as long as it is 0, `<=` is `==`.
    #[allow(clippy::absurd_extreme_comparisons)]
    let met = alone <= NEW_OVER_S;
    new_over.ok = Some(met);
    let (s, r) = (sim.over_capacity_s, real.over_capacity_s);
    [
        counts("seconds above capacity", Unit::Seconds, s, r),
        new_over,
    ]
}

/// The dips from settle: seconds out of the band and count (gated),
/// deepest and longest (shown).
fn dip_rows(sim: &Figures, real: &Figures, marks: f64) -> [Row; 4] {
    let floor = OUT_OF_BAND_MIN_S * marks;
    let secs = allowance(sim.out_of_band_s as f64, OUT_OF_BAND_SHARE, floor);
    let secs_target = format!(
        "± {} s ({:.0} % or {OUT_OF_BAND_MIN_S:.0} s × {marks:.0} marks)",
        short(secs),
        100.0 * OUT_OF_BAND_SHARE
    );
    let dips = allowance(sim.dips as f64, DIPS_SHARE, DIPS_MIN * marks);
    let dips_target = format!(
        "± {} ({:.0} % or {DIPS_MIN:.0} × {marks:.0} marks)",
        short(dips),
        100.0 * DIPS_SHARE
    );
    let (s, r) = (sim.out_of_band_s, real.out_of_band_s);
    [
        counts("seconds out of the band from settle", Unit::Seconds, s, r)
            .within(secs, secs_target),
        counts("dips from settle", Unit::Count, sim.dips, real.dips).within(dips, dips_target),
        Row::shown(
            "deepest dip (Σ has / goal)",
            Unit::Ratio,
            sim.deepest_dip,
            real.deepest_dip,
        ),
        counts(
            "longest dip",
            Unit::Seconds,
            sim.longest_dip_s,
            real.longest_dip_s,
        ),
    ]
}

/// The figures of both runs second by second.
fn per_second_rows(per: &PerSecond) -> [Row; 2] {
    let both = |figure: String, d: Option<f64>| Row {
        difference: d,
        ..Row::shown(&figure, Unit::Ratio, None, None)
    };
    let at = per
        .max_at
        .map_or(String::new(), |t| format!(" (at {t:.0} s)"));
    let n = per.seconds;
    [
        both(
            format!("per second: mean absolute Δ of Σ has / capacity over {n} s"),
            per.mean_abs_diff,
        ),
        both(
            format!("per second: largest absolute Δ of Σ has / capacity{at}"),
            per.max_abs_diff,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_the_larger_of_a_share_and_a_floor() {
        assert_eq!(allowance(100.0, 0.25, 10.0), 25.0);
        assert_eq!(allowance(20.0, 0.25, 10.0), 10.0);
        let r = Row::shown("x", Unit::Count, Some(8.0), Some(10.0));
        assert_eq!(r.clone().within(2.0, "±2".into()).ok, Some(true));
        assert_eq!(r.clone().within(1.0, "±1".into()).ok, Some(false));
        let missing = Row::shown("x", Unit::Ratio, Some(0.9), None);
        assert_eq!(missing.within(1.0, "±1".into()).ok, Some(false));
    }
}
