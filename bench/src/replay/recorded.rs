//! The record a replay starts from: the bundle (or the arm of a tune, bisect or engines
//! directory) found, verified, and its `cmdline.txt` read from the verified bytes; and the
//! `truecold run` words that run its campaign again ([`replay_words`]).
//!
//! A bundle is untrusted: it is verified before anything of it is used (so its rows, its
//! contract and its run line agree), it is read only through `truecold_proof::fsio`'s
//! bounded reads in the same verification session, and nothing of it names a path the
//! replay opens: every path flag of the recorded line (`--out`, `--vmm`, `--guest-dir`, the
//! peer engines' binaries, the user's kernel sources) is dropped and replaced by the
//! replay's own, whose files are then held to the record's digests
//! ([`super::inputs`]). A flag only the reliability tests use (`--inject-tap-name`) and the
//! arms' own kernels (`--arm-kernel-config`, `--arm-guest-dir`) are refused.

use super::replay_error::ReplayError;
use std::path::{Path, PathBuf};
use truecold_proof::cmdline::{parse_cmdline_txt, Recorded, RUN_VALUE_FLAGS};
use truecold_proof::fsio;
use truecold_proof::kind::Kind;
use truecold_proof::names::CMDLINE_FILE;
use truecold_proof::schema::{HostKind, ResultJson};
use truecold_proof::verify::{escape_untrusted, verify_dir, Verdict};
use truecold_proto::kinds::Engine;

/// A verified record, ready to replay.
#[derive(Debug)]
pub struct Record {
    /// The bundle replayed (an arm's directory inside a tune, bisect or engines directory).
    pub bundle: PathBuf,
    /// Its verdict (valid; its rows and result are the ones compared).
    pub verdict: Verdict,
    /// Its `cmdline.txt`.
    pub recorded: Recorded,
    /// The bundle is the arm of this engine in an engines campaign.
    pub engine_arm: Option<Engine>,
}

impl Record {
    /// The verified `result.json`.
    pub fn result(&self) -> &ResultJson {
        self.verdict
            .result
            .as_ref()
            .expect("a valid verdict has its result")
    }
}

/// How deep under a tune, bisect or engines directory a bundle may lie.
const DEPTH: usize = crate::plan::replay_plan::ARM_LEVELS;

/// Finds, verifies and reads the record: `dir` itself when it is a bundle, else its `arm`.
pub fn load(dir: &Path, arm: Option<&str>) -> Result<Record, ReplayError> {
    let _session = fsio::session();
    let kind = Kind::of(dir);
    let bundle = match (kind, arm) {
        (Kind::Bundle, None) => dir.to_path_buf(),
        (Kind::Bundle, Some(_)) => return Err(ReplayError::ArmOfBundle(dir.to_path_buf())),
        (_, None) => {
            let mut found = Vec::new();
            truecold_proof::verify::bundles_inside(dir, DEPTH, &mut found);
            return Err(ReplayError::ArmNeeded {
                dir: dir.to_path_buf(),
                what: kind.describe(),
                bundles: found
                    .iter()
                    .filter_map(|p| p.strip_prefix(dir).ok())
                    .map(|p| escape_untrusted(&p.display().to_string()))
                    .collect(),
            });
        }
        (_, Some(a)) => {
            let p = dir.join(a);
            if !fsio::is_real_dir_below(dir, a) || Kind::of(&p) != Kind::Bundle {
                return Err(ReplayError::NoSuchArm {
                    dir: dir.to_path_buf(),
                    arm: escape_untrusted(a),
                });
            }
            p
        }
    };
    // The directory that holds the arm is verified whole (its arms' consistency, its own
    // sums over them); the arm then on its own, for its rows.
    let unverified = |d: &Path, v: &Verdict| ReplayError::Unverified {
        dir: d.to_path_buf(),
        first: v
            .unreadable
            .clone()
            .or_else(|| v.reasons.first().map(|r| r.detail.clone()))
            .map(|s| escape_untrusted(&s))
            .unwrap_or_default(),
    };
    if bundle != dir {
        let top = verify_dir(dir);
        if !top.is_valid() {
            return Err(unverified(dir, &top));
        }
    }
    let verdict = verify_dir(&bundle);
    if !verdict.is_valid() || verdict.result.is_none() || verdict.samples.is_none() {
        return Err(unverified(&bundle, &verdict));
    }
    let path = bundle.join(CMDLINE_FILE);
    let record_err = |why: String| ReplayError::Record {
        dir: bundle.clone(),
        why: escape_untrusted(&why),
    };
    let bytes =
        fsio::read_file(&path, fsio::MAX_PARSED_BYTES).map_err(|e| record_err(e.to_string()))?;
    let recorded = parse_cmdline_txt(&bytes).map_err(|e| record_err(e.to_string()))?;
    let engine_arm = match recorded.invocation.engines() {
        None => None,
        Some(Err(e)) => return Err(record_err(e)),
        Some(Ok(_)) => verdict.result.as_ref().map(|r| r.configuration.engine.kind),
    };
    Ok(Record {
        bundle,
        verdict,
        recorded,
        engine_arm,
    })
}

/// The replay's own paths.
#[derive(Clone, Copy, Debug)]
pub struct ReplayPaths<'a> {
    pub out: &'a Path,
    pub vmm: Option<&'a Path>,
    pub guest_dir: Option<&'a Path>,
}

/// Flags of the recorded line that name a path on the machine that recorded it: never
/// taken from a bundle (the replay's own go in their place).
const PATH_FLAGS: &[&str] = &[
    "--out",
    "--vmm",
    "--guest-dir",
    "--firecracker",
    "--cloud-hypervisor",
    "--qemu",
    "--kernel-config",
    "--kernel-fragment",
    "--kernel-source",
];

/// Flags a replay refuses: a fault only the reliability tests inject, and the arms' own
/// kernels (an engines arm's guest is replayed through `--guest-dir`, as any other).
const REFUSED_FLAGS: &[&str] = &[
    "--inject-tap-name",
    "--arm-kernel-config",
    "--arm-guest-dir",
];

/// The words after `truecold run` that run the recorded campaign again: the recorded
/// explicit line with every path flag dropped, `--linux` as `--nested` and L1's recorded
/// seed for a nested record (`l1_seed`), the arm's engine alone for an engines arm, and the
/// replay's own paths. `Err` says why the line is not replayed.
pub fn replay_words(
    recorded: &Recorded,
    host: HostKind,
    l1_seed: Option<u64>,
    engine_arm: Option<Engine>,
    paths: ReplayPaths<'_>,
) -> Result<Vec<String>, String> {
    let nested = host == HostKind::NestedEmulated;
    let mut v: Vec<String> = Vec::new();
    for (flag, value) in &recorded.invocation.flags {
        let f = flag.as_str();
        if REFUSED_FLAGS.contains(&f) {
            return Err(format!("it has {f}, which a replay does not run"));
        }
        if PATH_FLAGS.contains(&f) || matches!(f, "--seed" | "--engine" | "--engines") {
            continue;
        }
        if f == "--arm-backing" {
            let own = engine_arm
                .is_some_and(|e| value.split_once('=').is_some_and(|(n, _)| n == e.as_str()));
            if !own {
                continue;
            }
        }
        if nested && f == "--linux" {
            v.push("--nested".into());
            continue;
        }
        v.push(f.to_string());
        if RUN_VALUE_FLAGS.contains(&f) {
            v.push(value.clone());
        }
    }
    if let Some(e) = engine_arm {
        v.push("--engine".into());
        v.push(e.as_str().into());
    }
    if nested {
        let seed = l1_seed.ok_or("a nested record without L1's seed")?;
        v.push("--seed".into());
        v.push(truecold_proof::seed::hex(seed));
    }
    v.push("--out".into());
    v.push(paths.out.display().to_string());
    for (flag, p) in [("--vmm", paths.vmm), ("--guest-dir", paths.guest_dir)] {
        if let Some(p) = p {
            v.push(flag.into());
            v.push(p.display().to_string());
        }
    }
    Ok(v)
}
