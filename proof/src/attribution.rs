//! Attribution: where one boot's time goes, on one clock (pure).
//!
//! An attribution campaign (`truecold run … --attribution K`) boots K more times after the
//! measured rows, never a measured row, measured by an [`Instrument`]: `rip` (the default)
//! has the VMM sample each vCPU's RIP from outside the guest; `initcall` adds
//! [`truecold_proto::cmdline::ATTRIBUTION_CMDLINE`] to the guest's command line
//! (`initcall_debug` and the larger log buffer change the boot). Each launch is one line of
//! [`JSONL_FILE`] ([`AttributionLine`]: the launch's `reports.jsonl`-style line and the
//! bench's symbol map). From those lines and the measured rows this module makes
//! [`CSV_FILE`] and [`SVG_FILE`]; `verify` recomputes both byte for byte ([`check_bundle`])
//! and holds the lines to the instrument the campaign's record asks for
//! ([`instrument_disagreements`]).
//!
//! # One timeline
//! - Host stages: the representative launch's stamps through the one tiling rule, each with
//!   the VMM's exits by reason and page faults over the same span
//!   (`truecold_proto::report::Accounting::stages`). Times are ns after its request stamp.
//! - Guest clock → host clock: the guest reads its CLOCK_MONOTONIC (`t_ready_ns` of its
//!   record) right before it writes the ready doorbell, whose VM exit the VMM stamps
//!   (`ready_doorbell`); `offset = ready_doorbell − t_ready_ns` (the doorbell's own exit cost,
//!   a few µs, is the error).
//! - Kernel log → guest clock: guest-init wrote one line to `/dev/kmsg` right after reading
//!   its monotonic time (`ksync`), so `mono = printk_us × 1000 − (kmsg_us × 1000 − mono_ns)`
//!   (µs resolution). Records logged before the kernel's printk clock ran carry time 0
//!   ([`PRINTK_ZERO_NOTE`]); the guest lane starts at the host's `first_run`, so the phase
//!   from it to the first kernel mark holds that early boot.
//!
//! # RIP samples (`--attribution-instrument rip`)
//! When the launches were sampled by the VMM (`truecold_proto::rip`: no guest-side
//! instrumentation), the shown launch's samples give a flat profile per vCPU
//! ([`Lane::Rip`] rows): each function's sampled time is its samples × the period (an
//! estimate: the function held the vCPU at those instants), halted samples (the guest's
//! idle) and an AP's samples before its start apart, the functions past the top
//! [`TOP_FUNCTIONS`] together. The bench names each RIP's function from vmlinux's symbol
//! table ([`AttributionLine::functions`]). The samples are on the host clock already: the
//! SVG draws one strip per vCPU, coloured by function, on the timeline of the host stages.
//! The [`Lane::Overhead`] row is the attribution launches' p50 against the measured rows'
//! p50: what the sampling cost the boot.
//!
//! # Representative launch and reconciliation
//! The launch shown is the successful one whose request → strict-ready is the nearest-rank
//! median of the successful launches (lowest index among equals). Its total is compared with
//! the measured rows' p50: within [`RECONCILE_BOUND_PPM`] the CSV says
//! `represents the measured boot`, else `does not represent the measured boot`.

use std::collections::BTreeMap;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use truecold_proto::measure::{Stage, StageKind};
use truecold_proto::report::{Counters, ReportCore};

use crate::reports::ReportLine;
use crate::schema::Sample;
use crate::stats::percentile_sorted;

/// The attribution launches' lines.
pub const JSONL_FILE: &str = "attribution.jsonl";
/// The rows.
pub const CSV_FILE: &str = "attribution.csv";
/// The timeline.
pub const SVG_FILE: &str = "attribution.svg";
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
/// The note on a guest phase bounded by a record the kernel logged at printk time 0: it
/// logged it before its printk clock ran, so the record sits at that clock's zero, not at
/// when it was logged.
pub const PRINTK_ZERO_NOTE: &str =
    "printk time 0: logged before the kernel's printk clock ran; placed at that clock's zero";
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

/// The launch's core, when it reached strict-ready with a VMM report.
fn usable(l: &AttributionLine) -> Option<(ReportCore, u64)> {
    let mut core = l.report.core()?;
    core.stamps.request = Some(l.report.harness.request);
    core.stamps.intended = l.report.harness.intended;
    core.stamps.reaped = l.report.harness.reaped;
    let total = core.stamps.latency()?;
    core.liveness.verified.then_some((core, total))
}

fn ppm_delta(a: u64, p50: u64) -> u64 {
    if p50 == 0 {
        return u64::MAX;
    }
    let d = u128::from(a.abs_diff(p50)) * 1_000_000 / u128::from(p50);
    u64::try_from(d).unwrap_or(u64::MAX)
}

/// From the attribution launches and the measured rows, the rows of the attribution.
pub fn attribute(
    lines: &[AttributionLine],
    measured: &[Sample],
) -> Result<Attribution, AttributionError> {
    let runs: Vec<(usize, ReportCore, u64)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| usable(l).map(|(c, t)| (i, c, t)))
        .collect();
    let mut totals: Vec<u64> = runs.iter().map(|r| r.2).collect();
    totals.sort_unstable();
    let median = percentile_sorted(&totals, 50, 100).ok_or(AttributionError::NoUsableRun)?;
    let (idx, core, total) = runs
        .into_iter()
        .find(|r| r.2 == median)
        .ok_or(AttributionError::NoUsableRun)?;
    let symbols = &lines[idx].symbols;
    let mut measured_ok: Vec<u64> = measured
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| s.latency_ns)
        .collect();
    measured_ok.sort_unstable();
    let p50 = percentile_sorted(&measured_ok, 50, 100);
    let delta = p50.map(|p| ppm_delta(total, p));
    let represents = delta.is_some_and(|d| d <= RECONCILE_BOUND_PPM);
    let rip = core.rip_samples.clone();

    let mut rows = vec![
        Row {
            lane: Lane::Summary,
            name: "attribution_total".into(),
            start_ns: Some(0),
            dur_ns: Some(total),
            counters: None,
            note: format!(
                "request to strict-ready of attribution launch {idx} (the median of {} that \
                 reached strict-ready, of {})",
                totals.len(),
                lines.len()
            ),
        },
        Row {
            lane: Lane::Summary,
            name: "measured_p50".into(),
            start_ns: None,
            dur_ns: p50,
            counters: None,
            note: format!(
                "request to strict-ready p50 of the {} successful measured rows",
                measured_ok.len()
            ),
        },
        Row {
            lane: Lane::Reconciliation,
            name: if represents {
                "represents the measured boot".into()
            } else {
                "does not represent the measured boot".into()
            },
            start_ns: None,
            dur_ns: None,
            counters: None,
            note: match delta {
                Some(d) => {
                    format!("|total - p50| = {d} ppm of p50; bound {RECONCILE_BOUND_PPM} ppm")
                }
                None => format!("no measured success to compare; bound {RECONCILE_BOUND_PPM} ppm"),
            },
        },
    ];

    // Host stages and their counters, over the same spans.
    let st = &core.stamps;
    let origin = st.origin().unwrap_or(0);
    let times = st.tile();
    let counters: BTreeMap<Stage, Counters> = core
        .accounting
        .as_ref()
        .map(|a| {
            a.stages(st)
                .into_iter()
                .map(|s| (s.stage, s.counters))
                .collect()
        })
        .unwrap_or_default();
    for (stage, span) in Stage::ALL.iter().zip(st.spans()) {
        if stage.kind() == StageKind::Guest {
            continue;
        }
        let (Some((a, _)), Some(d)) = (span, times.get(*stage)) else {
            continue;
        };
        let start = st.get(a).map(|t| signed(t, origin));
        rows.push(Row {
            lane: Lane::Host,
            name: stage.name().into(),
            start_ns: start,
            dur_ns: Some(d),
            counters: counters.get(stage).copied(),
            note: if stage.kind() == StageKind::Post {
                "after strict-ready".into()
            } else {
                String::new()
            },
        });
    }

    // Guest phases on the host clock.
    if let (Some(rec), Some(ready)) = (&core.guest_record, st.ready_doorbell) {
        // host = mono + offset; offset = ready_doorbell − t_ready_ns.
        let offset = i128::from(ready) - i128::from(rec.t_ready_ns);
        let host = |mono: i128| clamp_i64(mono + offset - i128::from(origin));
        // (name, host time, note): the guest lane's points, in time order.
        let mut points: Vec<(String, i64, &str)> = Vec::new();
        if let Some(f) = st.first_run {
            points.push(("first_run".into(), signed(f, origin), ""));
        }
        let mut calls = Vec::new();
        if let Some(tr) = &core.guest_trace {
            if let Some(sync) = tr.sync {
                let k = i128::from(sync.kmsg_us) * 1000 - i128::from(sync.mono_ns);
                let printk = |us: u64| host(i128::from(us) * 1000 - k);
                for m in &tr.marks {
                    let note = if m.t_us == 0 { PRINTK_ZERO_NOTE } else { "" };
                    points.push((format!("kernel:{}", m.name), printk(m.t_us), note));
                }
                for c in &tr.initcalls {
                    calls.push((c, printk(c.start_us)));
                }
                if sync.truncated {
                    rows.push(Row {
                        lane: Lane::Summary,
                        name: "trace_truncated".into(),
                        start_ns: None,
                        dur_ns: None,
                        counters: None,
                        note: "the guest stopped reading /dev/kmsg at a bound".into(),
                    });
                }
            }
        }
        points.push(("init_start".into(), host(i128::from(rec.t_init_ns)), ""));
        points.push(("ready".into(), host(i128::from(rec.t_ready_ns)), ""));
        points.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        for w in points.windows(2) {
            rows.push(Row {
                lane: Lane::Guest,
                name: format!("{}..{}", w[0].0, w[1].0),
                start_ns: Some(w[0].1),
                dur_ns: Some(w[1].1.abs_diff(w[0].1)),
                counters: None,
                note: [w[0].2, w[1].2]
                    .iter()
                    .copied()
                    .find(|n| !n.is_empty())
                    .unwrap_or("")
                    .to_string(),
            });
        }
        calls.sort_by(|a, b| {
            b.0.dur_us
                .cmp(&a.0.dur_us)
                .then(a.1.cmp(&b.1))
                .then_with(|| a.0.func.cmp(&b.0.func))
        });
        for (c, start) in calls.into_iter().take(TOP_INITCALLS) {
            let name = symbols
                .get(&c.func)
                .cloned()
                .unwrap_or_else(|| c.func.clone());
            rows.push(Row {
                lane: Lane::Initcall,
                name,
                start_ns: Some(start),
                dur_ns: Some(c.dur_us.saturating_mul(1000)),
                counters: None,
                note: format!("ret {}", c.ret),
            });
        }
    }
    let rip = match rip {
        None => None,
        Some(rs) => {
            rows.push(overhead_row(median, p50, totals.len(), measured_ok.len()));
            let funcs = function_index(&lines[idx].functions)?;
            Some(rip_rows(&rs, &funcs, origin, &mut rows)?)
        }
    };
    Ok(Attribution {
        rows,
        represents,
        rip,
    })
}

/// The overhead row: the attribution launches' p50 (`attr_p50`, of `k`) against the
/// measured rows' p50 (of `m`).
fn overhead_row(attr_p50: u64, p50: Option<u64>, k: usize, m: usize) -> Row {
    let note = match p50 {
        Some(p) => {
            let d = i128::from(attr_p50) - i128::from(p);
            let ppm = if p == 0 {
                0
            } else {
                d * 1_000_000 / i128::from(p)
            };
            format!(
                "attribution p50 - measured p50 = {d:+} ns ({ppm:+} ppm of p50), {k} sampled \
                 launches against {m} measured rows: what the sampling cost the boot"
            )
        }
        None => format!("no measured success to compare ({k} sampled launches)"),
    };
    Row {
        lane: Lane::Overhead,
        name: "sampling_overhead".into(),
        start_ns: None,
        dur_ns: Some(attr_p50),
        counters: None,
        note,
    }
}

/// The line's functions, sorted by start, checked: bounded, `start < end`, no overlap.
fn function_index(f: &[RipFunction]) -> Result<Vec<&RipFunction>, AttributionError> {
    let bad = |why: String| AttributionError::BadLine { line: 0, why };
    if f.len() > MAX_FUNCTIONS {
        return Err(bad(format!("more than {MAX_FUNCTIONS} functions")));
    }
    let mut v: Vec<&RipFunction> = f.iter().collect();
    v.sort_by_key(|x| x.start);
    for w in v.windows(2) {
        if w[0].end > w[1].start {
            return Err(bad(format!(
                "functions {} and {} overlap",
                w[0].name, w[1].name
            )));
        }
    }
    if let Some(x) = v.iter().find(|x| x.start >= x.end) {
        return Err(bad(format!("function {} is empty", x.name)));
    }
    Ok(v)
}

/// The function holding `rip` (an index into `funcs`, sorted and disjoint).
fn function_of(funcs: &[&RipFunction], rip: u64) -> Option<usize> {
    let i = funcs.partition_point(|f| f.start <= rip).checked_sub(1)?;
    (rip < funcs[i].end).then_some(i)
}

/// What one vCPU's samples give: per key, the count and the first sample's time.
#[derive(Default)]
struct Profile {
    /// Per function index: (samples, first time).
    funcs: BTreeMap<usize, (u64, i64)>,
    halted: (u64, i64),
    waiting: (u64, i64),
    no_symbol: (u64, i64),
}

fn count(slot: &mut (u64, i64), t: i64) {
    if slot.0 == 0 {
        slot.1 = t;
    }
    slot.0 += 1;
}

/// The mean time between a vCPU's consecutive samples (`-` under two samples): the period
/// the sampling achieved.
fn mean_interval<T>(samples: &[(i64, T)]) -> String {
    match (samples.first(), samples.last()) {
        (Some(a), Some(b)) if samples.len() > 1 => {
            let span = i128::from(b.0) - i128::from(a.0);
            format!("{} ns", span / (samples.len() as i128 - 1))
        }
        _ => "-".into(),
    }
}

/// The flat profile rows of every vCPU, and the strips.
fn rip_rows(
    rs: &truecold_proto::rip::RipSamples,
    funcs: &[&RipFunction],
    origin: u64,
    rows: &mut Vec<Row>,
) -> Result<RipView, AttributionError> {
    use truecold_proto::rip::VcpuState;
    let decoded = rs.decode().map_err(AttributionError::Rip)?;
    let period = rs.period_us.ns();
    // Per vCPU: each sample's time and what it is (function index or a state).
    let mut classified: Vec<Vec<(i64, Result<usize, Key>)>> = Vec::new();
    let mut totals: BTreeMap<usize, u64> = BTreeMap::new();
    for samples in &decoded {
        let mut v = Vec::with_capacity(samples.len());
        for s in samples {
            let t = signed(s.t_ns, origin);
            let what = match s.state {
                VcpuState::Halted => Err(Key::Halted),
                VcpuState::WaitingForStart => Err(Key::WaitingForStart),
                VcpuState::Running | VcpuState::Unknown => {
                    function_of(funcs, s.rip).ok_or(Key::NoSymbol)
                }
            };
            if let Ok(f) = what {
                *totals.entry(f).or_default() += 1;
            }
            v.push((t, what));
        }
        classified.push(v);
    }
    // The legend: the most sampled functions over all vCPUs (ties: the lower start).
    let mut ranked: Vec<(usize, u64)> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let legend_of: BTreeMap<usize, usize> = ranked
        .iter()
        .take(STRIP_COLOURS)
        .enumerate()
        .map(|(k, (f, _))| (*f, k))
        .collect();
    let legend = ranked
        .iter()
        .take(STRIP_COLOURS)
        .map(|(f, _)| funcs[*f].name.clone())
        .collect();
    let mut strips = Vec::new();
    for (vcpu, samples) in classified.iter().enumerate() {
        let enc = &rs.vcpus[vcpu];
        let mut p = Profile::default();
        let mut strip: Vec<(i64, i64, Key)> = Vec::new();
        for &(t, what) in samples {
            let key = match what {
                Ok(f) => {
                    count(p.funcs.entry(f).or_insert((0, t)), t);
                    legend_of.get(&f).map_or(Key::Other, |k| Key::Func(*k))
                }
                Err(k) => {
                    let slot = match k {
                        Key::Halted => &mut p.halted,
                        Key::WaitingForStart => &mut p.waiting,
                        _ => &mut p.no_symbol,
                    };
                    count(slot, t);
                    k
                }
            };
            let end = t.saturating_add(i64::try_from(period).unwrap_or(i64::MAX));
            match strip.last_mut() {
                Some(last) if last.2 == key && last.1 >= t => last.1 = end,
                _ => strip.push((t, end, key)),
            }
        }
        strips.push(strip);
        let n = samples.len() as u64;
        let ppm = |c: u64| (c * 1_000_000).checked_div(n).unwrap_or(0);
        rows.push(Row {
            lane: Lane::Rip,
            name: format!("vcpu{vcpu} samples"),
            start_ns: None,
            dur_ns: Some(n.saturating_mul(period)),
            counters: None,
            note: format!(
                "{n} samples every {} us of {} ticks (mean interval {}); not taken: {} over \
                 the cap, {} coalesced, {} unread, {} at the stop; {} ticks missed (all vCPUs)",
                rs.period_us.us(),
                rs.ticks,
                mean_interval(samples),
                enc.over_cap,
                enc.coalesced,
                enc.unread,
                enc.at_stop,
                rs.missed_ticks
            ),
        });
        let mut fl: Vec<(&usize, &(u64, i64))> = p.funcs.iter().collect();
        fl.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
        let mut row = |name: String, (c, first): (u64, i64), what: &str| {
            if c > 0 {
                rows.push(Row {
                    lane: Lane::Rip,
                    name: format!("vcpu{vcpu} {name}"),
                    start_ns: Some(first),
                    dur_ns: Some(c.saturating_mul(period)),
                    counters: None,
                    note: format!("{c} samples ({} ppm of the vCPU's){what}", ppm(c)),
                });
            }
        };
        for (f, v) in fl.iter().take(TOP_FUNCTIONS) {
            let func = funcs[**f];
            row(
                func.name.clone(),
                **v,
                &format!("; {:#x}..{:#x}", func.start, func.end),
            );
        }
        let rest = fl
            .iter()
            .skip(TOP_FUNCTIONS)
            .fold((0u64, i64::MAX), |a, (_, v)| (a.0 + v.0, a.1.min(v.1)));
        row("[other]".into(), rest, "; the functions past the top");
        row(
            "[no symbol]".into(),
            p.no_symbol,
            "; no function holds the RIP",
        );
        row("[halted]".into(), p.halted, "; the guest's idle (HLT)");
        row(
            "[waiting for start]".into(),
            p.waiting,
            "; an AP before its INIT/SIPI",
        );
    }
    Ok(RipView { legend, strips })
}

fn signed(t: u64, origin: u64) -> i64 {
    clamp_i64(i128::from(t) - i128::from(origin))
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// [`CSV_FILE`]'s bytes (csv crate, `\n` line ends, every field as written).
pub fn csv_bytes(a: &Attribution) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    // Writing to a Vec cannot fail; an error would only drop a record, which verify catches.
    let _ = w.write_record(CSV_HEADER);
    for r in &a.rows {
        let c = r.counters;
        let _ = w.write_record([
            r.lane.as_str().to_string(),
            r.name.clone(),
            r.start_ns.map(|x| x.to_string()).unwrap_or_default(),
            opt(r.dur_ns),
            opt(c.map(|c| c.exits.io_in)),
            opt(c.map(|c| c.exits.io_out)),
            opt(c.map(|c| c.exits.mmio)),
            opt(c.map(|c| c.exits.hlt)),
            opt(c.map(|c| c.exits.shutdown)),
            opt(c.map(|c| c.exits.other)),
            opt(c.map(|c| c.minflt)),
            opt(c.map(|c| c.majflt)),
            r.note.clone(),
        ]);
    }
    w.into_inner().unwrap_or_default()
}

const W: u32 = 1000;
const ROW_H: u32 = 18;
const TOP: u32 = 70;
/// Room for one axis's tick labels (above and below the bars).
const AXIS_H: u32 = 20;
const LEFT: u32 = 300;
const FONT: &str = "monospace";

/// [`SVG_FILE`]: a bootgraph-like timeline, one bar per host stage, guest phase and top
/// initcall, on the host clock from the request (0) to the end of the last bar, widths to
/// scale, in milliseconds: an axis with round ticks ([`crate::plot::ticks`]) above and
/// below the bars and a line marking strict-ready (the shown launch's request →
/// strict-ready). `clock` is the clock's description (`Clock::describe`).
pub fn svg(a: &Attribution, clock: &str) -> String {
    let bars: Vec<&Row> = a
        .rows
        .iter()
        .filter(|r| matches!(r.lane, Lane::Host | Lane::Guest | Lane::Initcall))
        .filter(|r| r.start_ns.is_some() && r.dur_ns.is_some())
        .collect();
    let total = a
        .rows
        .iter()
        .find(|r| r.name == "attribution_total")
        .and_then(|r| r.dur_ns)
        .unwrap_or(0);
    let last = bars
        .iter()
        .map(|r| i128::from(r.start_ns.unwrap_or(0)) + i128::from(r.dur_ns.unwrap_or(0)))
        .max()
        .unwrap_or(1)
        .max(i128::from(total))
        .max(1);
    // The axis ends on its last round tick, at or after the last bar's end.
    let ticks = crate::plot::ticks(last as f64 / 1e6, 8);
    let end_ms = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let end = ((end_ms * 1e6) as i128).max(last);
    // With RIP samples: a line for the overhead, a strip per vCPU on the timeline, and the
    // flat profile below it (without them the drawing is what it always was).
    let strips = a.rip.as_ref().map_or(0, |r| r.strips.len()) as u32;
    let profile: Vec<&Row> = a
        .rows
        .iter()
        .filter(|r| r.lane == Lane::Rip && r.start_ns.is_some())
        .collect();
    let top = if a.rip.is_some() { TOP + 20 } else { TOP };
    let axis_y0 = top as i32;
    let bars_y0 = axis_y0 + AXIS_H as i32;
    let bars_y1 = bars_y0 + (ROW_H * (bars.len() as u32 + strips)) as i32;
    let profile_y0 = bars_y1 + 70;
    let h = top
        + AXIS_H * 2
        + ROW_H * (bars.len() as u32 + strips)
        + 30
        + if a.rip.is_some() {
            70 + ROW_H * profile.len() as u32
        } else {
            0
        };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (W, h)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let style = (FONT, 13).into_font().color(&BLACK);
        let verdict = a
            .rows
            .iter()
            .find(|r| r.lane == Lane::Reconciliation)
            .map(|r| r.name.as_str())
            .unwrap_or("");
        let _ = root.draw(&Text::new(
            format!(
                "attribution: request -> strict-ready {} ms; {verdict}",
                crate::fmt::ms(total)
            ),
            (8, 8),
            style.clone(),
        ));
        let _ = root.draw(&Text::new(
            format!("clock: {clock}"),
            (8, 28),
            style.clone(),
        ));
        let _ = root.draw(&Text::new(
            "ms after the request (widths to scale); red line: strict-ready",
            (8, 48),
            style.clone(),
        ));
        if let Some(o) = a.rows.iter().find(|r| r.lane == Lane::Overhead) {
            let _ = root.draw(&Text::new(
                format!("sampling overhead: {}", o.note),
                (8, 68),
                (FONT, 11).into_font().color(&BLACK),
            ));
        }
        let span = (W - LEFT - 20) as i128;
        let x = |t: i128| -> i32 {
            let v = LEFT as i128 + (t.clamp(0, end) * span) / end;
            i32::try_from(v).unwrap_or(i32::MAX)
        };
        let grid = RGBColor(0xe0, 0xe0, 0xe0);
        for &t in &ticks {
            let px = x((t * 1e6) as i128);
            let _ = root.draw(&PathElement::new(
                vec![(px, bars_y0), (px, bars_y1)],
                grid.stroke_width(1),
            ));
            for (y, ty) in [(bars_y0, bars_y0 - 16), (bars_y1, bars_y1 + 4)] {
                let _ = root.draw(&PathElement::new(
                    vec![(px, y - 3), (px, y + 3)],
                    BLACK.stroke_width(1),
                ));
                let _ = root.draw(&Text::new(
                    crate::plot::tick_label(t),
                    (px, ty),
                    (FONT, 11).into_font().into_text_style(&root).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Center,
                            plotters::style::text_anchor::VPos::Top,
                        ),
                    ),
                ));
            }
        }
        for y in [bars_y0, bars_y1] {
            let _ = root.draw(&PathElement::new(
                vec![(x(0), y), (x(end), y)],
                BLACK.stroke_width(1),
            ));
        }
        for (i, r) in bars.iter().enumerate() {
            let y = bars_y0 + (ROW_H * i as u32) as i32;
            let s = i128::from(r.start_ns.unwrap_or(0));
            let e = s + i128::from(r.dur_ns.unwrap_or(0));
            let color = match r.lane {
                Lane::Host => RGBColor(0x2c, 0x3e, 0x50),
                Lane::Guest => RGBColor(0x27, 0xae, 0x60),
                _ => RGBColor(0xc0, 0x39, 0x2b),
            };
            let (x0, x1) = (x(s), x(e).max(x(s) + 1));
            let _ = root.draw(&Rectangle::new(
                [(x0, y + 2), (x1, y + ROW_H as i32 - 2)],
                color.filled(),
            ));
            let label: String = format!("{} {}", r.lane.as_str(), r.name)
                .chars()
                .take(38)
                .collect();
            let _ = root.draw(&Text::new(label, (4, y + 2), (FONT, 11).into_font()));
        }
        let sr = x(i128::from(total));
        let red = RGBColor(0xc0, 0x39, 0x2b);
        let _ = root.draw(&PathElement::new(
            vec![(sr, bars_y0 - 4), (sr, bars_y1 + 4)],
            red.stroke_width(2),
        ));
        let _ = root.draw(&Text::new(
            format!("strict-ready {} ms", crate::fmt::ms(total)),
            (sr.min((W - 170) as i32), bars_y1 + 20),
            (FONT, 12).into_font().color(&red),
        ));
        if let Some(rip) = &a.rip {
            let y_strips = bars_y0 + (ROW_H * bars.len() as u32) as i32;
            for (v, strip) in rip.strips.iter().enumerate() {
                let y = y_strips + (ROW_H * v as u32) as i32;
                let _ = root.draw(&Text::new(
                    format!("rip vcpu{v} by function"),
                    (4, y + 2),
                    (FONT, 11).into_font(),
                ));
                // At most one rectangle starts in each pixel column.
                let mut last: Option<(i32, i32, Key)> = None;
                let mut rects = Vec::new();
                for &(s, e, key) in strip {
                    let (x0, x1) = (x(i128::from(s)), x(i128::from(e)).max(x(i128::from(s)) + 1));
                    match last.as_mut() {
                        Some(l) if l.2 == key && l.1 >= x0 => l.1 = l.1.max(x1),
                        Some(l) if x1 <= l.1 => {}
                        Some(l) => {
                            let from = x0.max(l.1);
                            rects.push(*l);
                            last = Some((from, x1, key));
                        }
                        None => last = Some((x0, x1, key)),
                    }
                }
                rects.extend(last);
                for (x0, x1, key) in rects {
                    let _ = root.draw(&Rectangle::new(
                        [(x0, y + 2), (x1, y + ROW_H as i32 - 2)],
                        key_colour(key).filled(),
                    ));
                }
            }
            let _ = root.draw(&Text::new(
                "flat profile from RIP samples: sampled time (samples x period), ms; colours \
                 as in the strips",
                (8, profile_y0 - 24),
                style.clone(),
            ));
            let max = profile
                .iter()
                .filter_map(|r| r.dur_ns)
                .max()
                .unwrap_or(1)
                .max(1);
            let span = i128::from(W - LEFT - 80);
            for (i, r) in profile.iter().enumerate() {
                let y = profile_y0 + (ROW_H * i as u32) as i32;
                let d = r.dur_ns.unwrap_or(0);
                let len = i32::try_from(i128::from(d) * span / i128::from(max)).unwrap_or(0);
                let fname = r.name.split_once(' ').map_or("", |(_, f)| f);
                let key = rip
                    .legend
                    .iter()
                    .position(|n| n == fname)
                    .map(Key::Func)
                    .unwrap_or(match fname {
                        "[halted]" => Key::Halted,
                        "[waiting for start]" => Key::WaitingForStart,
                        "[no symbol]" => Key::NoSymbol,
                        _ => Key::Other,
                    });
                let x0 = LEFT as i32;
                let _ = root.draw(&Rectangle::new(
                    [(x0, y + 2), (x0 + len.max(1), y + ROW_H as i32 - 2)],
                    key_colour(key).filled(),
                ));
                let label: String = r.name.chars().take(38).collect();
                let _ = root.draw(&Text::new(label, (4, y + 2), (FONT, 11).into_font()));
                let _ = root.draw(&Text::new(
                    format!("{} ms", crate::fmt::ms(d)),
                    (x0 + len.max(1) + 6, y + 2),
                    (FONT, 11).into_font(),
                ));
            }
        }
        let _ = root.present();
    }
    out
}

/// A strip's colour: the legend's functions in a fixed palette, the rest in greys.
fn key_colour(k: Key) -> RGBColor {
    const PALETTE: [RGBColor; STRIP_COLOURS] = [
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0xbc, 0xbd, 0x22),
        RGBColor(0x17, 0xbe, 0xcf),
        RGBColor(0x39, 0x3b, 0x79),
    ];
    match k {
        Key::Func(i) => PALETTE
            .get(i)
            .copied()
            .unwrap_or(RGBColor(0x7f, 0x7f, 0x7f)),
        Key::Other => RGBColor(0x7f, 0x7f, 0x7f),
        Key::NoSymbol => RGBColor(0x30, 0x30, 0x30),
        Key::Halted => RGBColor(0xd0, 0xd0, 0xd0),
        Key::WaitingForStart => RGBColor(0xf0, 0xe6, 0xc8),
    }
}

/// Both generated files from [`JSONL_FILE`]'s bytes.
pub fn generate(jsonl: &[u8], measured: &[Sample], clock: &str) -> Result<Files, AttributionError> {
    let lines = parse_lines(jsonl)?;
    let a = match attribute(&lines, measured) {
        // No attribution launch reached strict-ready: that is data too (a kernel may fail
        // under the attribution command line, e.g. its log buffer costs the memory check), so
        // the CSV says so with each launch's failure, and there is no timeline to draw.
        Err(AttributionError::NoUsableRun) => {
            return Ok(vec![(
                CSV_FILE.to_string(),
                csv_bytes(&no_attribution(&lines)),
            )]);
        }
        other => other?,
    };
    Ok(vec![
        (CSV_FILE.to_string(), csv_bytes(&a)),
        (SVG_FILE.to_string(), svg(&a, clock).into_bytes()),
    ])
}

/// The name of the one row of a [`CSV_FILE`] whose launches all failed.
pub const NO_ATTRIBUTION: &str = "no launch reached strict-ready";

/// The attribution of launches none of which reached strict-ready: one reconciliation row
/// counting them and their failures (by the VMM report's failure kind and text, or "no VMM
/// report"), in order of first appearance.
fn no_attribution(lines: &[AttributionLine]) -> Attribution {
    let mut kinds: Vec<(String, u64)> = Vec::new();
    for l in lines {
        let why = l
            .report
            .core()
            .map(|c| {
                let kind = c.outcome.failure_kind.unwrap_or_else(|| "ok".into());
                match c.outcome.failure {
                    Some(f) => format!("{kind}: {f}"),
                    None => kind,
                }
            })
            .unwrap_or_else(|| "no VMM report".into());
        match kinds.iter_mut().find(|(k, _)| *k == why) {
            Some((_, n)) => *n += 1,
            None => kinds.push((why, 1)),
        }
    }
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    Attribution {
        rows: vec![Row {
            lane: Lane::Reconciliation,
            name: NO_ATTRIBUTION.into(),
            start_ns: None,
            dur_ns: None,
            counters: None,
            note: format!(
                "none of the {} attribution launch(es) reached strict-ready with a VMM report: {}",
                lines.len(),
                list.join("; ")
            ),
        }],
        represents: false,
        rip: None,
    }
}

/// What a campaign's record asks of its attribution launches (`cmdline.txt`: its run line's
/// instrument, [`Instrument::ABSENT`] when a line with launches names none, and the measured
/// launches' guest kernel command line when recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked<'a> {
    pub instrument: Instrument,
    /// The measured launches' guest kernel command line (Linux, when recorded).
    pub measured_cmdline: Option<&'a str>,
}

/// `verify`: with [`JSONL_FILE`] in the bundle, [`CSV_FILE`] and [`SVG_FILE`] must be there
/// and equal to their recomputation; without it, neither may be; and with `asked` (the
/// record asks for the launches) the lines are those of its instrument
/// ([`instrument_disagreements`]). `read` gives a file's bytes (`None` when absent). Every
/// disagreement is one reason: `(file, why)`, `file` naming the generated file when the
/// reason is that it is missing or stale (what `report` regenerates), [`JSONL_FILE`] when
/// its launches are not its instrument's, `None` otherwise.
pub fn check_bundle(
    read: impl Fn(&str) -> Option<Vec<u8>>,
    measured: &[Sample],
    clock: &str,
    asked: Option<Asked<'_>>,
) -> Vec<(Option<String>, String)> {
    let Some(jsonl) = read(JSONL_FILE) else {
        return [CSV_FILE, SVG_FILE]
            .into_iter()
            .filter(|n| read(n).is_some())
            .map(|n| (None, format!("{n} without {JSONL_FILE}")))
            .collect();
    };
    let instrument = match (asked, parse_lines(&jsonl)) {
        (Some(a), Ok(lines)) => instrument_disagreements(&lines, a),
        // Unreadable lines are `generate`'s reason, below.
        _ => Vec::new(),
    };
    let instrument = instrument
        .into_iter()
        .map(|why| (Some(JSONL_FILE.to_string()), why));
    match generate(&jsonl, measured, clock) {
        Err(e) => vec![(None, e.to_string())],
        Ok(files) => {
            let svg_stray = !files.iter().any(|(n, _)| n == SVG_FILE) && read(SVG_FILE).is_some();
            files
                .into_iter()
                .filter_map(|(name, want)| match read(&name) {
                    None => Some((
                        Some(name.clone()),
                        format!("{name} missing beside {JSONL_FILE}"),
                    )),
                    Some(got) if got != want => Some((
                        Some(name.clone()),
                        format!(
                        "{name} differs from its recomputation from {JSONL_FILE} and samples.csv"
                    ),
                    )),
                    Some(_) => None,
                })
                .chain(svg_stray.then(|| {
                    (
                        None,
                        format!("{SVG_FILE} beside an attribution whose launches all failed"),
                    )
                }))
                .chain(instrument)
                .collect()
        }
    }
}

/// Why the launches of `lines` were not measured as `asked` (empty: as far as the lines
/// show, they were; at most one reason of each kind, naming its first line). The VMM samples
/// RIPs only when asked (`truecold-vmm boot --sample-rip-us`), so an `initcall` launch carries
/// no RIP samples and a `rip` launch that reached strict-ready carries them. Where the
/// measured launches' guest kernel command line is recorded, a launch's reported one is it
/// under `rip` (the guest as measured) and it with exactly the words of
/// [`truecold_proto::cmdline::ATTRIBUTION_CMDLINE`] added under `initcall` (word counts,
/// whatever the order).
pub fn instrument_disagreements(lines: &[AttributionLine], asked: Asked<'_>) -> Vec<String> {
    /// One way a line contradicts the instrument, in the order the reasons are listed.
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Against {
        Sampled,
        NotSampled,
        Cmdline,
    }
    /// A command line's words, counted.
    fn words(line: &str) -> BTreeMap<&str, i64> {
        let mut m = BTreeMap::new();
        for w in line.split_whitespace() {
            *m.entry(w).or_insert(0) += 1;
        }
        m
    }
    let instrument = asked.instrument;
    // The words the instrument adds to the measured command line.
    let added = match instrument {
        Instrument::Initcall => words(truecold_proto::cmdline::ATTRIBUTION_CMDLINE),
        Instrument::Rip => BTreeMap::new(),
    };
    let mut first: BTreeMap<Against, (usize, String)> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(core) = l.report.core() else {
            continue;
        };
        let sampled = core.rip_samples.is_some();
        let mut found = Vec::new();
        match instrument {
            Instrument::Initcall if sampled => found.push((Against::Sampled, String::new())),
            Instrument::Rip if !sampled && usable(l).is_some() => {
                found.push((Against::NotSampled, String::new()))
            }
            _ => {}
        }
        if let (Some(measured), Some(got)) = (asked.measured_cmdline, &core.guest_cmdline) {
            let mut diff = words(got);
            for (w, n) in words(measured).into_iter().chain(added.clone()) {
                *diff.entry(w).or_insert(0) -= n;
            }
            let off: Vec<String> = diff
                .into_iter()
                .filter(|(_, n)| *n != 0)
                .map(|(w, n)| format!("{}{w}", if n > 0 { "+" } else { "-" }))
                .collect();
            if !off.is_empty() {
                found.push((Against::Cmdline, off.join(" ")));
            }
        }
        for (a, detail) in found {
            first.entry(a).or_insert((i + 1, detail));
        }
    }
    let asked_for = format!("asked for with `--attribution-instrument {instrument}`");
    first
        .into_iter()
        .map(|(a, (line, detail))| match a {
            Against::Sampled => format!(
                "{JSONL_FILE} line {line} carries RIP samples, but its launches were \
                 {asked_for} (the VMM samples only under `rip`)"
            ),
            Against::NotSampled => format!(
                "{JSONL_FILE} line {line} reached strict-ready without RIP samples, but its \
                 launches were {asked_for}"
            ),
            Against::Cmdline => format!(
                "{JSONL_FILE} line {line}: its guest kernel command line is not the measured \
                 one {} ({detail} against that), but its launches were {asked_for}",
                match instrument {
                    Instrument::Initcall => format!(
                        "with `{}` added",
                        truecold_proto::cmdline::ATTRIBUTION_CMDLINE
                    ),
                    Instrument::Rip => "unchanged".to_string(),
                }
            ),
        })
        .collect()
}

/// Generated files: (name, bytes).
pub type Files = Vec<(String, Vec<u8>)>;

/// Whether `report` regenerates `name` (beside [`JSONL_FILE`]).
pub fn is_generated(name: &str) -> bool {
    matches!(name, CSV_FILE | SVG_FILE)
}

/// `report DIR`: the attribution files regenerated from the bundle's [`JSONL_FILE`] (whose
/// digest the caller has checked) and its rows.
pub fn regenerate(
    dir: &std::path::Path,
    result: &crate::schema::ResultJson,
    measured: &[Sample],
) -> Result<Result<Files, AttributionError>, crate::fsio::FileError> {
    let bytes = crate::fsio::read_file(&dir.join(JSONL_FILE), JSONL_MAX_BYTES)?;
    let clock = result.environment.host_kind.clock().describe();
    Ok(generate(&bytes, measured, clock))
}

/// The most bytes of [`JSONL_FILE`] read (verify and report).
pub const JSONL_MAX_BYTES: u64 = 64 << 20;
