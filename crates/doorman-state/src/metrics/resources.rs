//! The series `/metrics` computes at each scrape from a stepwise core
//! snapshot, written straight into the text format (100 000 resources take
//! a few milliseconds this way; as labelled prometheus gauges rebuilt each
//! scrape they took far longer and far more memory):
//!
//! * per config template (label `template`, the identifier glob): capacity,
//!   has, wants, clients, resources in learning mode and in shadow mode,
//!   learning seconds left, live resources; with `--metrics-per-resource` the first gauges get a
//!   `resource` label too, for at most `max` resources, the rest summed per
//!   template under `resource="_other"`, so resource ids cannot explode the
//!   number of series;
//! * towards the parent, per template: asked per priority band and granted,
//!   and the seconds until the earliest upstream lease in use expires.
//!
//! Must not: read the core itself (it gets a snapshot) or keep state.

use std::collections::BTreeMap;

use doorman_core::server::ResourceGauge;

/// Which resource series to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResourceSeries {
    /// One series per template (the default).
    #[default]
    PerTemplate,
    /// One per resource, for at most this many resources (the rest summed
    /// per template under `resource="_other"`).
    PerResource(usize),
}

/// The label value of resources beyond the cap.
pub const OTHER: &str = "_other";

/// Sums over the resources of one series.
#[derive(Debug, Default, Clone)]
struct Sums {
    capacity: f64,
    has: f64,
    wants: f64,
    clients: f64,
    learning: f64,
    shadow: f64,
}

impl Sums {
    fn add(&mut self, g: &ResourceGauge) {
        self.capacity += g.capacity;
        self.has += g.has;
        self.wants += g.wants;
        self.clients += g.requesters as f64;
        self.learning += f64::from(u8::from(g.learning));
        self.shadow += f64::from(u8::from(g.shadow));
    }
}

/// What one template adds up to.
#[derive(Debug, Default)]
struct Template {
    sums: Sums,
    resources: f64,
    learning_left: f64,
    asked: BTreeMap<i64, f64>,
    granted: f64,
    upstream: bool,
}

/// Per-template figures of `gauges`, by glob.
fn by_template(gauges: &[ResourceGauge]) -> BTreeMap<&str, Template> {
    let mut out: BTreeMap<&str, Template> = BTreeMap::new();
    for g in gauges {
        let t = out.entry(g.template.as_str()).or_default();
        t.sums.add(g);
        t.resources += 1.0;
        if g.learning {
            t.learning_left = t.learning_left.max(g.learning_remaining);
        }
        if let Some(u) = &g.upstream {
            t.upstream = true;
            t.granted += u.granted;
            for (priority, wants) in &g.bands {
                *t.asked.entry(*priority).or_default() += wants;
            }
        }
    }
    out
}

/// Seconds until the earliest upstream lease of a resource in use expires
/// (0 if one has expired or never came), or `None` when no resource in use
/// depends on the parent.
pub fn parent_lease_left(gauges: &[ResourceGauge]) -> Option<f64> {
    gauges
        .iter()
        .filter(|g| g.requesters > 0)
        .filter_map(|g| g.upstream.as_ref())
        .map(|u| u.expires_in.unwrap_or(0.0).max(0.0))
        .min_by(f64::total_cmp)
}

/// A text-format writer: HELP/TYPE headers and samples.
pub struct Writer<'a> {
    out: &'a mut String,
    numbers: super::Numbers,
}

impl<'a> Writer<'a> {
    /// Appends to `out`.
    pub fn new(out: &'a mut String) -> Self {
        Writer {
            out,
            numbers: super::Numbers::default(),
        }
    }

    /// `# HELP` and `# TYPE … gauge`.
    pub fn header(&mut self, name: &str, help: &str) {
        for part in ["# HELP ", name, " ", help, "\n# TYPE ", name, " gauge\n"] {
            self.out.push_str(part);
        }
    }

    /// A gauge with one sample and no labels.
    pub fn gauge(&mut self, name: &str, help: &str, v: f64) {
        self.header(name, help);
        self.sample(name, &[], v);
    }

    /// One sample with its labels (values escaped here).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.out.push_str(name);
        for (i, (k, val)) in labels.iter().enumerate() {
            self.out.push_str(if i == 0 { "{" } else { "," });
            self.out.push_str(k);
            self.out.push_str("=\"");
            self.out.push_str(&super::escape_label(val));
            self.out.push('"');
        }
        if !labels.is_empty() {
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(super::sample(&mut self.numbers, v));
        self.out.push('\n');
    }
}

/// How a series reads its value from sums.
type SumValue = fn(&Sums) -> f64;

/// The gauges that may be per resource: name, help, value.
const SUMMED: [(&str, &str, SumValue); 6] = [
    (
        "doorman_server_resource_capacity",
        "Capacity being shared, summed over the template's live resources.",
        |s| s.capacity,
    ),
    (
        "doorman_server_resource_has",
        "Capacity handed out (sum of has).",
        |s| s.has,
    ),
    ("doorman_server_resource_wants", "Sum of wants.", |s| {
        s.wants
    }),
    (
        "doorman_server_resource_clients",
        "Requesters holding a lease.",
        |s| s.clients,
    ),
    (
        "doorman_server_resource_learning_mode",
        "Resources in learning mode.",
        |s| s.learning,
    ),
    (
        "doorman_server_resource_shadow",
        "Resources in shadow mode: granted as usual, enforced by nobody.",
        |s| s.shadow,
    ),
];

/// Appends every scrape-time resource series.
pub fn write(out: &mut String, gauges: &[ResourceGauge], series: ResourceSeries) {
    let templates = by_template(gauges);
    let mut w = Writer::new(out);
    match series {
        ResourceSeries::PerTemplate => write_per_template(&mut w, &templates),
        ResourceSeries::PerResource(max) => write_per_resource(&mut w, gauges, max),
    }
    write_template_figures(&mut w, &templates);
    write_parent(&mut w, &templates);
}

fn write_per_template(w: &mut Writer<'_>, templates: &BTreeMap<&str, Template>) {
    for (name, help, value) in SUMMED {
        w.header(name, help);
        for (glob, t) in templates {
            w.sample(name, &[("template", glob)], value(&t.sums));
        }
    }
}

fn write_per_resource(w: &mut Writer<'_>, gauges: &[ResourceGauge], max: usize) {
    let (shown, rest) = gauges.split_at(max.min(gauges.len()));
    let mut other: BTreeMap<&str, Sums> = BTreeMap::new();
    for g in rest {
        other.entry(g.template.as_str()).or_default().add(g);
    }
    for (name, help, value) in SUMMED {
        w.header(name, help);
        for g in shown {
            let mut one = Sums::default();
            one.add(g);
            let labels = [("template", g.template.as_str()), ("resource", &g.id)];
            w.sample(name, &labels, value(&one));
        }
        for (glob, sums) in &other {
            w.sample(
                name,
                &[("template", glob), ("resource", OTHER)],
                value(sums),
            );
        }
    }
}

fn write_template_figures(w: &mut Writer<'_>, templates: &BTreeMap<&str, Template>) {
    let name = "doorman_server_resources";
    w.header(name, "Live resources (with state) of the template.");
    for (glob, t) in templates {
        w.sample(name, &[("template", glob)], t.resources);
    }
    let name = "doorman_server_learning_seconds_left";
    w.header(
        name,
        "Most seconds of learning mode left among the template's resources (0: none learning).",
    );
    for (glob, t) in templates {
        w.sample(name, &[("template", glob)], t.learning_left);
    }
}

fn write_parent(w: &mut Writer<'_>, templates: &BTreeMap<&str, Template>) {
    let name = "doorman_server_parent_asked";
    w.header(
        name,
        "Capacity asked of the parent (sum of wants), per template and priority band.",
    );
    for (glob, t) in templates.iter().filter(|(_, t)| t.upstream) {
        for (priority, wants) in &t.asked {
            let p = priority.to_string();
            w.sample(name, &[("template", glob), ("priority", &p)], *wants);
        }
    }
    let name = "doorman_server_parent_granted";
    w.header(name, "Capacity the parent granted, per template.");
    for (glob, t) in templates.iter().filter(|(_, t)| t.upstream) {
        w.sample(name, &[("template", glob)], t.granted);
    }
}
