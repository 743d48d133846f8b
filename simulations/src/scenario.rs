//! Scenario files (`simulations/scenarios/*.toml`): the tree, the clients'
//! demand, RPC delay and mishaps. Readable by a user writing their own:
//! every field is documented in `docs/simulation.md`.
//!
//! Must not: run anything; a bad scenario is an error naming the field.

use serde::Deserialize;

/// A whole scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (used for output rows).
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// Simulated seconds.
    pub duration: u64,
    /// Seconds excluded from the utilisation figure (initial learning).
    #[serde(default = "default_settle")]
    pub settle: u64,
    /// The root's resource configuration (server TOML format).
    pub config: String,
    /// The resource the clients use.
    pub resource: String,
    /// Fan-out per level below the root: `[3, 3]` = root → 3 regions → 9
    /// datacenters (the leaves). Empty: clients talk to the root.
    #[serde(default)]
    pub tree: Vec<usize>,
    /// Tasks (replicas) per node; one is master.
    #[serde(default = "one")]
    pub tasks: usize,
    /// Shards of each master's core, as `doorman server --core-shards`
    /// (default: the server's default on a 2-CPU host). Any count decides
    /// alike; the simulator drives the same sharded entry points.
    #[serde(default = "default_shards")]
    pub shards: usize,
    /// Clients per leaf node.
    pub clients_per_leaf: usize,
    /// RPC delay, milliseconds, uniform in [min, max].
    #[serde(default = "default_delay")]
    pub rpc_delay_ms: [u64; 2],
    /// Seconds until a new master is elected after the old one is lost.
    #[serde(default = "default_reelect")]
    pub reelection_s: u64,
    /// Holders stream (clients to their leaf, nodes to their parent) as
    /// our client library and servers do by default; `false`: everyone
    /// polls, as with the original Doorman.
    #[serde(default = "yes")]
    pub lease_stream: bool,
    /// Client demand.
    pub demand: Demand,
    /// Fixed events.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Random mishaps.
    #[serde(default)]
    pub mishaps: Option<Mishaps>,
    /// The profile parsed (`ours`, `original`): not a field of the file.
    #[serde(skip)]
    pub profile: String,
}

fn default_settle() -> u64 {
    60
}
fn one() -> usize {
    1
}
fn yes() -> bool {
    true
}
/// `doorman-server` `default_shards()` on 2 CPUs (the machine the
/// scenarios are measured on); fixed here so a run never depends on the
/// host it runs on.
fn default_shards() -> usize {
    8
}
fn default_delay() -> [u64; 2] {
    [1, 10]
}
fn default_reelect() -> u64 {
    10
}

/// How much each client wants and how it varies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demand {
    /// Initial wants of every client.
    pub initial: f64,
    /// Every this many seconds each client changes its wants…
    #[serde(default)]
    pub change_every: u64,
    /// …by a uniform random factor in [1 − change, 1 + change].
    #[serde(default)]
    pub change: f64,
}

/// A scheduled event. (No `deny_unknown_fields`: serde does not support it
/// together with the flattened, tagged `what`.)
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// When, in seconds.
    pub at: u64,
    /// What.
    #[serde(flatten)]
    pub what: EventKind,
}

/// What happens.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// `clients` clients (the first ones) set their wants to `wants`.
    Spike {
        /// How many clients.
        clients: usize,
        /// Their new wants.
        wants: f64,
    },
    /// A node's master dies; a new one is elected after `reelection_s`.
    MasterLost {
        /// Node name: "root", "n1", "n1.2", …
        node: String,
    },
    /// A node answers nothing until `until` seconds.
    Unreachable {
        /// Node name.
        node: String,
        /// When it comes back, in seconds.
        until: u64,
    },
}

/// A random mishap every `every` seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mishaps {
    /// Seconds between mishaps.
    pub every: u64,
    /// Wants added to one random client in a spike.
    pub spike: f64,
    /// Longest outage of a node, seconds.
    pub outage_max: u64,
    /// First mishap at this second (at least `every`).
    #[serde(default)]
    pub start: u64,
    /// How likely each kind of mishap is.
    #[serde(default)]
    pub weights: Weights,
    /// How long a lost master stays lost, seconds, uniform in [min, max]
    /// (default: `reelection_s`).
    #[serde(default)]
    pub master_lost_s: Option<[u64; 2]>,
}

/// Relative weights of the mishap kinds (a kind is drawn with probability
/// weight / Σ weights).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    /// A random client's wants grow by `spike` for good.
    pub spike: u64,
    /// A random node's job elects a random task at once (it may stay).
    pub election: u64,
    /// A random node's master crashes; an election after `master_lost_s`.
    pub master_lost: u64,
    /// A random node is cut off the network for 1..=`outage_max` s.
    pub unreachable: u64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            spike: 1,
            election: 0,
            master_lost: 1,
            unreachable: 1,
        }
    }
}

impl Weights {
    /// Σ weights (at least 1).
    pub fn total(&self) -> u64 {
        (self.spike + self.election + self.master_lost + self.unreachable).max(1)
    }
}

/// The profile a scenario file describes at its top level.
pub const OURS: &str = "ours";

/// Merges `over` into `base`: tables key by key, anything else replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

impl Scenario {
    /// Parses a scenario file in its own profile (`ours`).
    pub fn parse(text: &str) -> anyhow::Result<Scenario> {
        Scenario::parse_profile(text, OURS)
    }

    /// Parses a scenario file in `profile`: `ours` is the file's top level;
    /// any other is the top level with `[profiles.<profile>]` merged over
    /// it (tables key by key, other values replaced).
    pub fn parse_profile(text: &str, profile: &str) -> anyhow::Result<Scenario> {
        let mut table: toml::Table = toml::from_str(text)?;
        let profiles = match table.remove("profiles") {
            Some(toml::Value::Table(p)) => p,
            Some(_) => anyhow::bail!("profiles must be a table of tables"),
            None => toml::Table::new(),
        };
        if profile != OURS {
            match profiles.get(profile) {
                Some(toml::Value::Table(over)) => merge(&mut table, over.clone()),
                _ => anyhow::bail!("no [profiles.{profile}] in this scenario"),
            }
        }
        let mut s: Scenario = toml::Value::Table(table).try_into()?;
        s.profile = profile.to_string();
        if s.clients_per_leaf == 0 || s.tasks == 0 || s.duration == 0 {
            anyhow::bail!("clients_per_leaf, tasks and duration must be at least 1");
        }
        if s.rpc_delay_ms[0] > s.rpc_delay_ms[1] {
            anyhow::bail!("rpc_delay_ms must be [min, max] with min <= max");
        }
        doorman_core::config::Config::parse(&s.config, &format!("{} config", s.name))?;
        Ok(s)
    }
}
