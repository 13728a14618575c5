//! The multi-arm directory's verifier (see the module doc of [`crate::arms`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{apply, check_set, Change, Knob, VmmChange};

use super::model::*;
use super::readme::*;
use super::stats::*;
use crate::bundle::{fully_stamped, gap_threshold, last_stamp, verify_bundle_with};
use crate::digest::sha256_hex;
use crate::fmt::{escape_untrusted, or_none};
use crate::fsio::{read_capped, MAX_PARSED_BYTES};
use crate::kind::Kind;
use crate::names::{ARMS_FILE, README_FILE, SIG_FILE, SUMS_FILE};
use crate::schema::{ContractKind, Observer, ResultJson, Sample};
use crate::skeleton::{
    check::{check_signature, check_sums},
    DirError,
};
use crate::verdict::{Check, Verdict, VerifyOptions};

/// Digests of every regular file of the top directory and of each arm directory (arm files
/// as `<arm>/<file>`), `SHA256SUMS` and `SHA256SUMS.sig` of the top excluded.
pub(super) fn digests_of(
    dir: &Path,
    arms: &[ArmRef],
) -> Result<BTreeMap<String, String>, ArmsError> {
    let mut out = BTreeMap::new();
    let mut hash_dir = |d: &Path, prefix: &str| -> Result<(), ArmsError> {
        for e in fs::read_dir(d).map_err(PathIoError::at("list", d))? {
            let e = e.map_err(PathIoError::at("list", d))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
            if !is_file {
                continue;
            }
            if prefix.is_empty() && (name == SUMS_FILE || name == SIG_FILE) {
                continue;
            }
            let (d, _) = crate::fsio::hash_file(&e.path()).map_err(DirError::from)?;
            out.insert(format!("{prefix}{name}"), d);
        }
        Ok(())
    };
    hash_dir(dir, "")?;
    for a in arms {
        hash_dir(&dir.join(&a.name), &format!("{}/", a.name))?;
    }
    Ok(out)
}

/// Verifies `dir` as a multi-arm directory when it holds [`ARMS_FILE`]
/// ([`Kind::is_marked`]: anything by that name, even a link: [`verify_arms_dir`] says what is
/// wrong with it), else as one bundle: what a directory that holds bundles or A/B directories
/// (a bisect's steps) verifies each one with.
pub fn verify_arms_or_bundle(dir: &Path, opts: &VerifyOptions) -> Verdict {
    if Kind::Arms.is_marked(dir) {
        verify_arms_dir(dir, opts)
    } else {
        verify_bundle_with(dir, opts)
    }
}

/// Verifies a multi-arm directory (see the module doc); [`crate::verify_dir`] calls this
/// when `dir` holds `arms.json`.
pub fn verify_arms_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    verify_arms_rows(dir, opts).verdict
}

/// A multi-arm directory as verified: the verdict, the plan (when `arms.json` parsed) and
/// every arm whose bundle parsed, with exactly the rows its verification judged.
pub(crate) struct ArmsVerified {
    pub verdict: Verdict,
    pub plan: Option<ArmsPlan>,
    pub arms: Vec<ArmData>,
}

/// [`verify_arms_dir`], keeping the plan and the verified rows: the plan
/// ([`read_plan`]), the top entries ([`list_top`]), `SHA256SUMS` over every file
/// ([`check_arms_sums`]), each arm on its own ([`verify_each_arm`]), then the arms against
/// each other and the generated files against what their rows give.
pub(crate) fn verify_arms_rows(dir: &Path, opts: &VerifyOptions) -> ArmsVerified {
    let _session = crate::fsio::session();
    let mut out = ArmsVerified {
        verdict: Verdict::default(),
        plan: None,
        arms: Vec::new(),
    };
    let v = &mut out.verdict;
    let Some((plan, plan_parsed)) = read_plan(v, dir) else {
        return out;
    };
    let arm_names: BTreeSet<&str> = plan.arms.iter().map(|a| a.name.as_str()).collect();
    v.arms = Some(plan.arms.iter().map(|a| a.name.clone()).collect());
    let Some((top, present_arms)) = list_top(v, dir, &arm_names) else {
        return out;
    };
    for r in [
        ARMS_FILE,
        COMPARISON_FILE,
        README_FILE,
        ARMS_CDF_FILE,
        SUMS_FILE,
    ] {
        if !top.contains(r) {
            v.add_file(
                Check::RequiredFileMissing,
                r,
                format!("required file `{r}` is missing"),
            );
        }
    }
    for a in &plan.arms {
        if !present_arms.contains(&a.name) {
            v.add(
                Check::ArmMissing,
                format!("arm `{}` has no directory", a.name),
            );
        }
    }
    // SHA256SUMS over every file. An arm named twice in the plan (a reason above) is
    // hashed once and no arm is verified: the plan is refused before any arm is, so a plan
    // repeating one arm costs no more than naming it once.
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let repeated = plan.arms.len() != arm_names.len();
    let present: Vec<ArmRef> = plan
        .arms
        .iter()
        .filter(|a| present_arms.contains(&a.name) && seen.insert(a.name.as_str()))
        .cloned()
        .collect();
    let Some((digests, sums)) = check_arms_sums(v, dir, &present, &top) else {
        return out;
    };
    // Each arm on its own (none when the plan repeats one).
    let arms = if repeated {
        Vec::new()
    } else {
        verify_each_arm(v, dir, &present)
    };
    v.rows = Some(arms.iter().map(|(_, s)| s.len()).sum());
    check_same(v, &plan, &arms);
    super::applied::check_applied(v, dir, &plan, &arms);
    check_order(v, &plan, &arms);
    let data: Vec<ArmData> = arms.into_iter().map(|(a, _)| a).collect();
    check_arms_generated(v, &plan, &data, &digests);
    check_signature(v, dir, opts, top.contains(SIG_FILE), sums.as_deref());
    out.arms = data;
    out.plan = plan_parsed.then_some(plan);
    out
}

/// `arms.json`, read once (capped), parsed, canonical and without problems; an empty plan
/// when it does not parse (a reason), and whether it parsed. `None` when it cannot be read.
fn read_plan(v: &mut Verdict, dir: &Path) -> Option<(ArmsPlan, bool)> {
    let ap = dir.join(ARMS_FILE);
    let plan_bytes = match read_capped(&ap, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{ARMS_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return None;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {ARMS_FILE}: {e}"));
            return None;
        }
    };
    let parsed = parse_arms(&plan_bytes);
    let plan_parsed = parsed.is_ok();
    let plan = match parsed {
        Ok(p) => p,
        Err(e) => {
            v.add(Check::ArmsPlan, format!("{ARMS_FILE}: {e}"));
            ArmsPlan {
                seed: 0,
                rounds: 0,
                arms: Vec::new(),
                order: Vec::new(),
            }
        }
    };
    if !v.has(Check::ArmsPlan) {
        if !truecold_proto::tune::is_canonical_either(&plan_bytes, || arms_bytes(&plan)) {
            v.add(
                Check::ArmsPlan,
                format!("{ARMS_FILE} is not in the writer's canonical form"),
            );
        }
        for p in plan_problems(&plan) {
            v.add(Check::ArmsPlan, format!("{ARMS_FILE}: {p}"));
        }
    }
    Some((plan, plan_parsed))
}

/// The top entries: regular files, and the real directories of the plan's arms; anything
/// else a [`Check::NotAFile`] reason. `None` when the directory cannot be listed.
fn list_top(
    v: &mut Verdict,
    dir: &Path,
    arm_names: &BTreeSet<&str>,
) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
    // The directory: top files, and a directory per arm.
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            v.unreadable = Some(format!("cannot read directory: {e}"));
            return None;
        }
    };
    let mut top: BTreeSet<String> = BTreeSet::new();
    let mut present_arms: BTreeSet<String> = BTreeSet::new();
    for e in entries {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                v.unreadable = Some(format!("cannot list directory: {err}"));
                return None;
            }
        };
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type().ok();
        if ft.is_some_and(|t| t.is_file()) {
            top.insert(name);
        } else if ft.is_some_and(|t| t.is_dir()) && arm_names.contains(name.as_str()) {
            present_arms.insert(name);
        } else {
            v.add(
                Check::NotAFile,
                format!("`{name}` is neither a regular file nor an arm's directory"),
            );
        }
    }
    Some((top, present_arms))
}

/// Digests by relative path.
type Digests = BTreeMap<String, String>;

/// The digests of the top files and of the `present` arms' files, checked against the
/// top `SHA256SUMS` (returned when readable). `None` when a file cannot be hashed.
fn check_arms_sums(
    v: &mut Verdict,
    dir: &Path,
    present: &[ArmRef],
    top: &BTreeSet<String>,
) -> Option<(Digests, Option<Vec<u8>>)> {
    let digests = match digests_of(dir, present) {
        Ok(d) => d,
        Err(e) => {
            v.unreadable = Some(crate::verdict::chain(&e));
            return None;
        }
    };
    let sums = match read_capped(&dir.join(SUMS_FILE), MAX_PARSED_BYTES) {
        Ok(Some(b)) => Some(b),
        Ok(None) => {
            v.add(
                Check::TooLarge,
                format!("`{SUMS_FILE}` is larger than {MAX_PARSED_BYTES} bytes"),
            );
            None
        }
        Err(_) => None,
    };
    let mut all = digests.clone();
    if let Some(b) = &sums {
        all.insert(SUMS_FILE.to_string(), sha256_hex(b));
    }
    if top.contains(SIG_FILE) {
        all.insert(SIG_FILE.to_string(), String::new());
    }
    check_sums(v, &all, sums.as_deref(), parse_arms_sums);
    Some((digests, sums))
}

/// Each arm verified as the bundle it is, its reasons the directory's (prefixed with its
/// name); the arms whose record and rows parsed.
fn verify_each_arm(v: &mut Verdict, dir: &Path, present: &[ArmRef]) -> Vec<(ArmData, Vec<Sample>)> {
    let mut arms: Vec<(ArmData, Vec<Sample>)> = Vec::new();
    for a in present {
        let av = verify_bundle_with(&dir.join(&a.name), &VerifyOptions::default());
        if let Some(u) = &av.unreadable {
            v.add(
                Check::ArmMissing,
                format!("arm `{}` is unreadable: {u}", a.name),
            );
        }
        v.add_inner(&a.name, &av);
        if let (Some(r), Some(s)) = (av.result, av.samples) {
            arms.push((ArmData::new(a.clone(), r, &s), s));
        }
    }
    arms
}

/// The top generated files are what `report` makes of the arms' verified rows (judged
/// only when every arm of the plan is there).
fn check_arms_generated(
    v: &mut Verdict,
    plan: &ArmsPlan,
    data: &[ArmData],
    digests: &BTreeMap<String, String>,
) {
    if data.len() == plan.arms.len() && !plan.arms.is_empty() {
        for (name, bytes) in generated_files(plan, data) {
            if digests.get(&name).is_some_and(|d| *d != sha256_hex(&bytes)) {
                let check = if name == COMPARISON_FILE {
                    Check::Comparison
                } else {
                    Check::GeneratedStale
                };
                v.add_file(
                    check,
                    &name,
                    format!(
                        "`{name}` differs from what `truecold-proof report` makes of the arms' \
                         verified rows"
                    ),
                );
            }
        }
    }
}

/// Every arm measured alike: one host kind (so one clock), one configuration, one guest,
/// one contract, running the engine its name says. An engines campaign: under the serial
/// observer, Linux, every artifact and the backing the same. A tune phase: under the vm-exit
/// observer, probe or Linux, and alike except what the arm's knobs change: the backing is
/// the baseline's with the knobs applied ([`truecold_proto::tune::apply`]); the vmlinux
/// digest is the same for arms with the same Kconfig knobs and `bzimage`, the config digest
/// for arms with the same Kconfig knobs; the command line may differ. A kernel A/B
/// ([`is_kernel_ab`]): under the vm-exit observer, Linux, alike in everything but vmlinux and
/// config.
pub(super) fn check_same(v: &mut Verdict, plan: &ArmsPlan, arms: &[(ArmData, Vec<Sample>)]) {
    check_each_arm(v, plan, arms);
    check_arms_alike(v, plan, arms);
}

/// Each arm on its own: the engine its name says, the observer and contract kind the plan
/// needs, marked interleaved, its knobs and attempts as planned.
fn check_each_arm(v: &mut Verdict, plan: &ArmsPlan, arms: &[(ArmData, Vec<Sample>)]) {
    let tune = is_tune_phase(plan);
    // A kernel A/B: observed at the VM exit like a tune, alike in everything but the kernel
    // (vmlinux and config are what it compares).
    let kernel_ab = is_kernel_ab(plan);
    for (a, _) in arms {
        let r = &a.result;
        if r.configuration.engine.kind != a.arm.engine {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` is a `{}` bundle",
                    a.arm.name, r.configuration.engine.kind
                ),
            );
        }
        // An engines campaign measures one contract in every arm: the strict one (serial)
        // or the parity one (agent), as its first arm says.
        let observer = if tune || kernel_ab {
            Observer::VmExit
        } else if arms.first().map(|(f, _)| f.result.contract.observer) == Some(Observer::Agent) {
            Observer::Agent
        } else {
            Observer::Serial
        };
        if r.contract.observer != observer {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` is observed at `{}`: every arm of {} is observed at `{}`",
                    a.arm.name,
                    r.contract.observer.as_str(),
                    if tune {
                        "a tune phase"
                    } else if kernel_ab {
                        "a kernel A/B"
                    } else {
                        "an engines campaign"
                    },
                    observer.as_str()
                ),
            );
        }
        if !tune && r.contract.kind != ContractKind::Linux {
            v.add(
                Check::ArmsMismatch,
                format!("arm `{}` is not a Linux bundle", a.arm.name),
            );
        }
        if !r.contract.interleaved {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` does not say it is interleaved: every arm of a multi-arm \
                     directory is",
                    a.arm.name
                ),
            );
        }
        if tune {
            if let Err(e) = check_set(
                &a.arm.knobs,
                truecold_proto::tune::TuneGuest::from(r.contract.kind),
            ) {
                v.add(
                    Check::ArmsMismatch,
                    format!("arm `{}`: {e} ({})", a.arm.name, r.contract.kind.as_str()),
                );
            }
        }
        {
            let k = r.configuration.knobs.as_slice();
            if k != a.arm.knobs.as_slice() {
                v.add(
                    Check::ArmsMismatch,
                    format!(
                        "arm `{}`'s bundle applied knobs [{}], the plan says [{}]",
                        a.arm.name,
                        knob_list(k),
                        knob_list(&a.arm.knobs)
                    ),
                );
            }
        }
        if r.contract.mode.planned_attempts() != plan.rounds {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` planned {} attempts, the campaign {} rounds",
                    a.arm.name,
                    r.contract.mode.planned_attempts(),
                    plan.rounds
                ),
            );
        }
    }
}

/// Every arm alike the first: one host kind, configuration, guest and contract; a tune's
/// kernels and configs alike where their knobs are.
fn check_arms_alike(v: &mut Verdict, plan: &ArmsPlan, arms: &[(ArmData, Vec<Sample>)]) {
    let tune = is_tune_phase(plan);
    // A kernel A/B: observed at the VM exit like a tune, alike in everything but the kernel
    // (vmlinux and config are what it compares).
    let kernel_ab = is_kernel_ab(plan);
    let reference = arms
        .iter()
        .find(|(a, _)| tune && a.arm.name == BASELINE_ARM)
        .or(arms.first());
    let Some((first, _)) = reference else {
        return;
    };
    let f = &first.result;
    let artifact = |r: &ResultJson, k: &str| r.artifacts.get(k).cloned();
    // Kernels declared per arm (arms.json): each such arm's config has the declared digest;
    // the others boot the campaign's kernel, the first of them its reference.
    for (a, _) in arms {
        if let Some(want) = &a.arm.kernel {
            let got = artifact(&a.result, "config");
            if got.as_deref() != Some(want.as_str()) {
                v.add(
                    Check::ArmsMismatch,
                    format!(
                        "arm `{}`: config digest {}, {ARMS_FILE} declares its own kernel's \
                         config {want}",
                        a.arm.name,
                        got.as_deref().unwrap_or("none")
                    ),
                );
            }
        }
    }
    let campaign_kernel = arms
        .iter()
        .find(|(a, _)| a.arm.kernel.is_none())
        .map(|(a, _)| a);
    // Backings declared per arm (arms.json): each arm has its own, the first included.
    let per_arm_backing = plan.arms.iter().any(|a| a.backing.is_some());
    if per_arm_backing {
        for (a, _) in arms {
            let got = a.result.configuration.backing_kind();
            if got != a.arm.backing {
                v.add(
                    Check::ArmsMismatch,
                    format!(
                        "arm `{}`: backing {}, {ARMS_FILE} declares {}",
                        a.arm.name,
                        got.map_or("?", |b| b.as_str()),
                        a.arm.backing.map_or("none", |b| b.as_str())
                    ),
                );
            }
        }
    }
    // Tune: the first arm with each kernel key holds that key's digest.
    let mut kernels: BTreeMap<KernelKey, (&str, Option<String>)> = BTreeMap::new();
    let mut configs: BTreeMap<Vec<Knob>, (&str, Option<String>)> = BTreeMap::new();
    if tune {
        kernels.insert(
            kernel_key(&first.arm.knobs),
            (first.arm.name.as_str(), artifact(f, "vmlinux")),
        );
        configs.insert(
            kernel_key(&first.arm.knobs).0,
            (first.arm.name.as_str(), artifact(f, "config")),
        );
    }
    for (a, _) in arms {
        if std::ptr::eq(a, first) {
            continue;
        }
        let r = &a.result;
        let mut differ: Vec<String> = Vec::new();
        let mut same = |what: &str, x: String, y: String| {
            if x != y {
                differ.push(format!("{what} {y} (`{}` has {x})", first.arm.name));
            }
        };
        same(
            "host kind",
            f.environment.host_kind.as_str().into(),
            r.environment.host_kind.as_str().into(),
        );
        same(
            "clock",
            f.contract.clock.as_str().into(),
            r.contract.clock.as_str().into(),
        );
        same(
            "vCPUs",
            f.configuration.vcpus.to_string(),
            r.configuration.vcpus.to_string(),
        );
        same(
            "memory",
            f.configuration.mem_bytes.to_string(),
            r.configuration.mem_bytes.to_string(),
        );
        if !tune && !per_arm_backing {
            same(
                "backing",
                or_none(f.configuration.backing_kind()),
                or_none(r.configuration.backing_kind()),
            );
        }
        same(
            "deadline",
            f.contract.deadline_ns.to_string(),
            r.contract.deadline_ns.to_string(),
        );
        same(
            "mode",
            f.contract.mode.describe(),
            r.contract.mode.describe(),
        );
        same(
            "contract",
            f.contract.kind.as_str().into(),
            r.contract.kind.as_str().into(),
        );
        same(
            "observer",
            f.contract.observer.as_str().into(),
            r.contract.observer.as_str().into(),
        );
        // Parity arms: one workspace image, one network pair, one journal setting.
        if let (Some(x), Some(y)) = (&f.environment.parity, &r.environment.parity) {
            same(
                "workspace image digest",
                x.workspace_sha256.clone(),
                y.workspace_sha256.clone(),
            );
            same("network pair", x.net_pair.clone(), y.net_pair.clone());
            same("journal", x.journal.clone(), y.journal.clone());
        }
        for k in ["initramfs", "guest_init"] {
            same(
                &format!("{k} digest"),
                or_none(artifact(f, k)),
                or_none(artifact(r, k)),
            );
        }
        // One guest command line in every arm but the words declared per engine
        // (`truecold_proto::boot_cmdline::is_per_engine_word`); a tune's arms differ by their
        // knobs' deltas instead, which its own check holds.
        if !tune {
            let parity = f.contract.observer == Observer::Agent;
            let shared = |c: &str| truecold_proto::boot_cmdline::shared_words(c, parity).join(" ");
            let (x, y) = (
                shared(&f.configuration.cmdline),
                shared(&r.configuration.cmdline),
            );
            if x != y {
                differ.push(format!(
                    "guest command line `{}` (`{}` has `{}`; only the per-engine words \
                     truecold.engine=, truecold.ram_layout={} may differ)",
                    escape_untrusted(&r.configuration.cmdline),
                    first.arm.name,
                    escape_untrusted(&f.configuration.cmdline),
                    if parity {
                        ", virtio_mmio.device= and pci=off"
                    } else {
                        ""
                    }
                ));
            }
        }
        // The campaign's kernel: alike in every arm that does not declare its own.
        if let Some(c) = campaign_kernel.filter(|_| !(tune || kernel_ab || a.arm.kernel.is_some()))
        {
            for k in ["vmlinux", "config"] {
                let (x, y) = (artifact(&c.result, k), artifact(r, k));
                if x != y {
                    differ.push(format!(
                        "{k} digest {} (`{}` has {}; an arm booting its own kernel \
                         declares it in {ARMS_FILE})",
                        or_none(y),
                        c.arm.name,
                        or_none(x)
                    ));
                }
            }
        }
        if let Some(d) = crate::schema::virtual_clock_differs(&f.environment, &r.environment) {
            differ.push(format!("virtual clock: {d} (against `{}`)", first.arm.name));
        }
        if tune {
            let want = f
                .configuration
                .backing_kind()
                .map(|b| apply(&a.arm.knobs, b).backing);
            if want != r.configuration.backing_kind() {
                differ.push(format!(
                    "backing {}, the baseline's with its knobs applied is {}",
                    or_none(r.configuration.backing_kind().map(|b| b.as_str())),
                    or_none(want.map(|b| b.as_str()))
                ));
            }
            let key = kernel_key(&a.arm.knobs);
            for (what, (by, digest)) in [
                (
                    "vmlinux",
                    kernels
                        .entry(key.clone())
                        .or_insert((a.arm.name.as_str(), artifact(r, "vmlinux"))),
                ),
                (
                    "config",
                    configs
                        .entry(key.0.clone())
                        .or_insert((a.arm.name.as_str(), artifact(r, "config"))),
                ),
            ] {
                let got = artifact(r, what);
                if *digest != got {
                    differ.push(format!(
                        "{what} digest {} (`{by}`, built with the same Kconfig knobs{}, \
                         has {})",
                        or_none(got),
                        if what == "vmlinux" { " and image" } else { "" },
                        or_none(digest.as_ref())
                    ));
                }
            }
        }
        for d in differ {
            v.add(
                Check::ArmsMismatch,
                format!("arm `{}`: {d}: every arm runs alike", a.arm.name),
            );
        }
    }
}

/// What a tune arm's kernel is built and booted from: its Kconfig knobs, and whether it
/// boots the bzImage.
pub(super) type KernelKey = (Vec<Knob>, bool);

/// The [`KernelKey`] of an arm with `knobs`.
pub(super) fn kernel_key(knobs: &[Knob]) -> KernelKey {
    (
        knobs
            .iter()
            .copied()
            .filter(|k| matches!(k.change(), Change::Kconfig(_)))
            .collect(),
        knobs
            .iter()
            .any(|k| k.change() == Change::Vmm(VmmChange::BzImage)),
    )
}

/// The order against the rows: the `i`-th appearance of an arm is its row `i`; rows exist
/// for a prefix of the order only (all of it unless an arm is incomplete); along the order
/// the campaign is sequential, as one bundle's rows are (the single-bundle timing rules of
/// [`crate::verify`] applied to the launches in order): each request after the previous
/// launch's request and last stamp; and, after a fully stamped launch, an idle gap as long
/// as the shortest launch of any arm or 10 ms ([`gap_threshold`]; not looked for with
/// `--drop-caches`) is a warning ([`Check::ArmGap`]).
pub(super) fn check_order(v: &mut Verdict, plan: &ArmsPlan, arms: &[(ArmData, Vec<Sample>)]) {
    if arms.len() != plan.arms.len() {
        return;
    }
    let rows: BTreeMap<&str, &Vec<Sample>> =
        arms.iter().map(|(a, s)| (a.arm.name.as_str(), s)).collect();
    let threshold = gap_threshold(
        arms.iter()
            .flat_map(|(_, s)| s.iter())
            .filter(|s| fully_stamped(s))
            .filter_map(|s| last_stamp(s).map(|e| e - s.actual_request_ns)),
    );
    let drops = arms
        .iter()
        .any(|(a, _)| a.result.environment.harness.page_cache_dropped.is_some());
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut prev: Option<(&str, &Sample)> = None;
    let mut ended: Option<usize> = None;
    for (pos, (_, name)) in plan.order.iter().enumerate() {
        let Some(samples) = rows.get(name.as_str()) else {
            continue;
        };
        let i = seen.entry(name.as_str()).or_insert(0);
        let row = samples.get(*i);
        *i += 1;
        let Some(row) = row else {
            ended.get_or_insert(pos);
            continue;
        };
        let idx = *i - 1;
        if let Some(e) = ended {
            v.add(
                Check::ArmOrder,
                format!(
                    "launch {pos} (`{name}` row {idx}) has a row, launch {e} before it has none: \
                     an interrupted campaign stops, it does not skip"
                ),
            );
        }
        let t = row.actual_request_ns;
        if let Some((pn, p)) = prev {
            let end = last_stamp(p).unwrap_or(u64::MAX);
            if t <= p.actual_request_ns {
                v.add(
                    Check::ArmOrder,
                    format!(
                        "launch {pos}: `{name}` row {idx} was requested at {t} ns, not after \
                         `{pn}` row {} ({} ns), which the order puts before it",
                        p.index, p.actual_request_ns
                    ),
                );
            } else if t < end {
                v.add(
                    Check::ArmOrder,
                    format!(
                        "launch {pos}: `{name}` row {idx} was requested at {t} ns, before \
                         `{pn}` row {} ended ({end} ns): the campaign launches one at a time",
                        p.index
                    ),
                );
            } else if let Some(m) = threshold.filter(|_| fully_stamped(p) && !drops) {
                let gap = t - end;
                if gap >= m {
                    v.add(
                        Check::ArmGap,
                        format!(
                            "{gap} ns pass between the end of `{pn}` row {} and the request of \
                             launch {pos} (`{name}` row {idx}), at least the shortest launch \
                             or 10 ms ({m} ns): a dropped launch leaves such a gap, and so \
                             does a harness descheduled on a busy host",
                            p.index
                        ),
                    );
                }
            }
        }
        prev = Some((name.as_str(), row));
    }
    for (a, s) in arms {
        let planned = seen.get(a.arm.name.as_str()).copied().unwrap_or(0);
        if s.len() > planned {
            v.add(
                Check::ArmOrder,
                format!(
                    "arm `{}` has {} rows, the order launches it {planned} times",
                    a.arm.name,
                    s.len()
                ),
            );
        }
        if s.len() < planned && !a.result.contract.incomplete {
            v.add(
                Check::ArmOrder,
                format!(
                    "arm `{}` has {} rows, the order launches it {planned} times and the arm \
                     is not marked incomplete",
                    a.arm.name,
                    s.len()
                ),
            );
        }
    }
}
