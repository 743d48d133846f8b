//! Reading a run directory back: `timeseries.csv` (one row per second),
//! `nodes.csv` when present, and `plan.json` when present. A run is either
//! the simulator's (`output.rs` wrote it) or a real tree's, written by the
//! fault harness in the same formats; any other file in the directory
//! (`real.json`, plots) is ignored.
//!
//! Must not: compute figures (`summary.rs`, `compare/` do) or accept a
//! malformed file silently: every error names the file, the line and,
//! where there is one, the column.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::engine::Sample;
use crate::plan::Plan;

/// A run read back from its directory.
#[derive(Debug, Clone)]
pub struct Run {
    /// The directory.
    pub dir: PathBuf,
    /// `plan.json`, if the directory has one.
    pub plan: Option<Plan>,
    /// `timeseries.csv`'s rows; each sample's `nodes` from `nodes.csv`
    /// (empty without it), `per_client` empty.
    pub samples: Vec<Sample>,
}

/// A file that could not be read, or what is wrong in it.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be read.
    Io {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file's content is wrong at a line (1-based) and column (a CSV
    /// field's number, or a character's in JSON, 1-based).
    Bad {
        /// The file.
        file: PathBuf,
        /// The line.
        line: usize,
        /// The column, if the error has one.
        column: Option<usize>,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { file, source } => write!(f, "{}: {source}", file.display()),
            ReadError::Bad {
                file,
                line,
                column: Some(c),
                what,
            } => write!(f, "{}, line {line}, column {c}: {what}", file.display()),
            ReadError::Bad {
                file, line, what, ..
            } => write!(f, "{}, line {line}: {what}", file.display()),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Bad { .. } => None,
        }
    }
}

fn read(file: &Path) -> Result<String, ReadError> {
    std::fs::read_to_string(file).map_err(|source| ReadError::Io {
        file: file.to_path_buf(),
        source,
    })
}

/// Reads the run in `dir`: `timeseries.csv` (required), `plan.json` and
/// `nodes.csv` (each if present). Nodes are ordered as the plan lists
/// them, or without a plan in the order `nodes.csv` first names them.
pub fn read_run(dir: &Path) -> Result<Run, ReadError> {
    let plan_file = dir.join("plan.json");
    let plan = if plan_file.exists() {
        Some(read_plan(&plan_file)?)
    } else {
        None
    };
    let mut samples = read_timeseries(&dir.join("timeseries.csv"))?;
    let nodes_file = dir.join("nodes.csv");
    if nodes_file.exists() {
        let names: Vec<String> = plan
            .iter()
            .flat_map(|p| p.nodes.iter().map(|n| n.name.clone()))
            .collect();
        let text = read(&nodes_file)?;
        parse_nodes(&text, &nodes_file, &names, &mut samples)?;
    }
    Ok(Run {
        dir: dir.to_path_buf(),
        plan,
        samples,
    })
}

/// Reads `plan.json`.
pub fn read_plan(file: &Path) -> Result<Plan, ReadError> {
    serde_json::from_str(&read(file)?).map_err(|e| {
        let text = e.to_string();
        let what = text.split(" at line ").next().unwrap_or(&text).to_string();
        ReadError::Bad {
            file: file.to_path_buf(),
            line: e.line(),
            column: Some(e.column()),
            what,
        }
    })
}

/// Reads `timeseries.csv`.
pub fn read_timeseries(file: &Path) -> Result<Vec<Sample>, ReadError> {
    parse_timeseries(&read(file)?, file)
}

/// The rows of a CSV text as (line number, fields), blank lines skipped.
fn rows(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| (n, l.split(',').map(str::trim).collect()))
}

/// Builds [`ReadError::Bad`] for `file`.
fn bad(file: &Path, line: usize, column: Option<usize>, what: String) -> ReadError {
    ReadError::Bad {
        file: file.to_path_buf(),
        line,
        column,
        what,
    }
}

/// The number of tree levels a `timeseries.csv` header names, checking
/// every column's name.
fn levels_of(header: &[&str], file: &Path) -> Result<usize, ReadError> {
    let levels = header.len().saturating_sub(3) / 3;
    let mut want = vec!["t".to_string()];
    for d in 0..levels {
        for f in ["capacity", "wants", "has"] {
            want.push(format!("level{d}_{f}"));
        }
    }
    want.extend(["clients_wants".into(), "clients_has".into()]);
    if header.len() != want.len() {
        let what = format!(
            "the header has {} columns; expected t, level<d>_capacity, level<d>_wants, \
             level<d>_has per level, clients_wants, clients_has",
            header.len()
        );
        return Err(bad(file, 1, None, what));
    }
    match header.iter().zip(&want).position(|(h, w)| h != w) {
        Some(i) => {
            let what = format!("header {:?}, expected {:?}", header[i], want[i]);
            Err(bad(file, 1, Some(i + 1), what))
        }
        None => Ok(levels),
    }
}

/// Parses every field of a row as a finite number.
fn numbers(
    fields: &[&str],
    header: &[&str],
    (file, line): (&Path, usize),
) -> Result<Vec<f64>, ReadError> {
    if fields.len() != header.len() {
        let what = format!("{} fields, the header has {}", fields.len(), header.len());
        return Err(bad(file, line, None, what));
    }
    let parse = |(i, f): (usize, &&str)| {
        f.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| {
                let what = format!("{}: {f:?} is not a finite number", header[i]);
                bad(file, line, Some(i + 1), what)
            })
    };
    fields.iter().enumerate().map(parse).collect()
}

/// Parses `timeseries.csv`'s text (`file` names it in errors): one sample
/// per row, its time strictly after the previous row's.
pub fn parse_timeseries(text: &str, file: &Path) -> Result<Vec<Sample>, ReadError> {
    let mut rows = rows(text);
    let Some((_, header)) = rows.next() else {
        return Err(bad(file, 1, None, "empty file, expected a header".into()));
    };
    let levels = levels_of(&header, file)?;
    let mut samples: Vec<Sample> = Vec::new();
    for (line, fields) in rows {
        let x = numbers(&fields, &header, (file, line))?;
        if samples.last().is_some_and(|s| s.t >= x[0]) {
            let what = format!("t {} is not after the row before", x[0]);
            return Err(bad(file, line, Some(1), what));
        }
        let n = x.len();
        samples.push(Sample {
            t: x[0],
            levels: (0..levels)
                .map(|d| (x[1 + 3 * d], x[2 + 3 * d], x[3 + 3 * d]))
                .collect(),
            nodes: Vec::new(),
            client_wants: x[n - 2],
            client_has: x[n - 1],
            per_client: Vec::new(),
        });
    }
    Ok(samples)
}

/// Parses `nodes.csv`'s text into the samples' `nodes`: node `i` is
/// `names[i]`; a name not in `names` is an error if `names` was given,
/// else it is added. Rows at a time no sample has are ignored; a node
/// without a row at a sample's time counts 0.
pub fn parse_nodes(
    text: &str,
    file: &Path,
    names: &[String],
    samples: &mut [Sample],
) -> Result<(), ReadError> {
    const HEADER: [&str; 5] = ["t", "node", "capacity", "wants", "has"];
    let mut rows = rows(text);
    match rows.next() {
        Some((_, h)) if h == HEADER => {}
        _ => {
            let what = format!("expected the header {}", HEADER.join(","));
            return Err(bad(file, 1, None, what));
        }
    }
    let fixed = !names.is_empty();
    let mut index: HashMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let at: HashMap<u64, usize> = samples
        .iter()
        .enumerate()
        .map(|(i, s)| (s.t.to_bits(), i))
        .collect();
    let mut found = Vec::new();
    for (line, mut fields) in rows {
        let name = fields.get(1).copied().unwrap_or_default().to_string();
        if fields.len() > 1 {
            fields[1] = "0";
        }
        let x = numbers(&fields, &HEADER, (file, line))?;
        let next = index.len();
        let node = match index.get(&name) {
            Some(&i) => i,
            None if fixed => {
                let what = format!("node {name:?} is not in plan.json");
                return Err(bad(file, line, Some(2), what));
            }
            None => *index.entry(name).or_insert(next),
        };
        if let Some(&s) = at.get(&x[0].to_bits()) {
            found.push((s, node, (x[2], x[3], x[4])));
        }
    }
    for s in samples.iter_mut() {
        s.nodes = vec![(0.0, 0.0, 0.0); index.len()];
    }
    for (s, node, row) in found {
        samples[s].nodes[node] = row;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: &str = "t,level0_capacity,level0_wants,level0_has,clients_wants,clients_has\n\
                      0,500.000,0.000,0.000,630.000,0.000\n\
                      1,500.000,630.000,480.000,630.000,470.500\n";

    #[test]
    fn a_timeseries_reads_back_into_samples() {
        let s = parse_timeseries(TS, Path::new("timeseries.csv")).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].t, 1.0);
        assert_eq!(s[1].levels, vec![(500.0, 630.0, 480.0)]);
        assert_eq!((s[1].client_wants, s[1].client_has), (630.0, 470.5));
    }

    #[test]
    fn errors_name_the_file_line_and_column() {
        let text = TS.replace("470.500", "x");
        let e = parse_timeseries(&text, Path::new("r/timeseries.csv")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "r/timeseries.csv, line 3, column 6: clients_has: \"x\" is not a finite number"
        );
        let text = TS.replace("1,500.000,630", "0,500.000,630");
        let e = parse_timeseries(&text, Path::new("f")).unwrap_err();
        assert!(e.to_string().starts_with("f, line 3, column 1: t 0"), "{e}");
        let text = TS.replace("level0_has", "level0_had");
        let e = parse_timeseries(&text, Path::new("f")).unwrap_err();
        assert!(e.to_string().starts_with("f, line 1, column 4:"), "{e}");
        let text = TS.replace(",0.000\n1", "\n1");
        let e = parse_timeseries(&text, Path::new("f")).unwrap_err();
        assert_eq!(e.to_string(), "f, line 2: 5 fields, the header has 6");
    }

    #[test]
    fn nodes_follow_the_names_given_or_their_first_appearance() {
        let mut s = parse_timeseries(TS, Path::new("f")).unwrap();
        let nodes = "t,node,capacity,wants,has\n1,n0,5,6,7\n1,root,1,2,3\n9,root,0,0,0\n";
        let names = ["root".to_string(), "n0".to_string()];
        parse_nodes(nodes, Path::new("f"), &names, &mut s).unwrap();
        assert_eq!(s[0].nodes, vec![(0.0, 0.0, 0.0); 2]);
        assert_eq!(s[1].nodes, vec![(1.0, 2.0, 3.0), (5.0, 6.0, 7.0)]);
        parse_nodes(nodes, Path::new("f"), &[], &mut s).unwrap();
        assert_eq!(s[1].nodes, vec![(5.0, 6.0, 7.0), (1.0, 2.0, 3.0)]);
        let e = parse_nodes(nodes, Path::new("f"), &names[..1], &mut s).unwrap_err();
        assert_eq!(
            e.to_string(),
            "f, line 2, column 2: node \"n0\" is not in plan.json"
        );
    }
}
