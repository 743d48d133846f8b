//! Writing a run's results: `timeseries.csv`, `plot.svg`, `summary.json`.

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

/// `plot.svg`: clients' total wants, clients' total has and the root's
/// capacity over time, mishaps marked, like the design doc's charts.
pub fn svg(sim: &Sim) -> String {
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
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
         <text x=\"{left}\" y=\"18\" font-size=\"14\">{} — capacity {}, {} clients</text>",
        esc(&sim.scenario.name),
        sim.capacity,
        sim.samples.first().map(|_| crate::summary::leaves(&sim.scenario.tree) * sim.scenario.clients_per_leaf).unwrap_or(0)
    );
    // Axes and grid.
    for i in 0..=5 {
        let v = y_max * i as f64 / 5.0;
        let _ = write!(
            s,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
            w - right,
            left - 6.0,
            y(v) + 4.0,
            y0 = y(v)
        );
    }
    for i in 0..=10 {
        let t = t_max * i as f64 / 10.0;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(t),
            h - bottom + 16.0,
            fmt_t(t)
        );
    }
    for m in &sim.marks {
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{top}\" y2=\"{1}\" stroke=\"#999\" stroke-dasharray=\"3,3\"><title>{2}</title></line>",
            x(m.t),
            h - bottom,
            esc(&m.what)
        );
    }
    let line = |s: &mut String, color: &str, f: &dyn Fn(&crate::engine::Sample) -> f64| {
        let pts: Vec<String> = sim
            .samples
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.t), y(f(p))))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
            pts.join(" ")
        );
    };
    line(&mut s, "#d62728", &|p| {
        p.levels.first().map(|l| l.0).unwrap_or(0.0)
    });
    line(&mut s, "#1f77b4", &|p| p.client_wants);
    line(&mut s, "#2ca02c", &|p| p.client_has);
    let legend = [
        ("#d62728", "root capacity"),
        ("#1f77b4", "clients' total wants"),
        ("#2ca02c", "clients' total has"),
    ];
    for (i, (c, label)) in legend.iter().enumerate() {
        let lx = left + 10.0 + 170.0 * i as f64;
        let _ = write!(
            s,
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{c}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{label}</text>",
            lx + 20.0,
            top + 10.0,
            top + 10.0,
            lx + 25.0,
            top + 14.0
        );
    }
    s.push_str("</svg>\n");
    s
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
    std::fs::write(dir.join("plot.svg"), svg(sim))?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(summary)? + "\n",
    )?;
    Ok(())
}
