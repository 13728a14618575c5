//! A replay's verdict: a bundle run again from its own record (`truecold replay`), held to
//! the bundle it replays.
//!
//! On the **virtual clock** (the nested harness) a launch's figures are a function of what
//! the bundle records — the L0 QEMU, the L1 kernel, L1's seed, the guest artifacts, the VMM
//! and the plan — so the replay is held to the record **sample by sample**: every column of
//! `samples.csv` (boot ids and the parallel clock included), row by row, each difference
//! listed with its launch, its column and, for a nanosecond column, the difference in ns
//! ([`sample_equality`]). On a **wall clock** no two runs give the same nanoseconds: the
//! replay is judged by `compare`'s rule, the record as A and the replay as B
//! ([`judge_by_compare`]); so is an arm of an interleaved directory replayed alone, whose
//! launches are not the record's on any clock.
//!
//! Both sides are verdicts of `verify` (only valid ones are judged), and each side's rows
//! are compared as `verify` parsed them, written back in the one canonical form of
//! `samples.csv` ([`crate::csv`]): the columns compared are the writer's, every one of
//! them. A record of an earlier schema lacks some columns; those are named, and the rows are
//! compared on the columns both have.

use crate::compare::{compare_verified, CompareError, CompareOptions, Comparison};
use crate::csv::{write_schema_samples_to, CsvError};
use crate::fmt::escape_untrusted;
use crate::schema::{virtual_clock_differs, Clock, ResultJson, Sample};
use crate::verdict::Verdict;

/// Most differences the text lists (the JSON document lists every one).
pub const TEXT_LISTED: usize = 40;

/// One cell of `samples.csv` that differs between the record and the replay.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// The launch: the row's position (its `index` in a sequential campaign).
    pub launch: u64,
    /// The column.
    pub field: String,
    /// The recorded cell (empty: none); `None` when the record has no such row.
    pub recorded: Option<String>,
    /// The replayed cell; `None` when the replay has no such row.
    pub replayed: Option<String>,
    /// For a nanosecond column (`…_ns`) whose two cells are numbers: replayed − recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_ns: Option<i128>,
}

/// The record and the replay compared sample by sample ([`sample_equality`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SampleEquality {
    /// Rows of each side.
    pub rows_recorded: usize,
    pub rows_replayed: usize,
    /// The columns compared: those both sides' schemas have, in the writer's order.
    pub columns: Vec<String>,
    /// Columns only the record's schema has, and only the replay's.
    pub only_recorded: Vec<String>,
    pub only_replayed: Vec<String>,
    /// Every cell that differs, by launch then column; a row one side lacks is one
    /// difference per column.
    pub differences: Vec<Difference>,
}

impl SampleEquality {
    /// Every row of both sides equal in every column, and both sides of one schema.
    pub fn identical(&self) -> bool {
        self.rows_recorded == self.rows_replayed
            && self.differences.is_empty()
            && self.only_recorded.is_empty()
            && self.only_replayed.is_empty()
    }

    /// The launches with at least one difference.
    pub fn launches_differing(&self) -> usize {
        let mut l: Vec<u64> = self.differences.iter().map(|d| d.launch).collect();
        l.dedup();
        l.len()
    }
}

/// Why a replay cannot be judged.
#[derive(Debug, thiserror::Error)]
pub enum ReplayJudgeError {
    #[error("the {side} is not a valid bundle (verify it: only verified rows are compared)")]
    Invalid { side: &'static str },
    #[error("the record is on the {recorded} clock and the replay on the {replayed} clock")]
    Clock {
        recorded: &'static str,
        replayed: &'static str,
    },
    #[error("the replay ran on another virtual clock than the record's: {0}")]
    VirtualClock(String),
    #[error("writing the rows back in canonical form")]
    Csv(#[source] CsvError),
    #[error("comparing the record and the replay")]
    Compare(#[source] CompareError),
}

/// A replay judged.
#[derive(Debug)]
pub enum ReplayVerdict {
    /// The virtual clock: sample by sample.
    Virtual(SampleEquality),
    /// `compare`'s verdict, the record as A: on a wall clock, and for an arm of an
    /// interleaved directory replayed alone ([`judge_by_compare`]).
    Compared(Box<Comparison>),
}

impl ReplayVerdict {
    /// Whether the replay reproduced the record: every sample identical (virtual clock), or
    /// `compare`'s verdict is no regression (the replay not slower by its rule).
    pub fn reproduced(&self) -> bool {
        match self {
            ReplayVerdict::Virtual(e) => e.identical(),
            ReplayVerdict::Compared(c) => c.outcome == crate::compare::Outcome::NoRegression,
        }
    }

    /// The verdict as a person reads it.
    pub fn render_text(&self) -> String {
        match self {
            ReplayVerdict::Virtual(e) => render_equality(e),
            ReplayVerdict::Compared(c) => format!(
                "replay ({} clock): compare's verdict, the record as A, the replay as B:\n{}",
                c.clock.as_str(),
                c.render_text(false)
            ),
        }
    }

    /// The verdict as one JSON value (every difference listed).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            ReplayVerdict::Virtual(e) => json!({
                "clock": Clock::Virtual.as_str(),
                "rule": "sample-by-sample equality",
                "reproduced": e.identical(),
                "equality": e,
            }),
            ReplayVerdict::Compared(c) => json!({
                "clock": c.clock.as_str(),
                "rule": "compare (the record as A, the replay as B)",
                "reproduced": self.reproduced(),
                "comparison": c.render_json().ok()
                    .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok()),
            }),
        }
    }
}

/// Judges `replayed` against `recorded`, both verdicts of `verify` on one bundle each: on the
/// virtual clock sample by sample ([`sample_equality`]), on a wall clock by `compare` with
/// `o` (the record as A).
pub fn judge(
    recorded: &Verdict,
    replayed: &Verdict,
    o: &CompareOptions,
) -> Result<ReplayVerdict, ReplayJudgeError> {
    fn side<'v>(
        side: &'static str,
        v: &'v Verdict,
    ) -> Result<(&'v ResultJson, &'v [Sample]), ReplayJudgeError> {
        match (v.is_valid(), &v.result, &v.samples) {
            (true, Some(r), Some(s)) => Ok((r, s.as_slice())),
            _ => Err(ReplayJudgeError::Invalid { side }),
        }
    }
    let (ra, sa) = side("record", recorded)?;
    let (rb, sb) = side("replay", replayed)?;
    let (ca, cb) = (ra.contract.clock, rb.contract.clock);
    if ca != cb {
        return Err(ReplayJudgeError::Clock {
            recorded: ca.as_str(),
            replayed: cb.as_str(),
        });
    }
    match ca {
        Clock::Virtual => {
            if let Some(d) = virtual_clock_differs(&ra.environment, &rb.environment) {
                return Err(ReplayJudgeError::VirtualClock(d));
            }
            sample_equality((sa, ra.schema_version), (sb, rb.schema_version))
                .map(ReplayVerdict::Virtual)
                .map_err(ReplayJudgeError::Csv)
        }
        Clock::Wall => judge_by_compare(recorded, replayed, o),
    }
}

/// Judges `replayed` against `recorded` by `compare`'s rule with `o` (the record as A), on
/// either clock: what a wall clock allows, and what an arm of an interleaved directory run
/// alone allows (its launches are not the record's: they ran between no other arm's).
pub fn judge_by_compare(
    recorded: &Verdict,
    replayed: &Verdict,
    o: &CompareOptions,
) -> Result<ReplayVerdict, ReplayJudgeError> {
    compare_verified(recorded, replayed, o)
        .map(|c| ReplayVerdict::Compared(Box::new(c)))
        .map_err(ReplayJudgeError::Compare)
}

/// The rows of one side as `samples.csv` writes them: the header and each row's cells.
fn cells(samples: &[Sample], schema: u32) -> Result<(Vec<String>, Vec<Vec<String>>), CsvError> {
    let mut bytes = Vec::new();
    write_schema_samples_to(&mut bytes, samples, schema)?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes.as_slice());
    let header: Vec<String> = rdr
        .headers()
        .map_err(|source| CsvError::Read { line: 1, source })?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::with_capacity(samples.len());
    for (i, rec) in rdr.records().enumerate() {
        rows.push(
            rec.map_err(|source| CsvError::Read {
                line: i as u64 + 2,
                source,
            })?
            .iter()
            .map(str::to_string)
            .collect(),
        );
    }
    Ok((header, rows))
}

/// Compares two sides' rows, each given with its bundle's schema, cell by cell: every column
/// both schemas have, every row of either side (a row only one side has is a difference in
/// each column).
pub fn sample_equality(
    recorded: (&[Sample], u32),
    replayed: (&[Sample], u32),
) -> Result<SampleEquality, CsvError> {
    let (ha, ra) = cells(recorded.0, recorded.1)?;
    let (hb, rb) = cells(replayed.0, replayed.1)?;
    let columns: Vec<String> = hb.iter().filter(|c| ha.contains(c)).cloned().collect();
    let only_recorded = ha.iter().filter(|c| !hb.contains(c)).cloned().collect();
    let only_replayed = hb.iter().filter(|c| !ha.contains(c)).cloned().collect();
    let at = |h: &[String], c: &str| h.iter().position(|x| x == c);
    let mut differences = Vec::new();
    for launch in 0..ra.len().max(rb.len()) {
        let (a, b) = (ra.get(launch), rb.get(launch));
        for c in &columns {
            let va = a.and_then(|r| at(&ha, c).and_then(|i| r.get(i)));
            let vb = b.and_then(|r| at(&hb, c).and_then(|i| r.get(i)));
            if va == vb {
                continue;
            }
            let delta_ns = match (va, vb) {
                (Some(x), Some(y)) if c.ends_with("_ns") => x
                    .parse::<i128>()
                    .ok()
                    .zip(y.parse::<i128>().ok())
                    .map(|(x, y)| y - x),
                _ => None,
            };
            differences.push(Difference {
                launch: launch as u64,
                field: c.clone(),
                recorded: va.cloned(),
                replayed: vb.cloned(),
                delta_ns,
            });
        }
    }
    Ok(SampleEquality {
        rows_recorded: ra.len(),
        rows_replayed: rb.len(),
        columns,
        only_recorded,
        only_replayed,
        differences,
    })
}

/// The virtual clock's verdict as text: the outcome line, then each difference (at most
/// [`TEXT_LISTED`]).
fn render_equality(e: &SampleEquality) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let cols = e.columns.len();
    if e.identical() {
        let _ = writeln!(
            s,
            "replay: IDENTICAL on the virtual clock: {} samples, every one of {cols} columns \
             equal (boot ids included)",
            e.rows_recorded
        );
        return s;
    }
    let _ = writeln!(
        s,
        "replay: DIFFERS on the virtual clock: {} difference(s) in {} of {} launches \
         (record {} rows, replay {} rows; {cols} columns compared)",
        e.differences.len(),
        e.launches_differing(),
        e.rows_recorded.max(e.rows_replayed),
        e.rows_recorded,
        e.rows_replayed
    );
    for (what, c) in [
        ("only the record's schema has", &e.only_recorded),
        ("only the replay's schema has", &e.only_replayed),
    ] {
        if !c.is_empty() {
            let _ = writeln!(s, "  columns {what}: {}", c.join(", "));
        }
    }
    let show = |v: &Option<String>| match v {
        None => "(no row)".to_string(),
        Some(x) if x.is_empty() => "(empty)".to_string(),
        Some(x) => escape_untrusted(x),
    };
    for d in e.differences.iter().take(TEXT_LISTED) {
        let delta = d
            .delta_ns
            .map(|x| format!(" ({x:+} ns)"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  launch {} {}: {} → {}{delta}",
            d.launch,
            d.field,
            show(&d.recorded),
            show(&d.replayed)
        );
    }
    if e.differences.len() > TEXT_LISTED {
        let _ = writeln!(
            s,
            "  … {} more (--json lists every one)",
            e.differences.len() - TEXT_LISTED
        );
    }
    s
}

#[cfg(test)]
mod tests;
