//! `compare.md`: per seed, a table of the figures of both runs against the
//! targets, re-convergence by kind of mark in both runs, and the verdict.
//!
//! Must not: compute figures or decide a target (`mod.rs`, `targets.rs`).

use std::fmt::Write as _;

use super::{Comparison, KindReconvergence, SeedComparison};

/// The whole report, as Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = format!(
        "# Simulated vs real\n\nsimulated: `{}`\nreal: `{}`\n",
        c.sim_dir.display(),
        c.real_dir.display()
    );
    for (what, seeds) in [("simulated", &c.only_sim), ("real", &c.only_real)] {
        if !seeds.is_empty() {
            let _ = writeln!(
                out,
                "\nseeds only the {what} directory has (not compared): {seeds:?}"
            );
        }
    }
    for s in &c.seeds {
        seed_section(&mut out, s);
    }
    let misses = c.misses();
    let _ = if misses.is_empty() {
        writeln!(
            out,
            "\n**verdict: every target met** ({} seed(s))",
            c.seeds.len()
        )
    } else {
        writeln!(
            out,
            "\n**verdict: {} target(s) missed**: {}",
            misses.len(),
            misses.join("; ")
        )
    };
    out
}

fn seed_section(out: &mut String, s: &SeedComparison) {
    let p = &s.plan;
    let _ = writeln!(
        out,
        "\n## Seed {}: {} ({}), capacity {}, settle {} s, {} s\n\nchart: `{}`\n",
        s.seed, p.scenario, p.profile, p.capacity, p.settle, p.duration, s.chart
    );
    out.push_str(
        "| figure | simulated | real | difference | target | ok |\n|---|---:|---:|---:|---:|:-:|\n",
    );
    for r in &s.rows {
        let ok = match r.ok {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {ok} |",
            r.figure,
            r.value(r.simulated),
            r.value(r.real),
            r.diff(),
            r.target.as_deref().unwrap_or("–")
        );
    }
    reconvergence(out, &s.sim.reconvergence, &s.real.reconvergence);
}

/// Re-convergence by kind, simulated beside real (the kinds are the same
/// marks in both: the simulated run's plan).
fn reconvergence(out: &mut String, sim: &[KindReconvergence], real: &[KindReconvergence]) {
    if sim.is_empty() {
        out.push_str("\nno marks: no re-convergence to compare\n");
        return;
    }
    out.push_str(
        "\nre-convergence after each mark's end (seconds, simulated / real):\n\n\
         | mark | count | median | p90 | worst |\n|---|---:|---:|---:|---:|\n",
    );
    for (s, r) in sim.iter().zip(real) {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} |",
            s.kind, s.marks, s.median_s, r.median_s, s.p90_s, r.p90_s, s.worst_s, r.worst_s
        );
    }
}
