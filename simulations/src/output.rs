//! Writing a run's results: `timeseries.csv`, `nodes.csv`, `events.csv`, `plot.svg`,
//! `plot.png`, `summary.json`.
//!
//! Must not: compute figures (`summary.rs` does) or change the run.

use std::fmt::Write as _;
use std::path::Path;

use crate::engine::Sim;
use crate::summary::Summary;

/// `timeseries.csv`: time; per level capacity, Σ wants, Σ has; clients'
/// Σ wants and Σ has.
pub fn csv(sim: &Sim) -> String {
    let depth = sim.samples.first().map(|s| s.levels.len()).unwrap_or(1);
    let mut out = String::from("t");
    for d in 0..depth {
        let _ = write!(out, ",level{d}_capacity,level{d}_wants,level{d}_has");
    }
    out.push_str(",clients_wants,clients_has\n");
    for s in &sim.samples {
        let _ = write!(out, "{}", s.t);
        for (c, w, h) in &s.levels {
            let _ = write!(out, ",{c:.3},{w:.3},{h:.3}");
        }
        let _ = writeln!(out, ",{:.3},{:.3}", s.client_wants, s.client_has);
    }
    out
}

/// `nodes.csv`: per second and node (master's view): capacity, Σ wants of
/// its requesters, Σ has handed out. Empty while the node has no master.
pub fn nodes_csv(sim: &Sim) -> String {
    let mut out = String::from("t,node,capacity,wants,has\n");
    for s in &sim.samples {
        for (n, (c, w, h)) in sim.nodes.iter().zip(&s.nodes) {
            let _ = writeln!(out, "{},{},{c:.3},{w:.3},{h:.3}", s.t, n.name);
        }
    }
    out
}

/// `events.csv`: every mishap and scheduled event, with its time in
/// simulated seconds.
pub fn events_csv(sim: &Sim) -> String {
    let mut out = String::from("t,event\n");
    for m in &sim.marks {
        let _ = writeln!(out, "{},\"{}\"", m.t, m.what.replace('"', "\"\""));
    }
    out
}

/// What both plots show: geometry, axes, series and legend, computed once.
struct Chart {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    title: String,
    /// (value, y) of the horizontal grid lines.
    y_ticks: Vec<(f64, f64)>,
    /// (label, x) under the time axis.
    x_ticks: Vec<(String, f64)>,
    /// (x, description) of each mishap.
    marks: Vec<(f64, String)>,
    series: Vec<Series>,
}

/// One line of a chart: colour, legend label, points.
type Series = ([u8; 3], &'static str, Vec<(f64, f64)>);

impl Chart {
    fn of(sim: &Sim) -> Chart {
        let (w, h, left, right, top, bottom) = (1000.0, 420.0, 60.0, 20.0, 30.0, 40.0);
        let t_max = sim.scenario.duration as f64;
        let y_max = sim
            .samples
            .iter()
            .map(|s| s.client_wants.max(s.client_has).max(sim.capacity))
            .fold(1.0, f64::max)
            * 1.1;
        let x = |t: f64| left + (w - left - right) * t / t_max.max(1.0);
        let y = |v: f64| top + (h - top - bottom) * (1.0 - v / y_max);
        let clients = crate::summary::leaves(&sim.scenario.tree) * sim.scenario.clients_per_leaf;
        let line = |f: &dyn Fn(&crate::engine::Sample) -> f64| -> Vec<(f64, f64)> {
            sim.samples.iter().map(|p| (x(p.t), y(f(p)))).collect()
        };
        Chart {
            w,
            h,
            left,
            right,
            top,
            bottom,
            title: format!(
                "{} - capacity {}, {} clients",
                sim.scenario.name, sim.capacity, clients
            ),
            y_ticks: (0..=5)
                .map(|i| y_max * i as f64 / 5.0)
                .map(|v| (v, y(v)))
                .collect(),
            x_ticks: (0..=10)
                .map(|i| t_max * i as f64 / 10.0)
                .map(|t| (fmt_t(t), x(t)))
                .collect(),
            marks: sim.marks.iter().map(|m| (x(m.t), m.what.clone())).collect(),
            series: vec![
                (
                    [214, 39, 40],
                    "root capacity",
                    line(&|p| p.levels.first().map(|l| l.0).unwrap_or(0.0)),
                ),
                (
                    [31, 119, 180],
                    "clients' total wants",
                    line(&|p| p.client_wants),
                ),
                ([44, 160, 44], "clients' total has", line(&|p| p.client_has)),
            ],
        }
    }
}

fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// `plot.svg`: clients' total wants, clients' total has and the root's
/// capacity over time, mishaps marked (described on hover), like the design
/// doc's charts.
pub fn svg(sim: &Sim) -> String {
    let c = Chart::of(sim);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"{}\" y=\"18\" font-size=\"14\">{}</text>",
        c.w,
        c.h,
        c.left,
        esc(&c.title)
    );
    for (v, y) in &c.y_ticks {
        let _ = write!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
            c.left,
            c.w - c.right,
            c.left - 6.0,
            y + 4.0
        );
    }
    for (label, x) in &c.x_ticks {
        let _ = write!(
            s,
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            c.h - c.bottom + 16.0
        );
    }
    for (x, what) in &c.marks {
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#999\" stroke-dasharray=\"3,3\"><title>{}</title></line>",
            c.top,
            c.h - c.bottom,
            esc(what)
        );
    }
    for (i, (color, label, pts)) in c.series.iter().enumerate() {
        let p: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
            hex(*color),
            p.join(" ")
        );
        let lx = c.left + 10.0 + 200.0 * i as f64;
        let _ = write!(
            s,
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{label}</text>",
            lx + 20.0,
            c.top + 10.0,
            c.top + 10.0,
            hex(*color),
            lx + 25.0,
            c.top + 14.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// `plot.png`: the same chart as [`svg`], rasterised (mishaps as dashed
/// grey lines).
pub fn png(sim: &Sim) -> Vec<u8> {
    use crate::raster::Canvas;
    let c = Chart::of(sim);
    let mut cv = Canvas::new(c.w as usize, c.h as usize);
    let black = [0, 0, 0];
    cv.text(c.left, 8.0, &c.title, black);
    for (v, y) in &c.y_ticks {
        cv.line((c.left, *y), (c.w - c.right, *y), [229, 229, 229], 1, 0);
        let label = format!("{v:.0}");
        cv.text(
            c.left - 6.0 - Canvas::text_width(&label),
            y - 4.0,
            &label,
            black,
        );
    }
    for (label, x) in &c.x_ticks {
        cv.text(
            x - Canvas::text_width(label) / 2.0,
            c.h - c.bottom + 8.0,
            label,
            black,
        );
    }
    for (x, _) in &c.marks {
        cv.line((*x, c.top), (*x, c.h - c.bottom), [153, 153, 153], 1, 3);
    }
    for (i, (color, label, pts)) in c.series.iter().enumerate() {
        for pair in pts.windows(2) {
            cv.line(pair[0], pair[1], *color, 2, 0);
        }
        let lx = c.left + 10.0 + 200.0 * i as f64;
        cv.line((lx, c.top + 8.0), (lx + 20.0, c.top + 8.0), *color, 3, 0);
        cv.text(lx + 25.0, c.top + 4.0, label, black);
    }
    cv.png()
}

fn fmt_t(t: f64) -> String {
    if t >= 600.0 {
        format!("{:.0}m", t / 60.0)
    } else {
        format!("{t:.0}s")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes every output file into `dir`.
pub fn write_all(sim: &Sim, summary: &Summary, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("timeseries.csv"), csv(sim))?;
    std::fs::write(dir.join("events.csv"), events_csv(sim))?;
    std::fs::write(dir.join("nodes.csv"), nodes_csv(sim))?;
    std::fs::write(dir.join("plot.svg"), svg(sim))?;
    std::fs::write(dir.join("plot.png"), png(sim))?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(summary)? + "\n",
    )?;
    Ok(())
}
