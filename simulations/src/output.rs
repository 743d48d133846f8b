//! Writing a run's results: `timeseries.csv`, `nodes.csv`, `upstream.csv`,
//! `events.csv`, `plot.svg`, `plot.png`, `summary.json`, `plan.json`
//! (`plan.rs`).
//!
//! Must not: compute figures (`summary.rs` does) or change the run.

use std::fmt::Write as _;
use std::path::Path;

use crate::engine::Sim;
use crate::plot::{Chart, Panel};
#[cfg(feature = "plot")]
use crate::plot::{GRID, MARK};
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

/// `upstream.csv`: every answer a node's master got from its parent:
/// seconds since the start, node, resource, capacity, and how long the
/// lease lasts from then (`None` for a run that logs none).
pub fn upstream_csv(sim: &Sim) -> Option<String> {
    let answers = sim.answers.as_ref()?;
    let mut out = String::from("t,node,resource,capacity,lasts_s\n");
    for a in answers {
        let (resource, capacity, lasts) = &a.grant;
        let node = &sim.nodes[a.node].name;
        let _ = writeln!(out, "{:.3},{node},{resource},{capacity:.3},{lasts:.3}", a.t);
    }
    Some(out)
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

/// `#rrggbb` of a colour.
pub(crate) fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// `plot.svg`: the chart of [`Chart`] (mishaps described on hover).
pub fn svg(sim: &Sim) -> String {
    let c = Chart::of(sim);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"{}\" y=\"16\" font-size=\"14\">{}</text><text x=\"{}\" y=\"32\" font-size=\"11\">{}</text>",
        c.w,
        c.h,
        c.left,
        esc(&c.title),
        c.left,
        esc(&c.legend)
    );
    for p in &c.panels {
        svg_panel(&mut s, &c, p);
    }
    for (label, x) in &c.x_ticks {
        let _ = write!(
            s,
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            c.axis_y + 16.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One panel of [`svg`]: its shading, y ticks, mishap marks and series.
fn svg_panel(s: &mut String, c: &Chart, p: &Panel) {
    let r = c.w - c.right;
    for &(x0, y0, x1, y1, col) in &p.shade {
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            x0.min(x1),
            y0.min(y1),
            (x1 - x0).abs(),
            (y1 - y0).abs(),
            hex(col)
        );
    }
    for (label, y) in &p.y_ticks {
        let _ = write!(
            s,
            "<line x1=\"{}\" x2=\"{r}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            c.left,
            c.left - 6.0,
            y + 4.0
        );
    }
    for (x, ch, what) in &c.marks {
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#787878\" stroke-dasharray=\"3,3\"><title>{}</title></line><text x=\"{x:.1}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{ch}</text>",
            p.top,
            p.bottom,
            esc(what),
            p.top - 2.0
        );
    }
    for (i, (color, label, pts)) in p.series.iter().enumerate() {
        let pts: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/><text x=\"{}\" y=\"{}\" fill=\"{}\">{label}</text>",
            hex(*color),
            pts.join(" "),
            c.left + 10.0 + 180.0 * i as f64,
            p.top + 14.0,
            hex(*color)
        );
    }
}

/// `plot.png`: the same chart as [`svg`], rasterised.
#[cfg(feature = "plot")]
pub fn png(sim: &Sim) -> Vec<u8> {
    use crate::raster::Canvas;
    let c = Chart::of(sim);
    let mut cv = Canvas::new(c.w as usize, c.h as usize);
    let black = [0, 0, 0];
    let r = c.w - c.right;
    cv.text(c.left, 6.0, &c.title, black);
    cv.text(c.left, 20.0, &c.legend, [90, 90, 90]);
    for p in &c.panels {
        for &(x0, y0, x1, y1, col) in &p.shade {
            cv.rect((x0, y0), (x1, y1), col);
        }
        for (label, y) in &p.y_ticks {
            cv.line((c.left, *y), (r, *y), GRID, 1, 0);
            cv.text(
                c.left - 6.0 - Canvas::text_width(label),
                y - 4.0,
                label,
                black,
            );
        }
        for (x, ch, _) in &c.marks {
            cv.line((*x, p.top), (*x, p.bottom), MARK, 1, 3);
            cv.text(x - 3.0, p.top - 9.0, &ch.to_string(), MARK);
        }
        for (i, (color, label, pts)) in p.series.iter().enumerate() {
            for pair in pts.windows(2) {
                cv.line(pair[0], pair[1], *color, 2, 0);
            }
            let lx = c.left + 10.0 + 180.0 * i as f64;
            cv.rect(
                (lx - 2.0, p.top + 4.0),
                (lx + 8.0 * label.len() as f64 + 2.0, p.top + 15.0),
                [255, 255, 255],
            );
            cv.text(lx, p.top + 6.0, label, *color);
        }
        cv.line((c.left, p.top), (c.left, p.bottom), black, 1, 0);
        cv.line((c.left, p.bottom), (r, p.bottom), black, 1, 0);
    }
    for (label, x) in &c.x_ticks {
        cv.line((*x, c.axis_y), (*x, c.axis_y + 4.0), black, 1, 0);
        cv.text(
            x - Canvas::text_width(label) / 2.0,
            c.axis_y + 8.0,
            label,
            black,
        );
    }
    cv.png()
}

/// `s` escaped for SVG text.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes every output file into `dir` (`plot.png` with the `plot`
/// feature).
pub fn write_all(sim: &Sim, summary: &Summary, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("timeseries.csv"), csv(sim))?;
    std::fs::write(dir.join("events.csv"), events_csv(sim))?;
    std::fs::write(dir.join("nodes.csv"), nodes_csv(sim))?;
    if let Some(csv) = upstream_csv(sim) {
        std::fs::write(dir.join("upstream.csv"), csv)?;
    }
    let plan = crate::plan::Plan::of(sim, summary.seed);
    std::fs::write(dir.join("plan.json"), plan.to_json()?)?;
    std::fs::write(dir.join("plot.svg"), svg(sim))?;
    #[cfg(feature = "plot")]
    std::fs::write(dir.join("plot.png"), png(sim))?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(summary)? + "\n",
    )?;
    Ok(())
}
