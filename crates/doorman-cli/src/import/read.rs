//! Reading an original Doorman config the way the original reads it: YAML
//! turned into JSON (`ghodss/yaml`) and decoded into its proto structs
//! (`encoding/json`). So field names match ignoring case (of two spellings
//! of one field, the one sorting last wins: the YAML passes through a Go
//! map written out with sorted keys), unknown fields and `null`s are
//! ignored, a number or boolean where text belongs becomes that text,
//! `kind` may be a name or a number, and any other type mismatch makes the
//! original refuse the whole file.
//!
//! The result is the templates as written ([`RawTemplate`]), every field
//! optional; what they mean is decided in `translate.rs`.
//!
//! Must not: judge values (ranges, the `*` entry) or do I/O.

use yaml_rust2::{Yaml, YamlLoader};

use super::scalar::{kind_of, scalar_text, yaml11_bool};
use super::{Finding, Findings, Level};

/// A template as the original decoded it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawTemplate {
    /// `identifier_glob`.
    pub glob: Option<String>,
    /// `capacity`.
    pub capacity: Option<f64>,
    /// `safe_capacity`.
    pub safe_capacity: Option<f64>,
    /// `description`.
    pub description: Option<String>,
    /// `algorithm`.
    pub algorithm: Option<RawAlgorithm>,
    /// Something in it could not be read (an error says what): its
    /// meaning is not judged further.
    pub unreadable: bool,
}

/// An algorithm as the original decoded it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawAlgorithm {
    /// `kind` as its enum number (names are mapped).
    pub kind: Option<i64>,
    /// `lease_length`, seconds.
    pub lease_length: Option<i64>,
    /// `refresh_interval`, seconds.
    pub refresh_interval: Option<i64>,
    /// `learning_mode_duration`, seconds.
    pub learning_mode_duration: Option<i64>,
    /// `parameters`: (name, value) as written.
    pub parameters: Vec<(Option<String>, Option<String>)>,
}

/// The algorithm kinds by enum number.
pub const KINDS: [&str; 4] = ["NO_ALGORITHM", "STATIC", "PROPORTIONAL_SHARE", "FAIR_SHARE"];

const TEMPLATE_FIELDS: [&str; 5] = [
    "identifier_glob",
    "capacity",
    "safe_capacity",
    "description",
    "algorithm",
];
const ALGORITHM_FIELDS: [&str; 5] = [
    "kind",
    "lease_length",
    "refresh_interval",
    "learning_mode_duration",
    "parameters",
];

/// Reads the YAML text; `None` when nothing can be read from it (the
/// error is in `out`).
pub fn read(text: &str, out: &mut Findings) -> Option<Vec<RawTemplate>> {
    let top = first_document(text, out)?;
    let mut cx = Cx {
        out,
        index: None,
        glob: None,
    };
    let mut items = None;
    for (field, value) in cx.fields(&top, &["resources"], "") {
        if field == "resources" {
            items = Some(value);
        }
    }
    let items = match items {
        None | Some(Yaml::Null) => return Some(Vec::new()),
        Some(Yaml::Array(items)) => items,
        Some(other) => {
            cx.error(
                "resources",
                format!("must be a list of templates, got {}", kind_of(other)),
            );
            return None;
        }
    };
    Some(
        items
            .iter()
            .enumerate()
            .map(|(i, item)| template(cx.out, i, item))
            .collect(),
    )
}

/// The first YAML document of `text`, a mapping (empty for an empty
/// text); `None` when there is none (the error is in `out`).
fn first_document(text: &str, out: &mut Findings) -> Option<Yaml> {
    let docs = match YamlLoader::load_from_str(text) {
        Ok(d) => d,
        Err(e) => {
            let hint = if e.to_string().contains("duplicated key") {
                " (the original keeps the last value; keep only the one you mean)"
            } else {
                ""
            };
            out.top(Level::Error, "yaml", format!("not valid YAML: {e}{hint}"));
            return None;
        }
    };
    if docs.len() > 1 {
        let why = format!(
            "{} YAML documents: only the first is read, as the original does",
            docs.len()
        );
        out.top(Level::Warning, "yaml", why);
    }
    match docs.into_iter().next() {
        None | Some(Yaml::Null) => Some(Yaml::Hash(Default::default())),
        Some(top @ Yaml::Hash(_)) => Some(top),
        Some(other) => {
            let why = format!(
                "must be a mapping with `resources:`, got {}",
                kind_of(&other)
            );
            out.top(Level::Error, "yaml", why);
            None
        }
    }
}

fn template(out: &mut Findings, index: usize, item: &Yaml) -> RawTemplate {
    let before = out.list.len();
    let mut t = template_fields(out, index, item);
    t.unreadable = out.list[before..].iter().any(|f| f.level == Level::Error);
    t
}

fn template_fields(out: &mut Findings, index: usize, item: &Yaml) -> RawTemplate {
    let mut cx = Cx {
        out,
        index: Some(index),
        glob: None,
    };
    let mut t = RawTemplate::default();
    if !matches!(item, Yaml::Hash(_)) {
        let why = match item {
            Yaml::Null => "is empty: the original's server crashes loading such a config".into(),
            other => format!("must be a mapping, got {}", kind_of(other)),
        };
        cx.error("resources", why);
        return t;
    }
    cx.glob = peek_glob(item);
    let fields = cx.fields(item, &TEMPLATE_FIELDS, "");
    if let Some((_, v)) = fields.iter().rev().find(|(f, _)| *f == "identifier_glob") {
        t.glob = cx.text("identifier_glob", v);
    }
    for (field, v) in fields {
        match field {
            "capacity" => t.capacity = cx.number(field, v),
            "safe_capacity" => t.safe_capacity = cx.number(field, v),
            "description" => t.description = cx.text(field, v),
            "algorithm" => t.algorithm = cx.algorithm(v),
            _ => {}
        }
    }
    t
}

/// The glob a template will be known by in findings (the
/// `identifier_glob` the original keeps, read quietly: [`Cx::text`] reports
/// on it).
fn peek_glob(item: &Yaml) -> Option<String> {
    let Yaml::Hash(map) = item else { return None };
    map.iter()
        .filter_map(|(k, v)| Some((scalar_text(k)?, v)))
        .filter(|(k, _)| k.eq_ignore_ascii_case("identifier_glob"))
        .max_by(|a, b| a.0.cmp(&b.0))
        .and_then(|(_, v)| scalar_text(v))
}

/// Where findings go while one template is read.
struct Cx<'a> {
    out: &'a mut Findings,
    index: Option<usize>,
    glob: Option<String>,
}

impl Cx<'_> {
    fn push(&mut self, level: Level, field: &str, message: String) {
        self.out.list.push(Finding {
            level,
            resource: self.index.map(|i| (i, self.glob.clone())),
            field: field.to_string(),
            message,
        });
    }

    fn error(&mut self, field: &str, message: String) {
        self.push(Level::Error, field, message);
    }

    /// The known fields of a mapping in order, each kept once (its last
    /// value); unknown, repeated and differently-cased names reported.
    fn fields<'y>(
        &mut self,
        map: &'y Yaml,
        known: &[&'static str],
        prefix: &str,
    ) -> Vec<(&'static str, &'y Yaml)> {
        let Yaml::Hash(map) = map else {
            return Vec::new();
        };
        // (field, name as written, value)
        let mut found: Vec<(&'static str, String, &'y Yaml)> = Vec::new();
        for (key, value) in map {
            let Some(name) = scalar_text(key) else {
                self.error(
                    &format!("{prefix}?"),
                    format!("a key must be text, got {}", kind_of(key)),
                );
                continue;
            };
            let field = known
                .iter()
                .find(|k| **k == name)
                .or_else(|| known.iter().find(|k| k.eq_ignore_ascii_case(&name)));
            let Some(&field) = field else {
                let why = format!(
                    "unknown field, ignored (as by the original); known: {}",
                    known.join(", ")
                );
                self.push(Level::Warning, &format!("{prefix}{name}"), why);
                continue;
            };
            if name != field {
                let why =
                    format!("read as `{field}`: the original matches field names ignoring case");
                self.push(Level::Note, &format!("{prefix}{name}"), why);
            }
            // The original goes through a Go map, written out with its keys
            // sorted: of two spellings, the one sorting last is decoded last.
            if let Some(pos) = found.iter().position(|(f, _, _)| *f == field) {
                let kept = found[pos].1.clone().max(name.clone());
                let why = format!(
                    "given as both {:?} and {name:?}: the original uses {kept:?} (the spelling \
                     that sorts last, as Go writes its map), and so does this",
                    found[pos].1
                );
                self.push(Level::Warning, &format!("{prefix}{field}"), why);
                if kept == found[pos].1 {
                    continue;
                }
                found.remove(pos);
            }
            found.push((field, name, value));
        }
        found.into_iter().map(|(f, _, v)| (f, v)).collect()
    }

    /// A text field; numbers and booleans become their text.
    fn text(&mut self, field: &str, v: &Yaml) -> Option<String> {
        match v {
            Yaml::Null => None,
            Yaml::String(s) => {
                if let Some(b) = yaml11_bool(s) {
                    let why = format!(
                        "{s:?}: if written without quotes, the original (YAML 1.1) read it as the \
                         boolean {b}, that is the text \"{b}\"; kept as {s:?} here"
                    );
                    self.push(Level::Warning, field, why);
                }
                Some(s.clone())
            }
            Yaml::Integer(_) | Yaml::Real(_) | Yaml::Boolean(_) => scalar_text(v),
            other => {
                self.error(field, format!("must be text, got {}", kind_of(other)));
                None
            }
        }
    }

    fn number(&mut self, field: &str, v: &Yaml) -> Option<f64> {
        let x = match v {
            Yaml::Null => return None,
            Yaml::Integer(i) => *i as f64,
            Yaml::Real(r) => r.parse::<f64>().unwrap_or(f64::NAN),
            other => {
                let why = format!(
                    "must be a number, got {}: the original refuses the file",
                    kind_of(other)
                );
                self.error(field, why);
                return None;
            }
        };
        if !x.is_finite() {
            self.error(
                field,
                format!("must be finite, got {x}: the original refuses the file"),
            );
            return None;
        }
        Some(x)
    }

    fn whole(&mut self, field: &str, v: &Yaml) -> Option<i64> {
        match v {
            Yaml::Integer(i) => Some(*i),
            Yaml::Real(r) => match r.parse::<f64>() {
                Ok(x) if x.fract() == 0.0 && x.abs() < 9.2e18 => Some(x as i64),
                _ => {
                    let why =
                        format!("must be a whole number, got {r}: the original refuses the file");
                    self.error(field, why);
                    None
                }
            },
            Yaml::Null => None,
            other => {
                let why = format!(
                    "must be a whole number, got {}: the original refuses the file",
                    kind_of(other)
                );
                self.error(field, why);
                None
            }
        }
    }

    fn kind(&mut self, v: &Yaml) -> Option<i64> {
        const FIELD: &str = "algorithm.kind";
        match v {
            Yaml::String(name) => match KINDS.iter().position(|k| k == name) {
                Some(n) => Some(n as i64),
                None => {
                    let why = format!(
                        "unknown kind {name:?} (known: {}): the original refuses the file",
                        KINDS.join(", ")
                    );
                    self.error(FIELD, why);
                    None
                }
            },
            Yaml::Integer(_) | Yaml::Real(_) => {
                let n = self.whole(FIELD, v)?;
                if i32::try_from(n).is_err() {
                    self.error(
                        FIELD,
                        format!("{n} is out of range: the original refuses the file"),
                    );
                    return None;
                }
                if let Some(name) = usize::try_from(n).ok().and_then(|i| KINDS.get(i)) {
                    self.push(
                        Level::Note,
                        FIELD,
                        format!("{n} read as {name}, as the original does"),
                    );
                }
                Some(n)
            }
            other => self.whole(FIELD, other),
        }
    }

    fn algorithm(&mut self, v: &Yaml) -> Option<RawAlgorithm> {
        match v {
            Yaml::Null => return None,
            Yaml::Hash(_) => {}
            other => {
                self.error(
                    "algorithm",
                    format!("must be a mapping, got {}", kind_of(other)),
                );
                return None;
            }
        }
        let mut a = RawAlgorithm::default();
        for (field, v) in self.fields(v, &ALGORITHM_FIELDS, "algorithm.") {
            let name = format!("algorithm.{field}");
            match field {
                "kind" => a.kind = self.kind(v),
                "lease_length" => a.lease_length = self.whole(&name, v),
                "refresh_interval" => a.refresh_interval = self.whole(&name, v),
                "learning_mode_duration" => a.learning_mode_duration = self.whole(&name, v),
                _ => a.parameters = self.parameters(v),
            }
        }
        Some(a)
    }

    fn parameters(&mut self, v: &Yaml) -> Vec<(Option<String>, Option<String>)> {
        let items = match v {
            Yaml::Array(items) => items,
            Yaml::Null => return Vec::new(),
            other => {
                let why = format!("must be a list of {{name, value}}, got {}", kind_of(other));
                self.error("algorithm.parameters", why);
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let prefix = format!("algorithm.parameters[{i}].");
            if !matches!(item, Yaml::Hash(_)) {
                let why = format!(
                    "must be a mapping with name and value, got {}",
                    kind_of(item)
                );
                self.error(&format!("algorithm.parameters[{i}]"), why);
                continue;
            }
            let (mut name, mut value) = (None, None);
            for (field, v) in self.fields(item, &["name", "value"], &prefix) {
                let text = self.text(&format!("{prefix}{field}"), v);
                *(if field == "name" {
                    &mut name
                } else {
                    &mut value
                }) = text;
            }
            out.push((name, value));
        }
        out
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
