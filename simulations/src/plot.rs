//! The chart of a run, computed once and drawn twice (`plot.svg`,
//! `plot.png`): two panels on one time axis. The upper one shows the root's
//! capacity (red) and the clients' Σ has (green) on a scale around the
//! capacity, with the shortfall zone above the capacity shaded; the lower
//! one the clients' Σ wants (blue) on its own scale. Ticks every few
//! minutes; each mishap is a dashed line with a letter (S spike, L master
//! lost, U unreachable, E election, X other) and its disturbance (an
//! outage, a lost master) is shaded grey.
//!
//! Must not: compute figures or change the run.

use crate::engine::{Mark, MarkKind, Sample, Sim};

/// An RGB colour.
pub type Rgb = [u8; 3];

/// Capacity.
pub const RED: Rgb = [214, 39, 40];
/// Σ has.
pub const GREEN: Rgb = [44, 160, 44];
/// Σ wants.
pub const BLUE: Rgb = [31, 119, 180];
/// The zone above capacity.
pub const SHORTFALL: Rgb = [253, 226, 226];
/// A disturbance's duration.
pub const OUTAGE: Rgb = [232, 232, 232];
/// Grid lines.
pub const GRID: Rgb = [229, 229, 229];
/// Mishap lines.
pub const MARK: Rgb = [120, 120, 120];

/// One line: colour, legend label, points (pixels).
pub type Series = (Rgb, String, Vec<(f64, f64)>);

/// One panel: its pixel box, grid lines, shaded boxes and lines.
pub struct Panel {
    /// Top, pixels.
    pub top: f64,
    /// Bottom, pixels.
    pub bottom: f64,
    /// (label, y) of the horizontal grid lines.
    pub y_ticks: Vec<(String, f64)>,
    /// Shaded boxes (x0, y0, x1, y1, colour), drawn first.
    pub shade: Vec<(f64, f64, f64, f64, Rgb)>,
    /// The lines.
    pub series: Vec<Series>,
}

/// The whole chart.
pub struct Chart {
    /// Width, pixels.
    pub w: f64,
    /// Height, pixels.
    pub h: f64,
    /// Left margin (the y labels).
    pub left: f64,
    /// Right margin.
    pub right: f64,
    /// First line.
    pub title: String,
    /// Second line: what the shading and letters mean.
    pub legend: String,
    /// (label, x) under the time axis.
    pub x_ticks: Vec<(String, f64)>,
    /// The time axis's y.
    pub axis_y: f64,
    /// (x, letter, description) of each mark.
    pub marks: Vec<(f64, char, String)>,
    /// Upper (capacity, has) and lower (wants) panels.
    pub panels: Vec<Panel>,
}

fn letter(m: &Mark) -> char {
    match m.kind {
        MarkKind::Spike => 'S',
        MarkKind::MasterLost(_) => 'L',
        MarkKind::CutOff(_) => 'U',
        MarkKind::Election(_) => 'E',
    }
}

/// A tick step (seconds) giving at most about 12 ticks.
pub(crate) fn tick_step(t_max: f64) -> f64 {
    [10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0]
        .into_iter()
        .find(|s| t_max / s <= 12.0)
        .unwrap_or(7200.0)
}

/// A tick's label: minutes for steps of a minute or more, else seconds.
pub(crate) fn fmt_t(t: f64, step: f64) -> String {
    if step >= 60.0 {
        format!("{:.0} min", t / 60.0)
    } else {
        format!("{t:.0} s")
    }
}

/// Grid values from 0 to `max` in round steps.
pub(crate) fn y_grid(max: f64) -> Vec<f64> {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (0..=((max / step).floor() as usize))
        .map(|i| i as f64 * step)
        .collect()
}

/// The upper panel's top and bottom (capacity and what clients have).
const UPPER: (f64, f64) = (46.0, 330.0);
/// The lower panel's top and bottom (what clients want).
const LOWER: (f64, f64) = (350.0, 470.0);

/// `f` of every sample, placed by `x` (time) and `y` (value).
fn line(
    sim: &Sim,
    x: &dyn Fn(f64) -> f64,
    f: &dyn Fn(&Sample) -> f64,
    y: &dyn Fn(f64) -> f64,
) -> Vec<(f64, f64)> {
    sim.samples.iter().map(|p| (x(p.t), y(f(p)))).collect()
}

/// The upper panel: the root's capacity and the clients' total has, the
/// shortfall above the capacity and the outages shaded.
fn upper_panel(sim: &Sim, x: &dyn Fn(f64) -> f64, t_max: f64) -> Panel {
    let (top1, bottom1) = UPPER;
    let cap = sim.capacity;
    let root_cap = |p: &Sample| p.levels.first().map_or(0.0, |l| l.0);
    let peak = sim.samples.iter().map(|p| p.client_has).fold(cap, f64::max);
    let y1_max = (peak.max(cap * 1.1) * 1.05).max(1.0);
    let y1 = |v: f64| top1 + (bottom1 - top1) * (1.0 - v / y1_max);
    let outages: Vec<_> = sim
        .marks
        .iter()
        .filter(|m| m.end > m.t)
        .map(|m| (x(m.t), top1, x(m.end.min(t_max)), bottom1, OUTAGE))
        .collect();
    let mut shade = vec![(x(0.0), y1(y1_max), x(t_max), y1(cap), SHORTFALL)];
    shade.extend(outages);
    Panel {
        top: top1,
        bottom: bottom1,
        y_ticks: y_grid(y1_max)
            .into_iter()
            .map(|v| (format!("{v:.0}"), y1(v)))
            .collect(),
        shade,
        series: vec![
            (RED, "root capacity".into(), line(sim, x, &root_cap, &y1)),
            (
                GREEN,
                "clients' total has".into(),
                line(sim, x, &|p| p.client_has, &y1),
            ),
        ],
    }
}

/// The lower panel: the clients' total wants.
fn lower_panel(sim: &Sim, x: &dyn Fn(f64) -> f64) -> Panel {
    let (top2, bottom2) = LOWER;
    let wants_max = sim
        .samples
        .iter()
        .map(|p| p.client_wants)
        .fold(1.0, f64::max)
        * 1.1;
    let y2 = |v: f64| top2 + (bottom2 - top2) * (1.0 - v / wants_max);
    Panel {
        top: top2,
        bottom: bottom2,
        y_ticks: y_grid(wants_max)
            .into_iter()
            .map(|v| (format!("{v:.0}"), y2(v)))
            .collect(),
        shade: Vec::new(),
        series: vec![(
            BLUE,
            "clients' total wants".into(),
            line(sim, x, &|p| p.client_wants, &y2),
        )],
    }
}

impl Chart {
    /// The chart of `sim`.
    pub fn of(sim: &Sim) -> Chart {
        let (w, left, right) = (1000.0, 70.0, 20.0);
        let t_max = (sim.scenario.duration as f64).max(1.0);
        let x = |t: f64| left + (w - left - right) * t / t_max;
        let cap = sim.capacity;
        let step = tick_step(t_max);
        let clients = crate::summary::leaves(&sim.scenario.tree) * sim.scenario.clients_per_leaf;
        Chart {
            w,
            h: 500.0,
            left,
            right,
            title: format!(
                "{} ({}) - capacity {cap}, {clients} clients",
                sim.scenario.name, sim.scenario.profile
            ),
            legend: "pink: above capacity (shortfall); grey: outage or lost master; S spike, L master lost, U unreachable, E election".into(),
            x_ticks: (0..=((t_max / step) as usize))
                .map(|i| i as f64 * step)
                .map(|t| (fmt_t(t, step), x(t)))
                .collect(),
            axis_y: LOWER.1,
            marks: sim.marks.iter().map(|m| (x(m.t), letter(m), m.what.clone())).collect(),
            panels: vec![upper_panel(sim, &x, t_max), lower_panel(sim, &x)],
        }
    }
}
