//! `verify DIR`: checks a bundle end to end and collects every reason it is invalid.
//!
//! Exit codes: 0 valid, 1 invalid (every reason listed), 2 unreadable (the directory
//! cannot be read, or `result.json` has no or an unknown `schema_version`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use crate::bundle::{
    parse_result, JsonError, CMDLINE_FILE, CONFIG_FILE, RESULT_FILE, SAMPLES_FILE,
};
use crate::csv::read_samples;
use crate::plot::{CDF_FILE, STAGES_FILE};
use crate::report::{generated_files, ms, README_FILE};
use crate::schema::{
    required_artifacts, ContractKind, HostKind, ResultJson, Sample, Stage, StageKind, HEADLINE,
    PERCENTILE_DEFINITION,
};
use crate::summary::Summaries;
use crate::sums::{is_sha256_hex, parse_sums, sha256_hex, SUMS_FILE};

/// The kind of a reason; tests and tools match on it, humans read [`Reason::detail`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// SHA256SUMS missing, unreadable or malformed.
    SumsMalformed,
    /// A listed file's digest differs.
    DigestMismatch,
    /// A listed file is absent.
    FileMissing,
    /// A file is present but not listed.
    FileUnlisted,
    /// A file every bundle (of this kind) must have is absent.
    RequiredFileMissing,
    /// A directory entry that is not a regular file.
    NotAFile,
    /// result.json does not parse against the schema.
    ResultJson,
    /// samples.csv does not parse against the schema.
    SamplesCsv,
    /// Rows ≠ planned attempts (complete campaign) or more rows than planned.
    AttemptCount,
    /// Row indexes not 0, 1, 2, … in row order.
    IndexOrder,
    /// A guest boot id appears twice: not a fresh boot.
    DuplicateBootId,
    /// label / headline / percentile definition not the canonical ones for the contract.
    ContractLabel,
    /// A row's contract differs from the declared one, or a probe row carries Linux data.
    RowContract,
    /// A row's concurrency is impossible in the declared mode.
    Concurrency,
    /// Intended request time / queue stage inconsistent with the mode or the stamps.
    IntendedTime,
    /// `latency_ns` ≠ `ready_ns − origin`.
    Latency,
    /// A success's host stages do not add up to its latency.
    StageTiling,
    /// A success lacks what a success needs (ready stamp, boot id, workload, guest data).
    SuccessIncomplete,
    /// A Linux success whose guest saw a topology other than the configured one.
    Platform,
    /// A success later than the deadline.
    OverDeadline,
    /// `ok` and `error_kind` disagree.
    ErrorKind,
    /// A success without memory verified and host/guest figures agreeing.
    Memory,
    /// Row data disagree with the configuration (memory size, vCPUs).
    Configuration,
    /// A stored statistic differs from its recomputation.
    Statistic,
    /// Failures missing from the with-failures statistics.
    FailuresNotScored,
    /// An artifact digest missing or not 64 lowercase hex.
    Artifact,
    /// The bundled kernel config does not match its artifact digest.
    ConfigDigest,
    /// README.md or a plot differs from what `report` regenerates from the data: the
    /// README carries the human-facing headline, so a hand edit is a reason, not a note.
    /// After a renderer change, `truecold-proof report` regenerates them.
    GeneratedStale,
    /// The contract cannot have produced these rows on the declared host: a `linux`
    /// bundle with a success on a `pvm` host (an unmodified Linux does not boot on
    /// kvm_pvm, so such a success is mislabelled data).
    HostKindContract,
    /// A probe row carries a boot id: the probe guest has no kernel and no boot id.
    ProbeBootId,
    /// The error histogram does not add up to the failure count.
    ErrorHistogram,
}

/// One reason a bundle is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub check: Check,
    pub detail: String,
}

/// The verifier's findings.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Why the bundle could not be judged at all (exit 2).
    pub unreadable: Option<String>,
    /// Every reason it is invalid.
    pub reasons: Vec<Reason>,
    /// The parsed result, when it parsed.
    pub result: Option<ResultJson>,
    /// Rows parsed from samples.csv.
    pub rows: Option<usize>,
    /// The rows parsed from samples.csv, as judged: `compare` uses exactly these.
    pub samples: Option<Vec<Sample>>,
}

impl Verdict {
    /// 0 valid, 1 invalid, 2 unreadable.
    pub fn exit_code(&self) -> i32 {
        if self.unreadable.is_some() {
            2
        } else if self.reasons.is_empty() {
            0
        } else {
            1
        }
    }

    /// No reasons and readable.
    pub fn is_valid(&self) -> bool {
        self.exit_code() == 0
    }

    /// Whether any reason is of kind `c`.
    pub fn has(&self, c: Check) -> bool {
        self.reasons.iter().any(|r| r.check == c)
    }

    fn add(&mut self, check: Check, detail: impl Into<String>) {
        self.reasons.push(Reason {
            check,
            detail: detail.into(),
        });
    }

    /// The human report. At most `per_check` lines per kind of reason, then a count.
    pub fn render(&self, dir: &Path, per_check: usize) -> String {
        let mut s = String::new();
        let label = self
            .result
            .as_ref()
            .map(|r| r.contract.label.clone())
            .unwrap_or_else(|| "unknown contract".into());
        if let Some(u) = &self.unreadable {
            let _ = writeln!(s, "UNREADABLE {}: {u}", dir.display());
        } else if self.reasons.is_empty() {
            let _ = writeln!(s, "VALID {}: {label}", dir.display());
        } else {
            let _ = writeln!(
                s,
                "INVALID {}: {label}: {} reason(s)",
                dir.display(),
                self.reasons.len()
            );
        }
        if let Some(r) = &self.result {
            let sm = &r.summary;
            let _ = writeln!(
                s,
                "  contract: {} ({}), host: {}, {} vCPU, {} MiB{}",
                r.contract.kind.as_str(),
                r.contract.mode.describe(),
                r.environment.host_kind.as_str(),
                r.configuration.vcpus,
                r.configuration.mem_bytes >> 20,
                if r.contract.incomplete {
                    ", INCOMPLETE"
                } else {
                    ""
                }
            );
            let _ = writeln!(
                s,
                "  attempts {}, ok {}, failed {}",
                sm.attempts, sm.successes, sm.failures
            );
            if let Some(h) = sm.headline.successes {
                let _ = writeln!(
                    s,
                    "  {HEADLINE} (successes): p50 {} ms, p99 {} ms, max {} ms",
                    ms(h.p50),
                    ms(h.p99),
                    ms(h.max)
                );
            }
        }
        let mut counts: BTreeMap<Check, usize> = BTreeMap::new();
        for r in &self.reasons {
            let c = counts.entry(r.check).or_insert(0);
            *c += 1;
            if *c <= per_check {
                let _ = writeln!(s, "  - [{:?}] {}", r.check, r.detail);
            }
        }
        for (c, n) in counts {
            if n > per_check {
                let _ = writeln!(s, "  - [{c:?}] … and {} more of this kind", n - per_check);
            }
        }
        s
    }
}

/// Verifies the bundle in `dir`.
pub fn verify_dir(dir: &Path) -> Verdict {
    let mut v = Verdict::default();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            v.unreadable = Some(format!("cannot read directory: {e}"));
            return v;
        }
    };
    // Present regular files → bytes.
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for e in entries {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                v.unreadable = Some(format!("cannot list directory: {err}"));
                return v;
            }
        };
        let name = e.file_name().to_string_lossy().into_owned();
        let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !is_file {
            v.add(
                Check::NotAFile,
                format!("`{name}` is not a regular file (a bundle is flat)"),
            );
            continue;
        }
        match fs::read(e.path()) {
            Ok(b) => {
                files.insert(name, b);
            }
            Err(err) => {
                v.unreadable = Some(format!("cannot read {name}: {err}"));
                return v;
            }
        }
    }
    check_sums(&mut v, &files);

    let result = match files.get(RESULT_FILE).map(|b| parse_result(b)) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e @ (JsonError::NoVersion | JsonError::UnknownVersion { .. }))) => {
            v.unreadable = Some(format!("{RESULT_FILE}: {e}"));
            return v;
        }
        Some(Err(e)) => {
            v.add(Check::ResultJson, format!("{RESULT_FILE}: {}", chain(&e)));
            None
        }
    };
    let samples = match files.get(SAMPLES_FILE).map(|b| read_samples(b)) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            v.add(Check::SamplesCsv, format!("{SAMPLES_FILE}: {e}"));
            None
        }
    };
    v.rows = samples.as_ref().map(Vec::len);

    let mut required = vec![
        README_FILE,
        RESULT_FILE,
        SAMPLES_FILE,
        CMDLINE_FILE,
        CDF_FILE,
        STAGES_FILE,
        SUMS_FILE,
    ];
    if result.as_ref().map(|r| r.contract.kind) != Some(ContractKind::Probe) {
        required.push(CONFIG_FILE);
    }
    for r in required {
        if !files.contains_key(r) {
            v.add(
                Check::RequiredFileMissing,
                format!("required file `{r}` is missing"),
            );
        }
    }

    if let Some(r) = &result {
        check_contract(&mut v, r, &files);
    }
    if let (Some(r), Some(s)) = (&result, &samples) {
        check_rows(&mut v, r, s);
        check_statistics(&mut v, r, s);
        for (name, bytes) in generated_files(r, s) {
            if files.get(&name).is_some_and(|b| *b != bytes) {
                v.add(
                    Check::GeneratedStale,
                    format!(
                        "`{name}` differs from what `truecold-proof report` generates from \
                         result.json and samples.csv (hand-edited, or written by another \
                         renderer: `truecold-proof report` regenerates it)"
                    ),
                );
            }
        }
    }
    v.result = result;
    v.samples = samples;
    v
}

/// An error and its `source()` chain on one line, `: `-separated (printed once, at the top).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn check_sums(v: &mut Verdict, files: &BTreeMap<String, Vec<u8>>) {
    let Some(sb) = files.get(SUMS_FILE) else {
        v.add(Check::SumsMalformed, format!("`{SUMS_FILE}` is missing"));
        return;
    };
    let listed = match parse_sums(sb) {
        Ok(l) => l,
        Err(e) => {
            v.add(Check::SumsMalformed, e.to_string());
            return;
        }
    };
    for (name, digest) in &listed {
        if name == SUMS_FILE {
            v.add(Check::SumsMalformed, format!("`{SUMS_FILE}` lists itself"));
            continue;
        }
        match files.get(name) {
            None => v.add(
                Check::FileMissing,
                format!("`{name}` is listed in {SUMS_FILE} but missing"),
            ),
            Some(b) => {
                let got = sha256_hex(b);
                if got != *digest {
                    v.add(
                        Check::DigestMismatch,
                        format!("`{name}`: sha256 is {got}, {SUMS_FILE} says {digest}"),
                    );
                }
            }
        }
    }
    for name in files.keys() {
        if name != SUMS_FILE && !listed.iter().any(|(n, _)| n == name) {
            v.add(
                Check::FileUnlisted,
                format!("`{name}` is present but not listed in {SUMS_FILE}"),
            );
        }
    }
}

fn check_contract(v: &mut Verdict, r: &ResultJson, files: &BTreeMap<String, Vec<u8>>) {
    let c = &r.contract;
    if c.label != c.kind.label() {
        v.add(
            Check::ContractLabel,
            format!(
                "contract kind `{}` must be labelled {:?}, found {:?}",
                c.kind.as_str(),
                c.kind.label(),
                c.label
            ),
        );
    }
    if c.headline != HEADLINE {
        v.add(
            Check::ContractLabel,
            format!("headline must be `{HEADLINE}`, found `{}`", c.headline),
        );
    }
    if c.percentile_definition != PERCENTILE_DEFINITION {
        v.add(
            Check::ContractLabel,
            "percentile_definition is not the one this verifier implements",
        );
    }
    for name in required_artifacts(c.kind) {
        if !r.artifacts.contains_key(*name) {
            v.add(
                Check::Artifact,
                format!("artifact digest `{name}` is missing"),
            );
        }
    }
    for (name, d) in &r.artifacts {
        if !is_sha256_hex(d) {
            v.add(
                Check::Artifact,
                format!("artifact `{name}`: `{d}` is not 64 lowercase hex digits"),
            );
        }
    }
    if let (Some(cfg), Some(d)) = (files.get(CONFIG_FILE), r.artifacts.get("config")) {
        let got = sha256_hex(cfg);
        if got != *d {
            v.add(
                Check::ConfigDigest,
                format!("`{CONFIG_FILE}` has sha256 {got}, artifacts.config says {d}"),
            );
        }
    }
    if c.kind == ContractKind::Probe && files.contains_key(CONFIG_FILE) {
        v.add(
            Check::RowContract,
            "a probe-guest bundle carries a kernel config: it is not a Linux boot",
        );
    }
}

fn check_rows(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let c = &r.contract;
    let cfg = &r.configuration;
    let planned = c.mode.planned_attempts();
    let rows = samples.len() as u64;
    if !c.incomplete && rows != planned {
        v.add(
            Check::AttemptCount,
            format!(
                "{rows} rows, the complete {} campaign planned {planned}",
                c.mode.name()
            ),
        );
    }
    if c.incomplete && rows > planned {
        v.add(
            Check::AttemptCount,
            format!("{rows} rows, more than the {planned} planned"),
        );
    }
    if c.kind == ContractKind::Linux && r.environment.host_kind == HostKind::Pvm {
        let ok = samples.iter().filter(|s| s.ok).count();
        if ok > 0 {
            v.add(
                Check::HostKindContract,
                format!(
                    "a `linux` bundle on a `pvm` host has {ok} successful row(s): an \
                     unmodified Linux cannot boot on kvm_pvm, so the data are mislabelled"
                ),
            );
        }
    }
    let mut seen: HashMap<_, u64> = HashMap::new();
    for (pos, s) in samples.iter().enumerate() {
        let i = s.index;
        if i != pos as u64 {
            v.add(
                Check::IndexOrder,
                format!("row {pos} has index {i}: indexes must be 0,1,2,… in row order"),
            );
        }
        if let (ContractKind::Probe, Some(b)) = (s.contract, s.boot_id) {
            v.add(
                Check::ProbeBootId,
                format!(
                    "probe sample {i} carries boot id {b}: the probe guest has no kernel and \
                     no boot id"
                ),
            );
        } else if let Some(b) = s.boot_id {
            if let Some(first) = seen.insert(b, i) {
                v.add(
                    Check::DuplicateBootId,
                    format!("boot id {b} of sample {i} already seen in sample {first}: not a fresh boot"),
                );
            }
        }
        if s.contract != c.kind {
            v.add(
                Check::RowContract,
                format!(
                    "sample {i} is a `{}` row in a `{}` bundle",
                    s.contract.as_str(),
                    c.kind.as_str()
                ),
            );
        }
        if c.kind == ContractKind::Probe && s.guest_platform.is_some() {
            v.add(
                Check::RowContract,
                format!("probe sample {i} carries a Linux guest platform"),
            );
        }
        if c.kind == ContractKind::Probe {
            for st in Stage::ALL.iter().filter(|st| st.kind() == StageKind::Guest) {
                if s.stages.get(*st).is_some() {
                    v.add(
                        Check::RowContract,
                        format!("probe sample {i} carries Linux guest stage `{}`", st.name()),
                    );
                }
            }
        }
        if !c.mode.allows_concurrency(s.concurrency) {
            v.add(
                Check::Concurrency,
                format!(
                    "sample {i}: concurrency {} impossible in {}",
                    s.concurrency,
                    c.mode.describe()
                ),
            );
        }
        check_times(v, c.mode.has_intended_time(), s);
        if s.host_mem_configured != cfg.mem_bytes {
            v.add(
                Check::Configuration,
                format!(
                    "sample {i}: host configured {} bytes, the campaign {}",
                    s.host_mem_configured, cfg.mem_bytes
                ),
            );
        }
        if s.ok {
            check_success(v, r, s);
        } else if s.error_kind.is_empty() {
            v.add(
                Check::ErrorKind,
                format!("failed sample {i} has no error kind"),
            );
        }
    }
}

fn check_times(v: &mut Verdict, mode_has_intended: bool, s: &Sample) {
    let i = s.index;
    if s.intended_request_ns.is_some() != mode_has_intended {
        v.add(
            Check::IntendedTime,
            format!(
                "sample {i}: intended request time {} but the mode {} one",
                if s.intended_request_ns.is_some() {
                    "present"
                } else {
                    "absent"
                },
                if mode_has_intended { "needs" } else { "has no" }
            ),
        );
    }
    let want_queue = s
        .intended_request_ns
        .map(|t| s.actual_request_ns.checked_sub(t));
    let queue = s.stages.get(Stage::Queue);
    match want_queue {
        None if queue.is_some() => v.add(
            Check::IntendedTime,
            format!("sample {i}: queue stage without an intended time"),
        ),
        Some(None) => v.add(
            Check::IntendedTime,
            format!("sample {i}: actual request before the intended time"),
        ),
        Some(Some(q)) if queue != Some(q) => v.add(
            Check::IntendedTime,
            format!("sample {i}: queue stage {queue:?} ≠ actual − intended = {q}"),
        ),
        _ => {}
    }
    if s.latency_ns != s.derived_latency() {
        v.add(
            Check::Latency,
            format!(
                "sample {i}: latency_ns {:?} ≠ ready − request origin = {:?}",
                s.latency_ns,
                s.derived_latency()
            ),
        );
    }
}

fn check_success(v: &mut Verdict, r: &ResultJson, s: &Sample) {
    let i = s.index;
    let linux = r.contract.kind == ContractKind::Linux;
    if !s.error_kind.is_empty() {
        v.add(
            Check::ErrorKind,
            format!("sample {i} is ok but has error kind `{}`", s.error_kind),
        );
    }
    if linux && s.boot_id.is_none() {
        v.add(
            Check::SuccessIncomplete,
            format!("successful Linux sample {i} has no boot id"),
        );
    }
    let Some(lat) = s.latency_ns else {
        v.add(
            Check::SuccessIncomplete,
            format!("successful sample {i} has no strict-ready time"),
        );
        return;
    };
    if lat > r.contract.deadline_ns {
        v.add(
            Check::OverDeadline,
            format!(
                "sample {i} is ok at {lat} ns, after the {} ns deadline",
                r.contract.deadline_ns
            ),
        );
    }
    if s.stages.get(Stage::Spawn).is_none() {
        v.add(
            Check::StageTiling,
            format!("successful sample {i} has no spawn stage"),
        );
    }
    let host_sum = s.host_stage_sum();
    if host_sum != u128::from(lat) {
        v.add(
            Check::StageTiling,
            format!("sample {i}: host stages sum to {host_sum} ns, latency is {lat} ns"),
        );
    }
    let m = s.host_mem_configured;
    let mem_bad = s.memory_problems(linux);
    if !mem_bad.is_empty() {
        v.add(
            Check::Memory,
            format!(
                "successful sample {i}: host configured {m} bytes but {}",
                mem_bad.join(", ")
            ),
        );
    }
    if linux {
        if s.workload != "BENCH_OK" {
            v.add(
                Check::SuccessIncomplete,
                format!(
                    "successful sample {i}: workload `{}`, not BENCH_OK",
                    s.workload
                ),
            );
        }
        for st in [Stage::GuestKernelToInit, Stage::GuestInitToReady] {
            if s.stages.get(st).is_none() {
                v.add(
                    Check::SuccessIncomplete,
                    format!("successful Linux sample {i} has no `{}` stage", st.name()),
                );
            }
        }
        if let Some(why) = s.platform_problem(r.configuration.vcpus) {
            v.add(Check::Platform, format!("successful sample {i}: {why}"));
        }
        if s.guest_cpus != Some(r.configuration.vcpus) {
            v.add(
                Check::Configuration,
                format!(
                    "successful sample {i}: guest saw {:?} CPUs, configured {}",
                    s.guest_cpus, r.configuration.vcpus
                ),
            );
        }
    }
}

fn check_statistics(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let again = Summaries::compute(&r.contract, samples);
    let (a, b) = match (
        serde_json::to_value(&again),
        serde_json::to_value(&r.summary),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return,
    };
    let mut diffs = Vec::new();
    diff("summary", &a, &b, &mut diffs);
    for d in diffs {
        v.add(Check::Statistic, d);
    }
    let histogram: u128 = r.summary.errors.values().map(|&n| u128::from(n)).sum();
    if histogram != u128::from(r.summary.failures) {
        v.add(
            Check::ErrorHistogram,
            format!(
                "summary.errors adds up to {histogram}, summary.failures is {}: every \
                 failure must be in the histogram",
                r.summary.failures
            ),
        );
    }
    let attempts = samples.len() as u64;
    let n = r.summary.headline.with_failures.map(|s| s.n).unwrap_or(0);
    if n != attempts {
        v.add(
            Check::FailuresNotScored,
            format!("headline with failures has n = {n}, the bundle has {attempts} attempts"),
        );
    }
}

/// Lists every leaf where `recomputed` and `stored` differ.
fn diff(
    path: &str,
    recomputed: &serde_json::Value,
    stored: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (recomputed, stored) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (Some(x), None) => {
                        out.push(format!("{p}: missing in result.json, samples give {x}"))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{p}: result.json says {y}, samples give nothing"))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (x, y) if x != y => out.push(format!(
            "{path}: result.json says {}, recomputed from samples.csv: {}",
            short(y),
            short(x)
        )),
        _ => {}
    }
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(200).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}
