//! The launch lifecycle as rows: the states, one launch's row, the canonical `state.csv`
//! (bytes and SHA-256), and [`check_lifecycle`], the rule a verifier applies to it.
//!
//! Pure (no SQLite, no clock): the bench and the verifier share it.
//!
//! # The lifecycle rule
//! Every launch `idx` in `0..n_launches` has exactly one row, and no other row exists. A
//! row ends `DESTROYED`, with:
//! - `CREATED → RUNNING → DESTROYED`: `created_ns ≤ running_ns ≤ destroyed_ns`, all three
//!   stamped; any outcome.
//! - `CREATED → DESTROYED` (RUNNING skipped): only for a launch that failed before its VMM
//!   was spawned (the workspace clone, the agent socket, the spawn itself): its outcome is a
//!   failure, never [`OUTCOME_OK`]. A success must have run.
//!
//! `outcome` is [`OUTCOME_OK`] or a failure kind (`[a-z0-9_]+`, the row's `error_kind`
//! spelling); it is written with DESTROYED and required there. Launch ids are unique and
//! non-empty. Stamps are CLOCK_MONOTONIC ns (the clock of every host stamp).

use serde::{Deserialize, Serialize};

/// The journal settings the contract requires, as `environment.parity.journal` spells them
/// (SQLite's `journal_mode` and `synchronous` read back: WAL, FULL).
pub const JOURNAL: &str = "journal_mode=wal synchronous=2";

/// How `environment.parity.journal` spells SQLite's journal settings as read back.
pub fn journal(journal_mode: &str, synchronous: i64) -> String {
    format!("journal_mode={journal_mode} synchronous={synchronous}")
}

/// The outcome of a launch that succeeded.
pub const OUTCOME_OK: &str = "ok";
/// The file name of the exported lifecycle in a bundle.
pub const STATE_CSV: &str = "state.csv";
/// The canonical header of `state.csv` (the SQLite table's columns, in order).
pub const HEADER: [&str; 9] = [
    "idx",
    "launch_id",
    "state",
    "created_ns",
    "running_ns",
    "destroyed_ns",
    "tap",
    "image",
    "outcome",
];

/// Where a launch is in its lifecycle (the `state` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LaunchState {
    /// The row exists (committed before anything of the launch is made).
    Created,
    /// The VMM process was spawned.
    Running,
    /// The VMM was reaped (or never spawned) and the launch is over.
    Destroyed,
}

impl LaunchState {
    /// The column spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchState::Created => "CREATED",
            LaunchState::Running => "RUNNING",
            LaunchState::Destroyed => "DESTROYED",
        }
    }

    /// Parses the column spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATED" => Some(LaunchState::Created),
            "RUNNING" => Some(LaunchState::Running),
            "DESTROYED" => Some(LaunchState::Destroyed),
            _ => None,
        }
    }

    /// Whether `from → to` is a legal transition (`from` `None`: the row does not exist).
    pub fn legal(from: Option<LaunchState>, to: LaunchState) -> bool {
        matches!(
            (from, to),
            (None, LaunchState::Created)
                | (Some(LaunchState::Created), LaunchState::Running)
                | (Some(LaunchState::Created), LaunchState::Destroyed)
                | (Some(LaunchState::Running), LaunchState::Destroyed)
        )
    }
}

impl std::fmt::Display for LaunchState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One launch's row (the `launches` table, the `state.csv` line). Unset stamps and outcome
/// are `None` (SQL NULL, an empty CSV field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRow {
    pub idx: u64,
    pub launch_id: String,
    pub state: LaunchState,
    pub created_ns: Option<u64>,
    pub running_ns: Option<u64>,
    pub destroyed_ns: Option<u64>,
    pub tap: String,
    pub image: String,
    pub outcome: Option<String>,
}

/// Why `state.csv` could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("writing the lifecycle CSV")]
    Write(#[source] csv::Error),
    #[error("flushing the lifecycle CSV")]
    Flush(#[source] std::io::Error),
    #[error("reading the lifecycle CSV")]
    Read(#[source] csv::Error),
    #[error("the lifecycle CSV's header is {0:?}, not the canonical one")]
    Header(Vec<String>),
}

/// The canonical `state.csv` bytes of `rows`: [`HEADER`], then one line per row ordered by
/// `idx` (whatever order `rows` is in), `\n`-terminated, unset values empty. The same rows
/// give the same bytes, so the same digest.
pub fn csv_bytes(rows: &[LaunchRow]) -> Result<Vec<u8>, CsvError> {
    let mut sorted: Vec<&LaunchRow> = rows.iter().collect();
    sorted.sort_by_key(|r| r.idx);
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(HEADER).map_err(CsvError::Write)?;
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    for r in sorted {
        w.write_record([
            r.idx.to_string().as_str(),
            &r.launch_id,
            r.state.as_str(),
            &opt(r.created_ns),
            &opt(r.running_ns),
            &opt(r.destroyed_ns),
            &r.tap,
            &r.image,
            r.outcome.as_deref().unwrap_or(""),
        ])
        .map_err(CsvError::Write)?;
    }
    w.into_inner().map_err(|e| CsvError::Flush(e.into_error()))
}

/// Parses `state.csv` (as [`csv_bytes`] writes it) back into rows, in file order. A field
/// that does not parse is a finding of [`check_lifecycle`]'s caller's making: here it is an
/// error ([`CsvError::Read`]).
pub fn read_csv(bytes: &[u8]) -> Result<Vec<LaunchRow>, CsvError> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes);
    let header = r.headers().map_err(CsvError::Read)?.clone();
    if header.iter().ne(HEADER.iter().copied()) {
        return Err(CsvError::Header(header.iter().map(String::from).collect()));
    }
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(CsvError::Read)?;
        rows.push(parse_record(&rec).map_err(|m| {
            CsvError::Read(csv::Error::from(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("line {}: {m}", rec.position().map_or(0, |p| p.line())),
            )))
        })?);
    }
    Ok(rows)
}

fn parse_record(rec: &csv::StringRecord) -> Result<LaunchRow, String> {
    let field = |i: usize| rec.get(i).ok_or_else(|| format!("no field {}", HEADER[i]));
    let num = |i: usize| -> Result<Option<u64>, String> {
        match field(i)? {
            "" => Ok(None),
            s => s
                .parse()
                .map(Some)
                .map_err(|_| format!("{} `{s}` is not a whole number", HEADER[i])),
        }
    };
    if rec.len() != HEADER.len() {
        return Err(format!("{} fields, not {}", rec.len(), HEADER.len()));
    }
    let idx = num(0)?.ok_or("idx is empty")?;
    let st = field(2)?;
    let state = LaunchState::parse(st).ok_or_else(|| format!("state `{st}` is not a state"))?;
    Ok(LaunchRow {
        idx,
        launch_id: field(1)?.to_string(),
        state,
        created_ns: num(3)?,
        running_ns: num(4)?,
        destroyed_ns: num(5)?,
        tap: field(6)?.to_string(),
        image: field(7)?.to_string(),
        outcome: match field(8)? {
            "" => None,
            s => Some(s.to_string()),
        },
    })
}

/// What [`check_lifecycle`] finds wrong, one per fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleFinding {
    #[error("launch {idx} has no lifecycle row")]
    Missing { idx: u64 },
    #[error("lifecycle row {idx} is outside the campaign's launches 0..{n_launches}")]
    Unexpected { idx: u64, n_launches: u64 },
    #[error("launch {idx} has {count} lifecycle rows")]
    Duplicate { idx: u64, count: usize },
    #[error("launch {idx} ended {state}, not DESTROYED")]
    NotDestroyed { idx: u64, state: LaunchState },
    #[error("launch {idx} has no {stamp} stamp")]
    MissingStamp { idx: u64, stamp: &'static str },
    #[error("launch {idx} went DESTROYED without RUNNING yet its outcome is `ok`")]
    SkippedRunning { idx: u64 },
    #[error("launch {idx}: {later} ({later_ns}) is before {earlier} ({earlier_ns})")]
    Reversed {
        idx: u64,
        earlier: &'static str,
        earlier_ns: u64,
        later: &'static str,
        later_ns: u64,
    },
    #[error("launch {idx} is DESTROYED without an outcome")]
    NoOutcome { idx: u64 },
    #[error("launch {idx}'s outcome `{outcome}` is neither `ok` nor a failure kind")]
    BadOutcome { idx: u64, outcome: String },
    #[error("launch {idx} has an empty launch id")]
    EmptyLaunchId { idx: u64 },
    #[error("launch id `{launch_id}` names launches {first} and {second}")]
    DuplicateLaunchId {
        launch_id: String,
        first: u64,
        second: u64,
    },
}

/// Judges the lifecycle rows of a campaign of `n_launches` launches by the rule of the module
/// doc; empty when every launch's row is whole. Rows in any order. Pure.
pub fn check_lifecycle(rows: &[LaunchRow], n_launches: u64) -> Vec<LifecycleFinding> {
    use std::collections::BTreeMap;
    let mut out = Vec::new();
    let mut by_idx: BTreeMap<u64, Vec<&LaunchRow>> = BTreeMap::new();
    for r in rows {
        by_idx.entry(r.idx).or_default().push(r);
    }
    for idx in 0..n_launches {
        if !by_idx.contains_key(&idx) {
            out.push(LifecycleFinding::Missing { idx });
        }
    }
    let mut ids: BTreeMap<&str, u64> = BTreeMap::new();
    for (&idx, rs) in &by_idx {
        if idx >= n_launches {
            out.push(LifecycleFinding::Unexpected { idx, n_launches });
        }
        if rs.len() > 1 {
            out.push(LifecycleFinding::Duplicate {
                idx,
                count: rs.len(),
            });
        }
        for r in rs {
            check_row(r, &mut out);
            if r.launch_id.is_empty() {
                continue;
            }
            if let Some(&first) = ids.get(r.launch_id.as_str()) {
                out.push(LifecycleFinding::DuplicateLaunchId {
                    launch_id: r.launch_id.clone(),
                    first,
                    second: idx,
                });
            } else {
                ids.insert(&r.launch_id, idx);
            }
        }
    }
    out
}

fn check_row(r: &LaunchRow, out: &mut Vec<LifecycleFinding>) {
    let idx = r.idx;
    if r.launch_id.is_empty() {
        out.push(LifecycleFinding::EmptyLaunchId { idx });
    }
    if r.state != LaunchState::Destroyed {
        out.push(LifecycleFinding::NotDestroyed {
            idx,
            state: r.state,
        });
    }
    for (stamp, v) in [
        ("created_ns", r.created_ns),
        ("destroyed_ns", r.destroyed_ns),
    ] {
        if v.is_none() {
            out.push(LifecycleFinding::MissingStamp { idx, stamp });
        }
    }
    match r.outcome.as_deref() {
        None if r.state == LaunchState::Destroyed => out.push(LifecycleFinding::NoOutcome { idx }),
        None => {}
        Some(o) => {
            let kind = !o.is_empty()
                && o.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !kind {
                out.push(LifecycleFinding::BadOutcome {
                    idx,
                    outcome: o.to_string(),
                });
            }
        }
    }
    if r.running_ns.is_none()
        && r.state == LaunchState::Destroyed
        && r.outcome.as_deref() == Some(OUTCOME_OK)
    {
        out.push(LifecycleFinding::SkippedRunning { idx });
    }
    // Each present stamp is not before the present ones that come earlier in the lifecycle.
    let stamps = [
        ("created_ns", r.created_ns),
        ("running_ns", r.running_ns),
        ("destroyed_ns", r.destroyed_ns),
    ];
    for (i, &(later, later_ns)) in stamps.iter().enumerate() {
        let Some(later_ns) = later_ns else { continue };
        // The nearest earlier stamp that is present.
        if let Some(&(earlier, Some(earlier_ns))) =
            stamps[..i].iter().rev().find(|(_, v)| v.is_some())
        {
            if later_ns < earlier_ns {
                out.push(LifecycleFinding::Reversed {
                    idx,
                    earlier,
                    earlier_ns,
                    later,
                    later_ns,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;
