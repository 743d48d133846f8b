//! `plan.json`: the schedule a run realised (every setting of a client's
//! wants and every mark, with the node or client it is about) and the tree
//! it ran on, so that a harness can replay the same hour on real
//! processes, and `doorman-sim compare` can read the capacity, settle,
//! duration and marks back.
//!
//! Must not: change the run or compute figures; it only describes what the
//! engine recorded.

use serde::{Deserialize, Serialize};

use crate::engine::{MarkKind, Sim};

/// What `plan.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The scenario's name.
    pub scenario: String,
    /// The profile (`ours`, `original`).
    pub profile: String,
    /// The seed.
    pub seed: u64,
    /// Simulated seconds.
    pub duration: u64,
    /// Seconds before the figures count (initial learning).
    pub settle: u64,
    /// The resource the clients use.
    pub resource: String,
    /// The root's capacity of the resource (the scenario's config).
    pub capacity: f64,
    /// Seconds until a lost master's successor is elected (scheduled
    /// events).
    pub reelection_s: u64,
    /// Tasks (replicas) per node.
    pub tasks: usize,
    /// Every node, parents first (the order of `nodes.csv`).
    pub nodes: Vec<PlanNode>,
    /// Every client, in the order `demand` indexes them.
    pub clients: Vec<PlanClient>,
    /// Whether `demand` holds every change (false for a run of more than
    /// [`crate::engine::WANTS_LOG_CLIENTS`] clients: then it is empty).
    #[serde(default = "yes")]
    pub demand_recorded: bool,
    /// `[t, client, wants]`: every setting of a client's wants in time
    /// order, from each client's initial wants at t = 0 on.
    pub demand: Vec<(f64, usize, f64)>,
    /// Every mark (mishap or scheduled event), in time order.
    pub marks: Vec<PlanMark>,
}

fn yes() -> bool {
    true
}

/// A node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanNode {
    /// `root`, `n1`, `n1.2`, …
    pub name: String,
    /// The parent's name (none for the root).
    pub parent: Option<String>,
    /// Depth (0 = root).
    pub depth: usize,
}

/// A client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanClient {
    /// Its id (`n1.1/c0`).
    pub id: String,
    /// The leaf node it asks.
    pub leaf: String,
    /// When it first asks, ms after the start (its refresh timer's phase
    /// at the start; a real run starts the client then).
    #[serde(default)]
    pub start_ms: u32,
}

/// The kind of a mark, without its depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// Clients' wants jump.
    Spike,
    /// A node cut off from its parent and its requesters.
    CutOff,
    /// A node loses its master until a new one is elected.
    MasterLost,
    /// A node holds an election.
    Election,
}

/// A mark: a mishap or scheduled event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanMark {
    /// Seconds since the start.
    pub t: f64,
    /// When the disturbance ended (`t` for an instant event).
    pub end: f64,
    /// Its kind.
    pub kind: PlanKind,
    /// The node it is about, if any.
    pub node: Option<String>,
    /// The client it is about (index into `clients`), if exactly one.
    pub client: Option<usize>,
    /// The node's depth, for a node's mark.
    pub depth: Option<usize>,
    /// What happened (`events.csv`'s text).
    pub what: String,
}

impl PlanMark {
    /// The engine's kind of this mark; `None` for a node's mark without
    /// its depth.
    pub fn mark_kind(&self) -> Option<MarkKind> {
        Some(match self.kind {
            PlanKind::Spike => MarkKind::Spike,
            PlanKind::CutOff => MarkKind::CutOff(self.depth?),
            PlanKind::MasterLost => MarkKind::MasterLost(self.depth?),
            PlanKind::Election => MarkKind::Election(self.depth?),
        })
    }
}

fn split(kind: MarkKind) -> (PlanKind, Option<usize>) {
    match kind {
        MarkKind::Spike => (PlanKind::Spike, None),
        MarkKind::CutOff(d) => (PlanKind::CutOff, Some(d)),
        MarkKind::MasterLost(d) => (PlanKind::MasterLost, Some(d)),
        MarkKind::Election(d) => (PlanKind::Election, Some(d)),
    }
}

impl Plan {
    /// The plan of a finished run with `seed`.
    pub fn of(sim: &Sim, seed: u64) -> Plan {
        let name = |i: usize| sim.nodes[i].name.clone();
        let nodes = sim.nodes.iter().map(|n| PlanNode {
            name: n.name.clone(),
            parent: n.parent.map(name),
            depth: n.depth,
        });
        let clients = sim
            .clients()
            .zip(sim.client_starts())
            .map(|((id, leaf, _), start_ms)| PlanClient {
                id: id.to_string(),
                leaf: name(leaf),
                start_ms,
            });
        let marks = sim.marks.iter().map(|m| {
            let (kind, depth) = split(m.kind);
            PlanMark {
                t: m.t,
                end: m.end,
                kind,
                node: m.node.map(name),
                client: m.client,
                depth,
                what: m.what.clone(),
            }
        });
        let s = &sim.scenario;
        let log = sim.wants_log.as_deref();
        Plan {
            scenario: s.name.clone(),
            profile: s.profile.clone(),
            seed,
            duration: s.duration,
            settle: s.settle,
            resource: s.resource.clone(),
            capacity: sim.capacity,
            reelection_s: s.reelection_s,
            tasks: s.tasks,
            nodes: nodes.collect(),
            clients: clients.collect(),
            demand_recorded: log.is_some(),
            demand: log
                .unwrap_or_default()
                .iter()
                .map(|w| (w.t, w.client, w.wants))
                .collect(),
            marks: marks.collect(),
        }
    }

    /// `plan.json`'s text: pretty, with each node, client, demand entry
    /// and mark on one line.
    pub fn to_json(&self) -> serde_json::Result<String> {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Layout::new(2));
        self.serialize(&mut ser)?;
        out.push(b'\n');
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// serde_json's pretty layout for the outer `lines` levels of nesting;
/// anything deeper on one line (`[3.0, 1, 14.2]`).
struct Layout {
    lines: usize,
    level: usize,
    has_value: bool,
}

impl Layout {
    fn new(lines: usize) -> Layout {
        Layout {
            lines,
            level: 0,
            has_value: false,
        }
    }

    /// Before an element: a line of its own, or a space after a comma.
    fn next<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        if self.level <= self.lines {
            w.write_all(b"\n")?;
            w.write_all("  ".repeat(self.level).as_bytes())
        } else if !first {
            w.write_all(b" ")
        } else {
            Ok(())
        }
    }

    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(c)
    }

    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value && self.level < self.lines {
            w.write_all(b"\n")?;
            w.write_all("  ".repeat(self.level).as_bytes())?;
        }
        w.write_all(c)
    }
}

impl serde_json::ser::Formatter for Layout {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.next(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.next(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_breaks_lines_down_to_its_depth_only() {
        let v = serde_json::json!({"a": [[1, 2], {"x": null}], "b": [], "c": {}});
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Layout::new(2));
        v.serialize(&mut ser).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\n  \"a\": [\n    [1, 2],\n    {\"x\": null}\n  ],\n  \"b\": [],\n  \"c\": {}\n}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }
}
