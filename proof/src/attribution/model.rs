//! What an attribution is made of: the launches' lines ([`JSONL_FILE`]), the instrument
//! that measured them, the rows of the one timeline, and the limits on what is read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use truecold_proto::report::{Counters, ReportCore};

use crate::reports::ReportLine;

/// The attribution launches' lines.
pub const JSONL_FILE: &str = "attribution.jsonl";

/// The rows.
pub const CSV_FILE: &str = "attribution.csv";

/// The timeline.
pub const SVG_FILE: &str = "attribution.svg";

/// The shown launch's folded stacks (flamegraph.pl's format; [`super::profile`]): made for
/// launches whose VMM counted the samples it asked for (`requested`), never for an older
/// record.
pub const FOLDED_FILE: &str = "attribution.folded";

/// The shown launch's flame graph, drawn from [`FOLDED_FILE`]'s stacks.
pub const FLAME_FILE: &str = "attribution-flame.svg";

/// The reconciliation bound: the attribution launch's total may differ from the measured
/// p50 by at most 10 % (100,000 ppm) of that p50.
pub const RECONCILE_BOUND_PPM: u64 = 100_000;

/// Initcalls shown (the longest, by the kernel's own duration).
pub const TOP_INITCALLS: usize = 25;

/// Functions shown per vCPU in the flat profile (by samples; the rest as `[other]`).
pub const TOP_FUNCTIONS: usize = 20;

/// Functions coloured in the SVG's strips (by samples over all vCPUs; the rest grey).
pub const STRIP_COLOURS: usize = 10;

/// Most entries of a line's [`AttributionLine::functions`] (each one holds a sample).
pub const MAX_FUNCTIONS: usize = truecold_proto::rip::MAX_SAMPLES;

/// Most lines read from [`JSONL_FILE`].
pub const MAX_RUNS: usize = 1_000;

/// Longest line of [`JSONL_FILE`] (a trace of every initcall is a few hundred KiB).
pub const MAX_LINE: usize = 4 << 20;

/// The most bytes of [`JSONL_FILE`] read (verify and report).
pub const JSONL_MAX_BYTES: u64 = 64 << 20;

/// The note on a guest phase bounded by a record the kernel logged at printk time 0: it
/// logged it before its printk clock ran, so the record sits at that clock's zero, not at
/// when it was logged.
pub const PRINTK_ZERO_NOTE: &str =
    "printk time 0: logged before the kernel's printk clock ran; placed at that clock's zero";

/// The name of the one row of a [`CSV_FILE`] whose launches all failed.
pub const NO_ATTRIBUTION: &str = "no launch reached strict-ready";

/// The CSV's header.
pub const CSV_HEADER: [&str; 13] = [
    "lane", "name", "start_ns", "dur_ns", "io_in", "io_out", "mmio", "hlt", "shutdown", "other",
    "minflt", "majflt", "note",
];

/// What the attribution launches measure the boot with (`truecold run` / `truecold tune
/// --attribution-instrument`).
///
/// [`Instrument::default`] is what a campaign started today uses; what a record that names
/// no instrument means is a separate, fixed thing: [`Instrument::ABSENT`].
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Instrument {
    // Each variant's doc is its `--help` line: the words the bench adds are
    // `truecold_proto::cmdline::ATTRIBUTION_CMDLINE`.
    /// The guest's `initcall_debug` trace (`initcall_debug log_buf_len=4M
    /// truecold.attribution=1` added to its command line), which slows the boot it measures
    Initcall,
    /// Host-side sampling of each vCPU's RIP by the VMM; nothing changes in the guest
    #[default]
    Rip,
}

impl Instrument {
    /// Every instrument, in the order the CLI lists them.
    pub const ALL: [Instrument; 2] = [Instrument::Initcall, Instrument::Rip];

    /// What a record that asks for attribution launches but names no instrument means:
    /// `initcall`, the default of the writers that left the instrument out (of a
    /// `cmdline.txt` run line's `--attribution-instrument`, `tune.json`'s
    /// `invocation.options`, a phase plan's field). Every reader of an absent instrument
    /// resolves it to this, and every writer that makes attribution launches names the
    /// instrument, so a record reads as it was written whatever [`Instrument::default`]
    /// becomes.
    pub const ABSENT: Instrument = Instrument::Initcall;

    /// The CLI, JSON and command-line spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Instrument::Initcall => "initcall",
            Instrument::Rip => "rip",
        }
    }

    /// Parses [`Instrument::as_str`].
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|i| i.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not one of initcall, rip"))
    }

    /// A recorded instrument, [`Instrument::ABSENT`] when none was recorded.
    pub fn or_absent(recorded: Option<Instrument>) -> Self {
        recorded.unwrap_or(Self::ABSENT)
    }
}

impl std::fmt::Display for Instrument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What makes the attribution impossible.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AttributionError {
    #[error("{JSONL_FILE} line {line}: {why}")]
    BadLine { line: usize, why: String },
    #[error("{JSONL_FILE} has more than {MAX_RUNS} lines")]
    TooManyRuns,
    #[error("{JSONL_FILE} has no launch that reached strict-ready with a VMM report")]
    NoUsableRun,
    #[error("{JSONL_FILE}: the shown launch's RIP samples")]
    Rip(#[source] truecold_proto::rip::RipError),
}

/// One attribution launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributionLine {
    /// The launch as `reports.jsonl` would hold it (its index counts attribution launches).
    pub report: ReportLine,
    /// The bench's names for the initcall addresses the guest sent (a kernel without
    /// KALLSYMS prints `0x…`), read from the vmlinux symbol table; asserted by the bench.
    #[serde(default)]
    pub symbols: BTreeMap<String, String>,
    /// The functions the launch's RIP samples fall in (by start; `--attribution-instrument
    /// rip` only), read by the bench from the vmlinux symbol table; asserted by the bench.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<RipFunction>,
}

/// A guest kernel function: `start..end` (end exclusive) and its name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RipFunction {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// One launch's profile on the one clock ([`super::profile`]): its folded stacks, stack → ns
/// (stacks as `;`-joined frames, root first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub stacks: BTreeMap<String, u64>,
    /// Request → strict-ready, ns (the stacks' sum).
    pub total: u64,
    /// The sampling period, ns.
    pub period_ns: u64,
    /// Whether the samples carry call stacks.
    pub with_stacks: bool,
}

/// Which part of the timeline a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    Summary,
    Reconciliation,
    Host,
    Guest,
    Initcall,
    /// A vCPU's flat profile from RIP samples.
    Rip,
    /// The attribution launches' p50 against the measured p50.
    Overhead,
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Summary => "summary",
            Lane::Reconciliation => "reconciliation",
            Lane::Host => "host",
            Lane::Guest => "guest",
            Lane::Initcall => "initcall",
            Lane::Rip => "rip",
            Lane::Overhead => "overhead",
        }
    }
}

/// One row of [`CSV_FILE`]. Times are ns after the launch's request stamp, on the host clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub lane: Lane,
    pub name: String,
    pub start_ns: Option<i64>,
    pub dur_ns: Option<u64>,
    pub counters: Option<Counters>,
    pub note: String,
}

/// The attribution of one campaign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution {
    pub rows: Vec<Row>,
    /// Whether the shown launch's total is within [`RECONCILE_BOUND_PPM`] of the measured p50.
    pub represents: bool,
    /// The shown launch's RIP samples as the SVG draws them (`None` without samples).
    pub rip: Option<RipView>,
    /// The shown launch's index and profile on the one clock, when its samples carry
    /// `requested` counts ([`FOLDED_FILE`], [`FLAME_FILE`]).
    pub flame: Option<(usize, Profile)>,
}

/// What a RIP sample is shown as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// One of the [`RipView::legend`] functions.
    Func(usize),
    /// Another function.
    Other,
    /// No function holds the RIP (user space, or not in the table).
    NoSymbol,
    Halted,
    WaitingForStart,
}

/// The strips of the SVG: per vCPU, runs of consecutive samples shown alike, each
/// `(start, end, key)` in ns after the request (a sample covers one period from its time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RipView {
    pub legend: Vec<String>,
    pub strips: Vec<Vec<(i64, i64, Key)>>,
}

/// Generated files: (name, bytes).
pub type Files = Vec<(String, Vec<u8>)>;

/// Parses [`JSONL_FILE`] (bounded).
pub fn parse_lines(bytes: &[u8]) -> Result<Vec<AttributionLine>, AttributionError> {
    let mut out = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        if out.len() >= MAX_RUNS {
            return Err(AttributionError::TooManyRuns);
        }
        let bad = |why: String| AttributionError::BadLine { line: i + 1, why };
        if line.len() > MAX_LINE {
            return Err(bad(format!("longer than {MAX_LINE} bytes")));
        }
        out.push(serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?);
    }
    Ok(out)
}

pub(super) fn signed(t: u64, origin: u64) -> i64 {
    clamp_i64(i128::from(t) - i128::from(origin))
}

pub(super) fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// The launch's core, when it reached strict-ready with a VMM report.
pub(super) fn usable(l: &AttributionLine) -> Option<(ReportCore, u64)> {
    let mut core = l.report.core()?;
    core.stamps.request = Some(l.report.harness.request);
    core.stamps.intended = l.report.harness.intended;
    core.stamps.reaped = l.report.harness.reaped;
    let total = core.stamps.latency()?;
    core.liveness.verified.then_some((core, total))
}
