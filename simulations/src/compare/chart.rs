//! The chart of a comparison (`seed-N.svg`, or `compare.svg` for one run):
//! one panel in capacity units over seconds: the capacity (red), the goal
//! min(Σ wants, capacity) (blue, dashed) with the re-convergence band
//! shaded around it, the simulated Σ has (green) and the real Σ has
//! (orange, drawn thinner over the green), and each mark's start as a thin
//! line described on hover. The scale shows the run from settle on: lower
//! values (the start-up) sit on the bottom edge.
//!
//! Must not: compute figures; it draws `plot.rs`'s style with its helpers.

use std::fmt::Write as _;

use super::SeedComparison;
use crate::engine::Sample;
use crate::output::{esc, hex};
use crate::plot::{fmt_t, tick_step, y_grid, Rgb, BLUE, GREEN, GRID, MARK, RED};
use crate::summary::BAND;

/// The real run's Σ has: far from the simulated run's green.
pub const ORANGE: Rgb = [255, 127, 14];
/// The band around the goal.
pub const BAND_FILL: Rgb = [222, 235, 247];

/// The chart's box and scales.
struct Frame {
    w: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    t_max: f64,
    y_min: f64,
    y_max: f64,
}

/// The lowest value the scale shows: a little under the lowest Σ has and
/// band edge from settle on (0 at least).
fn floor(s: &SeedComparison) -> f64 {
    let (cap, settle) = (s.plan.capacity, s.plan.settle as f64);
    let samples = s.sim_run.samples.iter().chain(&s.real_run.samples);
    let low = samples
        .filter(|p| p.t >= settle)
        .map(|p| p.client_has.min(p.client_wants.min(cap) * (1.0 - BAND)))
        .fold(cap, f64::min);
    (low - 0.05 * cap).max(0.0)
}

impl Frame {
    fn of(s: &SeedComparison) -> Frame {
        let cap = s.plan.capacity;
        let (sim, real) = (&s.sim_run.samples, &s.real_run.samples);
        // The plan's duration: rows after it (a real run's tail) are not drawn.
        let t_max = (s.plan.duration as f64).max(1.0);
        let peak = sim
            .iter()
            .chain(real)
            .map(|p| p.client_has)
            .fold(cap * 1.1, f64::max);
        Frame {
            w: 1000.0,
            left: 70.0,
            right: 20.0,
            top: 60.0,
            bottom: 400.0,
            t_max,
            y_min: floor(s),
            y_max: (peak * 1.05).max(1.0),
        }
    }
    fn x(&self, t: f64) -> f64 {
        self.left + (self.w - self.left - self.right) * t.clamp(0.0, self.t_max) / self.t_max
    }
    fn y(&self, v: f64) -> f64 {
        let span = (self.y_max - self.y_min).max(1e-9);
        let v = v.clamp(self.y_min, self.y_max);
        self.top + (self.bottom - self.top) * (1.0 - (v - self.y_min) / span)
    }
    /// Grid values within the scale, in `plot.rs`'s round steps.
    fn y_ticks(&self) -> Vec<f64> {
        let grid = y_grid(self.y_max - self.y_min);
        let step = grid.get(1).map_or(self.y_max, |s| s - grid[0]).max(1e-9);
        let first = (self.y_min / step).ceil() as usize;
        let last = (self.y_max / step).floor() as usize;
        (first..=last).map(|i| i as f64 * step).collect()
    }
    fn points(&self, samples: &[Sample], f: impl Fn(&Sample) -> f64) -> String {
        let pt = |p: &Sample| format!("{:.1},{:.1}", self.x(p.t), self.y(f(p)));
        let shown = samples.iter().filter(|p| p.t <= self.t_max);
        shown.map(pt).collect::<Vec<_>>().join(" ")
    }
}

/// The chart as SVG.
pub fn svg(s: &SeedComparison) -> String {
    let f = Frame::of(s);
    let p = &s.plan;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"440\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"{}\" y=\"16\" font-size=\"14\">{}</text>",
        f.w,
        f.left,
        esc(&format!("{} ({}), seed {}: simulated vs real, capacity {}", p.scenario, p.profile, s.seed, p.capacity))
    );
    band(&mut out, &f, &s.sim_run.samples, p.capacity);
    grid(&mut out, &f);
    marks(&mut out, &f, s);
    lines(&mut out, &f, s);
    axis(&mut out, &f);
    out.push_str("</svg>\n");
    out
}

/// The band of ± [`BAND`] around the goal, shaded.
fn band(out: &mut String, f: &Frame, samples: &[Sample], cap: f64) {
    let goal = |p: &Sample| p.client_wants.min(cap);
    let upper = f.points(samples, |p| goal(p) * (1.0 + BAND));
    let lower: Vec<String> = samples
        .iter()
        .rev()
        .filter(|p| p.t <= f.t_max)
        .map(|p| format!("{:.1},{:.1}", f.x(p.t), f.y(goal(p) * (1.0 - BAND))))
        .collect();
    let _ = write!(
        out,
        "<polygon fill=\"{}\" stroke=\"none\" points=\"{upper} {}\"><title>the band: within {:.0} % of min(Σ wants, capacity)</title></polygon>",
        hex(BAND_FILL),
        lower.join(" "),
        100.0 * BAND
    );
}

fn grid(out: &mut String, f: &Frame) {
    for v in f.y_ticks() {
        let y = f.y(v);
        let _ = write!(
            out,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{}\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
            f.left,
            f.w - f.right,
            hex(GRID),
            f.left - 6.0,
            y + 4.0
        );
    }
}

/// Each mark's start: a thin line, its text on hover.
fn marks(out: &mut String, f: &Frame, s: &SeedComparison) {
    for m in &s.plan.marks {
        let x = f.x(m.t);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"0.7\" stroke-opacity=\"0.6\"><title>{:.0} s: {}</title></line>",
            f.top,
            f.bottom,
            hex(MARK),
            m.t,
            esc(&m.what)
        );
    }
}

/// The four lines and their legend.
fn lines(out: &mut String, f: &Frame, s: &SeedComparison) {
    let cap = s.plan.capacity;
    let (sim, real) = (&s.sim_run.samples, &s.real_run.samples);
    let capacity = format!(
        "{:.1},{:.1} {:.1},{:.1}",
        f.x(0.0),
        f.y(cap),
        f.x(f.t_max),
        f.y(cap)
    );
    let series = [
        (RED, "capacity", capacity, " stroke-width=\"1.5\""),
        (
            BLUE,
            "min(Σ wants, capacity)",
            f.points(sim, |p| p.client_wants.min(cap)),
            " stroke-width=\"1.5\" stroke-dasharray=\"4,3\"",
        ),
        (
            GREEN,
            "Σ has, simulated",
            f.points(sim, |p| p.client_has),
            " stroke-width=\"2.5\"",
        ),
        (
            ORANGE,
            "Σ has, real",
            f.points(real, |p| p.client_has),
            " stroke-width=\"1.2\"",
        ),
    ];
    for (i, (color, label, points, style)) in series.iter().enumerate() {
        let c = hex(*color);
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{c}\"{style} points=\"{points}\"/><text x=\"{:.1}\" y=\"40\" fill=\"{c}\">{}</text>",
            f.left + 200.0 * i as f64,
            esc(label)
        );
    }
}

fn axis(out: &mut String, f: &Frame) {
    let step = tick_step(f.t_max);
    let ticks = (0..=((f.t_max / step) as usize)).map(|i| i as f64 * step);
    for t in ticks {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            f.x(t),
            f.bottom + 16.0,
            fmt_t(t, step)
        );
    }
    let _ = write!(
        out,
        "<line x1=\"{l}\" x2=\"{l}\" y1=\"{t}\" y2=\"{b}\" stroke=\"black\"/><line x1=\"{l}\" x2=\"{r}\" y1=\"{b}\" y2=\"{b}\" stroke=\"black\"/><text x=\"{r}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\">blue band: the re-convergence band; grey lines: marks (hover)</text>",
        f.bottom + 32.0,
        l = f.left,
        r = f.w - f.right,
        t = f.top,
        b = f.bottom,
    );
}
