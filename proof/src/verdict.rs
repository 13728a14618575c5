//! The verifier's answer about a directory: a [`Verdict`] (every [`Reason`], each of a
//! [`Check`] kind, and what was read on the way), how it renders for a reviewer (every
//! bundle text through [`escape_untrusted`]) and its exit code; and what `verify` is asked
//! to check beyond the directory ([`VerifyOptions`]). Every kind of directory's verifier
//! produces one; nothing here reads a file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::fmt::{escape_untrusted, mem_text, ms};
use crate::names::SIG_FILE;
use crate::schema::{Clock, ResultJson, Sample, HEADLINE};
use crate::signature::SshKeygen;

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
    /// `contract.description` is not the one description of its contract kind
    /// ([`crate::schema::description_of`]): the README renders that one, never free text.
    ContractDescription,
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
    /// A success (a sample that reached strict-ready) carries `error_detail` text.
    ErrorDetail,
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
    /// `contract.clock` is not the declared host kind's clock ([`HostKind::clock`]).
    Clock,
    /// `configuration.knobs` is not a set one arm can run: out of catalogue order, a knob
    /// twice, two conflicting, one not for the contract's guest, or a backing knob whose
    /// backing is not the configuration's.
    Knobs,
    /// A probe row carries a boot id: the probe guest has no kernel and no boot id.
    ProbeBootId,
    /// The error histogram does not add up to the failure count.
    ErrorHistogram,
    /// A row disagrees with its evidence in reports.jsonl (the VMM's report and the harness's
    /// marks for that attempt), or the file is malformed.
    Reports,
    /// `result.json` parses but is not byte for byte what the writer makes of its parsed
    /// form (duplicate keys, reordered keys, other whitespace or number spellings).
    ResultNotCanonical,
    /// A file the verifier must parse is larger than [`MAX_PARSED_BYTES`] (it is still
    /// hashed).
    TooLarge,
    /// `cmdline.txt` is unreadable, or disagrees with `configuration`/`contract`.
    Cmdline,
    /// Sequential mode: a request earlier than the previous row's request.
    SequentialOrder,
    /// Sequential mode: a request before the previous row's last stamp.
    SequentialOverlap,
    /// Sequential mode: an idle gap as long as the shortest launch (or 10 ms) — a *warning*
    /// ([`Verdict::warnings`]), never a reason: a dropped row leaves such a gap, and so does a
    /// harness descheduled on a busy host (a 2-core CI host running other tests stalled one
    /// 33.1 ms between probe launches whose shortest took 32.2 ms).
    SequentialGap,
    /// The rows span more than the harness's wall time.
    WallTime,
    /// Schema 6+: `environment.residue` missing, its leaks not those of [`crate::residue::leaks`]
    /// on its readings, or a leak not among the warnings.
    Residue,
    /// Schema 10+: `contract.stop_after` / `contract.stopped` disagree with the rows by the
    /// one fail-fast rule ([`crate::schema::StopRule`]), or appear where no rule runs.
    Stopped,
    /// Schema 7+: `environment.nested` absent from a `nested-emulated` bundle, or present in
    /// another.
    NestedHarness,
    /// The parity contract (agent observer): `state.csv` missing, unreadable, breaking the
    /// lifecycle rule (`crate::lifecycle::check_lifecycle`), or a success whose launch did not
    /// end `ok` there.
    Lifecycle,
    /// A success with a host stage missing or 0 ns.
    StageFloor,
    /// A failure typed `deadline` whose strict-ready is inside the deadline.
    DeadlineKind,
    /// `--signature`: `SHA256SUMS.sig` missing, from a signer not allowed, or not valid.
    Signature,
    /// Multi-arm directory: `arms.json` malformed, not canonical, or not a plan.
    ArmsPlan,
    /// Multi-arm directory: an arm's bundle is absent or unreadable.
    ArmMissing,
    /// Multi-arm directory: the arms were not measured alike (host kind and clock,
    /// configuration, guest, contract, observer) or an arm is not its engine's.
    ArmsMismatch,
    /// Multi-arm directory: the order disagrees with the arms' request stamps or row counts.
    ArmOrder,
    /// Multi-arm directory: along the order, an idle gap as long as the shortest launch of any
    /// arm (or 10 ms) — a *warning*, for the reason [`Check::SequentialGap`] is one.
    ArmGap,
    /// Multi-arm directory: `comparison.json` differs from its recomputation.
    Comparison,
    /// Tune directory: `tune.json` malformed, not canonical or not a plan, the baselines not
    /// the plan's context, or the launches over its budget.
    TunePlan,
    /// Tune directory: a phase missing, present without reason, or not the arms the plan and
    /// the screen's winners make.
    TunePhase,
    /// Tune directory: `tune.json`'s results differ from their recomputation (an effect, a
    /// winner that is not faster, the final A/B, the leave-one-out).
    TuneResults,
    /// Tune phase: an arm's guest command line, kernel `config` or VMM command is not the
    /// baseline's with exactly its knobs applied (a word no knob names, a knob that did
    /// nothing, a VMM knob missing from the command that ran).
    KnobApplied,
    /// Tune directory: `recommended/` missing (a `tune.json` of schema 2 or later), not
    /// exactly what the winners make, or present in an older tune.
    TuneRecommended,
    /// Tune or bisect directory: the user's kernel config (`user-kernel.config`) missing, not
    /// the recorded digest, present without a record, or the recorded symbols that did not
    /// carry over not what it and the baseline's resolved config give; a knob recorded as
    /// already set that the baseline's config does not set.
    UserKernel,
    /// Bisect directory: `bisect.json` malformed, not canonical, or another schema.
    BisectRecord,
    /// Bisect directory: a step's directory does not verify, or its recorded outcome differs
    /// from the recomputed one, or the result names a step that does not show it.
    BisectSteps,
    /// `attribution.csv` / `attribution.svg` differ from their recomputation from
    /// `attribution.jsonl` and the measured rows, or are there without it (or it without them).
    Attribution,
    /// Fleet directory: `fleet.json` malformed or not a plan (its shards' ranges, names or
    /// seeds).
    FleetPlan,
    /// Fleet directory: a shard missing, stray, not verifying, or not the plan's (its
    /// launches, its seed, its clock, its inputs unlike the other shards').
    FleetShard,
    /// Fleet directory: a shard's task record missing, another shard's, or made under
    /// another plan.
    FleetTask,
}

/// One reason a bundle is invalid. `detail` holds bundle text verbatim; print it through
/// [`escape_untrusted`] (as [`Verdict::render`] does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub check: Check,
    pub detail: String,
    /// The one file of the directory the reason is about, relative to the directory
    /// (`<arm>/<file>` in a multi-arm directory), when it is about one: what `report` looks
    /// at to tell a reason it would cure (a file it regenerates) from one it would launder.
    pub file: Option<String>,
}

/// What is known of the bundle's signature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SignatureState {
    /// Not checked (no `--signature`), and the bundle carries no `SHA256SUMS.sig`.
    #[default]
    NotChecked,
    /// Not checked, but the bundle carries one.
    PresentNotChecked,
    /// Checked and good: made by this principal of the allowed signers.
    Good { principal: String },
    /// Checked and bad (the reason is a [`Check::Signature`] reason).
    Bad,
}

/// The verifier's findings.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Why the bundle could not be judged at all (exit 2).
    pub unreadable: Option<String>,
    /// Every reason it is invalid.
    pub reasons: Vec<Reason>,
    /// What the verifier saw that does not make the bundle invalid but that a reviewer should
    /// weigh (each a [`Check`] that [`Check::is_warning`]); listed under the reasons, never
    /// counted in [`Verdict::exit_code`].
    pub warnings: Vec<Reason>,
    /// The parsed result, when it parsed.
    pub result: Option<ResultJson>,
    /// Rows parsed from samples.csv.
    pub rows: Option<usize>,
    /// The signature, as far as it was checked.
    pub signature: SignatureState,
    /// The rows parsed from samples.csv, as judged: `compare` uses exactly these.
    pub samples: Option<Vec<Sample>>,
    /// A multi-arm directory: its arms' names, in the plan's order (`rows` then counts the
    /// rows of every arm).
    pub arms: Option<Vec<String>>,
    /// What the directory is when it is neither a bundle nor a multi-arm directory (a bisect
    /// directory), in words.
    pub label: Option<String>,
    /// The bundles inside a multi-arm, tune or bisect directory (each arm, each phase's arm,
    /// each step's), as its verifier met them ([`Verdict::add_inner`]): what a reviewer reads
    /// first of such a directory.
    pub parts: Vec<Part>,
    /// The directory is not a bundle nor any other kind (none of their files is there): what
    /// [`Verdict::render_line`] says in one line instead of listing every file missing.
    pub not_a_bundle: bool,
}

/// One bundle inside a directory: where it is, whether it verified, and its headline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its path relative to the directory (`firecracker`, `screen/baseline`).
    pub name: String,
    pub valid: bool,
    pub clock: Clock,
    pub attempts: u64,
    pub ok: u64,
    pub failed: u64,
    /// The headline over the successes (`None`: no success).
    pub headline: Option<crate::stats::Summary>,
    /// What the bundle recorded of its host (`environment.warnings`), verbatim.
    pub host_warnings: Vec<String>,
}

impl Part {
    /// The part of the bundle whose verdict is `v`, at `name`; `None` when its result did
    /// not parse.
    fn of(name: &str, v: &Verdict) -> Option<Part> {
        let r = v.result.as_ref()?;
        Some(Part {
            name: name.to_string(),
            valid: v.is_valid(),
            clock: r.contract.clock,
            attempts: r.summary.attempts,
            ok: r.summary.successes,
            failed: r.summary.failures,
            headline: r.summary.headline.successes,
            host_warnings: r.environment.warnings.clone(),
        })
    }

    /// One line: `name: ok 30 of 30; p50 227.5 ms, p99 228.4 ms, max 228.5 ms`, escaped.
    pub fn line(&self) -> String {
        let figures = match &self.headline {
            Some(h) => format!(
                "p50 {} ms, p99 {} ms, max {} ms",
                ms(h.p50),
                ms(h.p99),
                ms(h.max)
            ),
            None => "no success".to_string(),
        };
        format!(
            "{}: ok {} of {}{}; {figures}{}",
            escape_untrusted(&self.name),
            self.ok,
            self.attempts,
            if self.failed > 0 {
                format!(" ({} failed)", self.failed)
            } else {
                String::new()
            },
            if self.valid { "" } else { " — INVALID" }
        )
    }
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

    pub(crate) fn add(&mut self, check: Check, detail: impl Into<String>) {
        let to = if check.is_warning() {
            &mut self.warnings
        } else {
            &mut self.reasons
        };
        to.push(Reason {
            check,
            detail: detail.into(),
            file: None,
        });
    }

    /// [`Verdict::add`] for a reason about the one file `file` ([`Reason::file`]).
    pub(crate) fn add_file(&mut self, check: Check, file: &str, detail: impl Into<String>) {
        let to = if check.is_warning() {
            &mut self.warnings
        } else {
            &mut self.reasons
        };
        to.push(Reason {
            check,
            detail: detail.into(),
            file: Some(file.to_string()),
        });
    }

    /// Every reason and warning of `inner` (the verdict of a directory inside this one, at
    /// `rel`), its detail prefixed with `rel: ` and its file with `rel/`.
    pub(crate) fn add_inner(&mut self, rel: &str, inner: &Verdict) {
        let moved = |r: &Reason| Reason {
            check: r.check,
            detail: format!("{rel}: {}", r.detail),
            file: r.file.as_ref().map(|f| format!("{rel}/{f}")),
        };
        self.reasons.extend(inner.reasons.iter().map(moved));
        self.warnings.extend(inner.warnings.iter().map(moved));
        // The bundle itself, or the bundles inside it, as parts of this directory.
        self.parts.extend(Part::of(rel, inner));
        self.parts.extend(inner.parts.iter().map(|p| Part {
            name: format!("{rel}/{}", p.name),
            ..p.clone()
        }));
    }

    /// What the directory recorded of its host, each distinct warning once: a bundle's
    /// `environment.warnings`; in a directory of bundles, every part's, with the parts that
    /// recorded it (all of them: an empty list).
    pub fn host_warnings(&self) -> Vec<(String, Vec<String>)> {
        if let Some(r) = &self.result {
            return r
                .environment
                .warnings
                .iter()
                .map(|w| (w.clone(), Vec::new()))
                .collect();
        }
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for p in &self.parts {
            for w in &p.host_warnings {
                match out.iter_mut().find(|(t, _)| t == w) {
                    Some((_, by)) => by.push(p.name.clone()),
                    None => out.push((w.clone(), vec![p.name.clone()])),
                }
            }
        }
        let all = self.parts.len();
        for (_, by) in &mut out {
            if by.len() == all {
                by.clear();
            }
        }
        out
    }

    /// The human report: the verdict line, a bundle's contract and headline (a directory of
    /// bundles: each part's headline), the host warnings the directory recorded, the
    /// signature, every reason and warning (at most `per_check` lines per kind of reason, then
    /// a count). All text that comes from the bundle (or the path) is escaped
    /// ([`escape_untrusted`]).
    pub fn render(&self, dir: &Path, per_check: usize) -> String {
        self.render_with(dir, per_check, true)
    }

    /// [`Verdict::render`] without the host warnings the directory recorded: the summary of a
    /// command that printed them as it ran (`truecold run`, `tune`, `bisect`).
    pub fn render_without_recorded(&self, dir: &Path, per_check: usize) -> String {
        self.render_with(dir, per_check, false)
    }

    fn render_with(&self, dir: &Path, per_check: usize, recorded: bool) -> String {
        let e = escape_untrusted;
        let mut s = self.render_line(dir);
        if let Some(r) = &self.result {
            let sm = &r.summary;
            let _ = writeln!(
                s,
                "  contract: {} ({}), host: {} ({} clock), {} vCPU, {}{}",
                r.contract.kind.as_str(),
                r.contract.mode.describe(),
                r.environment.host_kind.as_str(),
                r.contract.clock.as_str(),
                r.configuration.vcpus,
                mem_text(r.configuration.mem_bytes),
                match (&r.contract.stopped, r.contract.incomplete) {
                    (Some(kind), _) => format!(
                        ", STOPPED after {} consecutive `{}` failures",
                        r.contract.stop_after.unwrap_or_default(),
                        e(kind)
                    ),
                    (None, true) => ", INCOMPLETE".to_string(),
                    (None, false) => String::new(),
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
            if let Some(p) = sm.parallel_latency.and_then(|p| p.successes) {
                let _ = writeln!(
                    s,
                    "  {HEADLINE} on the parallel clock (successes): p50 {} ms, p99 {} ms, max {} ms",
                    ms(p.p50),
                    ms(p.p99),
                    ms(p.max)
                );
            }
        }
        if self.result.is_none() {
            for p in &self.parts {
                let _ = writeln!(s, "  {}", p.line());
            }
        }
        for (w, by) in self.host_warnings().into_iter().filter(|_| recorded) {
            let who = if by.is_empty() {
                String::new()
            } else {
                format!(" ({})", e(&by.join(", ")))
            };
            let _ = writeln!(s, "  recorded warning{who}: {}", e(&w));
        }
        match &self.signature {
            SignatureState::NotChecked | SignatureState::Bad => {}
            SignatureState::PresentNotChecked => {
                let _ = writeln!(
                    s,
                    "  signature: {SIG_FILE} present, not checked (verify --signature \
                     --allowed-signers FILE)"
                );
            }
            SignatureState::Good { principal } => {
                let _ = writeln!(
                    s,
                    "  signature: good, SHA256SUMS signed by `{}`",
                    e(principal)
                );
            }
        }
        list_findings(&mut s, &self.reasons, "-", "", per_check);
        list_findings(&mut s, &self.warnings, "!", "warning: ", per_check);
        s
    }

    /// What the directory is, in words (unescaped): the contract's label for a bundle, the
    /// kind and arms of a multi-arm directory, a bisect directory's own label.
    pub fn label_text(&self) -> String {
        match (&self.result, &self.arms) {
            _ if self.label.is_some() => self.label.clone().unwrap_or_default(),
            (Some(r), _) => r.contract.label.clone(),
            (None, Some(a)) => format!("{}, arms {}", arms_kind(a), a.join(", ")),
            (None, None) => "unknown contract".into(),
        }
    }

    /// The verdict's first line, escaped: `VALID DIR: label[, N warning(s)]`, `INVALID DIR:
    /// label: N reason(s)…`, `UNREADABLE DIR: why` or `NOT A BUNDLE DIR: what it lacks`.
    pub fn render_line(&self, dir: &Path) -> String {
        let e = escape_untrusted;
        let dir = e(&dir.display().to_string());
        let label = e(&self.label_text());
        if self.not_a_bundle {
            format!(
                "NOT A BUNDLE {dir}: {}\n",
                e(self.unreadable.as_deref().unwrap_or(""))
            )
        } else if let Some(u) = &self.unreadable {
            format!("UNREADABLE {dir}: {}\n", e(u))
        } else if self.reasons.is_empty() {
            format!("VALID {dir}: {label}{}\n", warned(self.warnings.len()))
        } else {
            format!(
                "INVALID {dir}: {label}: {} reason(s){}\n",
                self.reasons.len(),
                warned(self.warnings.len())
            )
        }
    }

    /// `--quiet`'s report: the first line and every reason (at most `per_check` of a kind),
    /// no summary lines and no warnings.
    pub fn render_quiet(&self, dir: &Path, per_check: usize) -> String {
        let mut s = self.render_line(dir);
        list_findings(&mut s, &self.reasons, "-", "", per_check);
        s
    }
}

/// A multi-arm directory's kind from its arms' names.
pub(crate) fn arms_kind(a: &[String]) -> &'static str {
    if a.iter().any(|n| n.contains('/')) {
        "tune"
    } else if *a == [crate::names::GOOD_ARM, crate::names::CANDIDATE_ARM] {
        "kernel A/B"
    } else if a.iter().any(|n| n == crate::names::BASELINE_ARM) {
        "tune phase"
    } else {
        "engines campaign"
    }
}

/// Lists `findings` under `marker` (`-` reasons, `!` warnings): at most `per_check` of each
/// kind, then a count; every detail escaped ([`escape_untrusted`]).
fn list_findings(s: &mut String, findings: &[Reason], marker: &str, tag: &str, per_check: usize) {
    let mut counts: BTreeMap<Check, usize> = BTreeMap::new();
    for r in findings {
        let c = counts.entry(r.check).or_insert(0);
        *c += 1;
        if *c <= per_check {
            let _ = writeln!(
                s,
                "  {marker} [{:?}] {tag}{}",
                r.check,
                escape_untrusted(&r.detail)
            );
        }
    }
    for (c, n) in counts {
        if n > per_check {
            let _ = writeln!(
                s,
                "  {marker} [{c:?}] … and {} more of this kind",
                n - per_check
            );
        }
    }
}

/// `, N warning(s)` after the verdict's first line, nothing without warnings.
fn warned(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(", {n} warning(s)")
    }
}

impl Check {
    /// Whether this kind of finding is a warning ([`Verdict::warnings`]) rather than a reason
    /// the bundle is invalid. Only the two gap checks ([`Check::SequentialGap`], [`Check::ArmGap`]): a gap is what a dropped row
    /// leaves, but a descheduled harness leaves the same, and nothing in a bundle tells the two
    /// apart (a forger who renumbers rows can shift their stamps as easily) — calling an honest
    /// bundle invalid for its host's load would make the verdict about the host, not the data.
    pub fn is_warning(self) -> bool {
        matches!(self, Check::SequentialGap | Check::ArmGap)
    }
}

/// What `verify` checks beyond the bundle itself.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// `--signature`: check `SHA256SUMS.sig` against these allowed signers.
    pub signature: Option<SignatureCheck>,
}

/// How to check the signature.
#[derive(Debug, Clone)]
pub struct SignatureCheck {
    /// An OpenSSH allowed-signers file (`ssh-keygen(1)`, ALLOWED SIGNERS).
    pub allowed_signers: PathBuf,
    /// The principal that must have signed; any principal of the file when `None`.
    pub identity: Option<String>,
    pub ssh_keygen: SshKeygen,
}

/// An error and its `source()` chain on one line (the one formatter, from proto).
pub use truecold_proto::measure::error_chain as chain;
