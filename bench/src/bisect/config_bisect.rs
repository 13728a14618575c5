//! `truecold bisect config`: the smallest set of symbols between two resolved kernel
//! configs that explains a slowdown. Each candidate is the good config with a subset of the
//! bad one's assignments, resolved by olddefconfig, built incrementally, and judged in an
//! interleaved A/B against the good kernel ([`crate::tune::phase`]; one L1 boot per A/B in the
//! nested harness); Zeller's delta debugging ([`ddmin`]) narrows the set. A candidate that
//! does not build or breaks strict-ready is unresolved.

use super::bisect_error::{io, BisectRunError};
use super::bisect_steps::{base, context_host, default_out, note_small_n, save, KernelAb};
use crate::artifacts::guest_files::LinuxGuest;
use crate::artifacts::kernel_build;
use crate::artifacts::kernel_build::{KernelBuild, KernelError};
use crate::artifacts::own_kernel;
use crate::artifacts::own_kernel::SourceTree;
use crate::plan::bisect_plan::abs;
use crate::plan::bisect_plan::ConfigBisectPlan;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use truecold_proof::bisect::{
    BisectFile, BisectKind, BisectResult, Step, StepOutcome, BISECT_SCHEMA, STEPS_DIR,
};
use truecold_proof::digest::sha256_hex;
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::{Backing, HostKind};

pub use truecold_proof::kconfig::parse_config;

/// The assignments of `bad` that differ from `good` (`CONFIG_X=v`, `v` = `n` for unset),
/// sorted.
pub fn config_diff(good: &str, bad: &str) -> Vec<String> {
    let (g, b) = (parse_config(good), parse_config(bad));
    let mut keys: Vec<&String> = g.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let gv = g.get(k).map_or("n", String::as_str);
            let bv = b.get(k).map_or("n", String::as_str);
            (gv != bv).then(|| format!("{k}={bv}"))
        })
        .collect()
}

/// `good` with `assignments` (`CONFIG_X=v`) applied: each replaces the symbol's line, or is
/// appended; `=n` becomes `# CONFIG_X is not set`.
pub fn apply_assignments(good: &str, assignments: &[String]) -> String {
    let mut want: BTreeMap<&str, &str> = BTreeMap::new();
    for a in assignments {
        if let Some((k, v)) = a.split_once('=') {
            want.insert(k, v);
        }
    }
    let line_of = |k: &str, v: &str| {
        if v == "n" {
            format!("# {k} is not set")
        } else {
            format!("{k}={v}")
        }
    };
    let mut out = String::new();
    let mut done: Vec<&str> = Vec::new();
    for line in good.lines() {
        let sym = line
            .strip_prefix("# ")
            .and_then(|r| r.strip_suffix(" is not set"))
            .or_else(|| line.split_once('=').map(|(k, _)| k));
        match sym.and_then(|s| want.get_key_value(s)) {
            Some((k, v)) => {
                out.push_str(&line_of(k, v));
                done.push(k);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    for (k, v) in &want {
        if !done.contains(k) {
            out.push_str(&line_of(k, v));
            out.push('\n');
        }
    }
    out
}

/// What a delta-debugging test says of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The slowdown is there (the candidate is bad).
    Fails,
    /// It is not (good).
    Passes,
    /// Could not tell (did not build, broke strict-ready, inconclusive).
    Unresolved,
}

/// Zeller's ddmin: a 1-minimal subset of `c` for which `test` fails, given that `c` fails.
/// `test` is called on subsets and complements; unresolved counts as not failing.
pub fn ddmin<T: Clone + PartialEq>(
    c: Vec<T>,
    test: &mut dyn FnMut(&[T]) -> Result<Probe, BisectRunError>,
) -> Result<Vec<T>, BisectRunError> {
    let mut c = c;
    let mut n = 2usize;
    while c.len() >= 2 {
        let chunks: Vec<Vec<T>> = split(&c, n);
        let mut reduced = false;
        for s in &chunks {
            if test(s)? == Probe::Fails {
                c = s.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && n > 2 {
            for s in &chunks {
                let comp: Vec<T> = c.iter().filter(|x| !s.contains(x)).cloned().collect();
                if test(&comp)? == Probe::Fails {
                    c = comp;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= c.len() {
                break;
            }
            n = (2 * n).min(c.len());
        }
    }
    Ok(c)
}

/// `c` cut into `n` contiguous chunks of near-equal size.
fn split<T: Clone>(c: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.min(c.len()).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (c.len() - start) / (n - i);
        out.push(c[start..end].to_vec());
        start = end;
    }
    out
}

/// A config bisect under way: the two sides' kernels, where candidates are built, and the
/// candidates already measured by resolved config.
struct ConfigSearch<'a> {
    a: &'a ConfigBisectPlan,
    invocation: &'a str,
    out: PathBuf,
    base_dir: PathBuf,
    base: LinuxGuest,
    host: HostKind,
    deadline_ms: u64,
    script: PathBuf,
    root: PathBuf,
    /// `--kernel-tree` as the build reads it (a tree without git through its snapshot).
    source: Option<SourceTree>,
    good_dir: PathBuf,
    good_cfg: String,
    good_sha: String,
    bad_sha: String,
    /// Every assignment that differs (the whole bad side).
    diff: Vec<String>,
    /// Results by resolved config: a candidate that resolves like an earlier one is not
    /// rerun; its step points at the earlier step's campaign (the same resolved config, so
    /// the same kernel), so every candidate ddmin judged, a culprit above all, has its step.
    seen: BTreeMap<String, usize>,
}

/// 16 hex digits of a config's digest: its kernel directory's and candidate file's key.
fn config_key(text: &str) -> String {
    sha256_hex(text.as_bytes())[..16].to_string()
}

fn read_text(p: &Path) -> Result<String, BisectRunError> {
    std::fs::read_to_string(p).map_err(io("read", p))
}

impl ConfigSearch<'_> {
    fn build(&self, cfg: &Path, dir: &Path) -> Result<PathBuf, KernelError> {
        KernelBuild {
            script: &self.script,
            variant: "config",
            args: vec![cfg.as_os_str().to_owned()],
            tree: self.source.as_ref().map(SourceTree::tree),
            git_dir: self.source.as_ref().and_then(SourceTree::git_dir),
            // Every step of this bisect in one object directory, started from the base
            // kernel's objects: a step recompiles only the symbols it changes.
            lineage: self
                .source
                .is_none()
                .then(|| format!("bisect-{}", &self.good_sha[..16.min(self.good_sha.len())])),
            lineage_from: self.source.is_none().then(|| "base".to_string()),
        }
        .guest_dir(dir, &self.base)
    }

    /// Builds, resolves and measures one candidate (the good config with `set` applied),
    /// appending its step(s) to `f`.
    fn measure(
        &mut self,
        set: &[String],
        f: &mut BisectFile,
        log: &mut String,
    ) -> Result<StepOutcome, BisectRunError> {
        let t1 = Instant::now();
        let text = apply_assignments(&self.good_cfg, set);
        let cdir = self.root.join(format!("config-{}", config_key(&text)));
        std::fs::create_dir_all(&self.root).map_err(io("create", &self.root))?;
        let cfile = self
            .root
            .join(format!("candidate-{}.config", config_key(&text)));
        std::fs::write(&cfile, &text).map_err(io("write", &cfile))?;
        let dir = match self.build(&cfile, &cdir) {
            Ok(d) => d,
            Err(e @ KernelError::Failed { .. }) => {
                let why = truecold_proto::measure::error_chain(&e);
                let last = why.lines().last().unwrap_or("").to_string();
                f.steps.push(config_step(
                    set,
                    t1,
                    StepOutcome::BuildFailed,
                    None,
                    0,
                    None,
                    format!("the kernel did not build: {last}"),
                    None,
                ));
                log.push_str(&format!("[{}] build failed\n", set.join(" ")));
                save(&self.out, f, log)?;
                return Ok(StepOutcome::BuildFailed);
            }
            Err(e) => return Err(BisectRunError::Kernel("candidate", e)),
        };
        let resolved = read_text(&dir.join("config"))?;
        let sha = sha256_hex(resolved.as_bytes());
        if let Some(o) = self.known(set, &sha, t1, f, log)? {
            return Ok(o);
        }
        self.ab(set, &dir, &sha, t1, f, log)
    }

    /// A candidate that needs no campaign: it resolves to one side's config, or like an
    /// earlier candidate (whose step it repeats).
    fn known(
        &self,
        set: &[String],
        sha: &str,
        t1: Instant,
        f: &mut BisectFile,
        log: &mut String,
    ) -> Result<Option<StepOutcome>, BisectRunError> {
        let side = if sha == self.good_sha {
            Some(StepOutcome::SameAsGood)
        } else if sha == self.bad_sha && set.len() != self.diff.len() {
            Some(StepOutcome::SameAsBad)
        } else {
            None
        };
        if let Some(o) = side {
            f.steps.push(config_step(
                set,
                t1,
                o,
                None,
                0,
                None,
                "olddefconfig resolves the candidate to that config; nothing to measure".into(),
                Some(sha.to_string()),
            ));
            log.push_str(&format!("[{}] {}\n", set.join(" "), o.as_str()));
            save(&self.out, f, log)?;
            return Ok(Some(o));
        }
        let Some(&k) = self.seen.get(sha) else {
            return Ok(None);
        };
        let earlier = f.steps[k].clone();
        let o = earlier.outcome;
        f.steps.push(Step {
            symbols: set.to_vec(),
            why: format!(
                "olddefconfig resolves it like [{}] (step {}), whose campaign measured it: {}",
                earlier.symbols.join(" "),
                k + 1,
                earlier.why
            ),
            wall_seconds: t1.elapsed().as_secs(),
            ..earlier
        });
        log.push_str(&format!(
            "[{}] resolves like an earlier candidate (step {}): {}\n",
            set.join(" "),
            k + 1,
            o.as_str()
        ));
        save(&self.out, f, log)?;
        Ok(Some(o))
    }

    /// The interleaved A/B of the candidate kernel in `dir` against the good one, a look
    /// at a time while inconclusive ([`truecold_proof::bisect::Looks`]: the same rule as a
    /// commit step's); `t1`: when the candidate's build began.
    #[allow(clippy::too_many_arguments)]
    fn ab(
        &mut self,
        set: &[String],
        dir: &Path,
        sha: &str,
        t1: Instant,
        f: &mut BisectFile,
        log: &mut String,
    ) -> Result<StepOutcome, BisectRunError> {
        let ab = KernelAb {
            nested: self.host == HostKind::NestedEmulated,
            vmm: self.a.judge.paths.vmm.as_deref(),
            base_dir: &self.base_dir,
            good_dir: &self.good_dir,
            backing: Backing::Anon,
            deadline_ms: self.deadline_ms,
            invocation: self.invocation,
        };
        let mut look = 1;
        loop {
            let what = format!("cfg{}", f.steps.len() + 1);
            let (rel, planned, jd) = ab.look(f, &self.out, dir, &what, look)?;
            let o = jd.outcome;
            let why = jd.why.clone();
            crate::note!(
                "truecold bisect config: [{}] (look {look}, {planned} launches a side): {} — {why}",
                set.join(" "),
                o.as_str()
            );
            log.push_str(&format!(
                "[{}] look {look}, n={planned}: {} — {why}\n",
                set.join(" "),
                o.as_str()
            ));
            let mut st = config_step(
                set,
                t1,
                o,
                Some(rel),
                planned,
                Some(jd),
                why,
                Some(sha.to_string()),
            );
            st.look = Some(look);
            f.steps.push(st);
            save(&self.out, f, log)?;
            match f.looks().next(look, o) {
                Some(next) => look = next,
                None => {
                    self.seen.insert(sha.to_string(), f.steps.len() - 1);
                    return Ok(o);
                }
            }
        }
    }
}

/// A config bisect's step for the candidate `set`, begun at `t1`.
#[allow(clippy::too_many_arguments)]
fn config_step(
    set: &[String],
    t1: Instant,
    outcome: StepOutcome,
    dir: Option<String>,
    planned: u64,
    judgement: Option<truecold_proof::bisect::Judgement>,
    why: String,
    sha: Option<String>,
) -> Step {
    Step {
        dir,
        commit: None,
        subject: None,
        symbols: set.to_vec(),
        config_sha256: sha,
        planned,
        look: None,
        outcome,
        judgement,
        why,
        wall_seconds: t1.elapsed().as_secs(),
    }
}

/// The new record of a config bisect between the resolved configs.
fn config_record(
    s: &ConfigSearch<'_>,
    bad_cfg: &str,
    (n, max_n): (u64, u64),
    invocation: &str,
) -> BisectFile {
    let a = s.a;
    BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Config,
        host_kind: s.host,
        clock: s.host.clock(),
        contract: ContractKind::Linux,
        vcpus: u32::from(a.context.vcpus.get()),
        mem_bytes: a.context.mem.bytes(),
        judge: a.judge.options.clone(),
        n,
        max_n,
        source: a
            .kernel_tree
            .as_deref()
            .map(abs)
            .unwrap_or_else(|| "the pinned linux-source-6.12 (kernel-config/build.sh)".to_string()),
        good: format!("{} (resolved sha256 {})", a.good.display(), s.good_sha),
        bad: format!(
            "{} (resolved sha256 {})",
            a.bad.display(),
            sha256_hex(bad_cfg.as_bytes())
        ),
        steps: Vec::new(),
        result: None,
        wall_seconds: None,
        commands: vec![invocation.to_string()],
        kernel: None,
    }
}

/// `truecold bisect config`: returns the directory.
pub fn config(a: &ConfigBisectPlan, invocation: &str) -> Result<PathBuf, BisectRunError> {
    let t0 = Instant::now();
    note_small_n(&a.judge);
    let sizes = (a.judge.n, a.judge.max_n);
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out("config", &a.context));
    if out.symlink_metadata().is_ok() {
        return Err(BisectRunError::OutExists(out));
    }
    let (base_dir, base) = base(&a.judge)?;
    let (host, deadline_ms) = context_host(&a.context)?;
    let mut s = ConfigSearch {
        a,
        invocation,
        out: out.clone(),
        base_dir,
        base,
        host,
        deadline_ms,
        script: a.judge.paths.script.clone(),
        root: a.judge.paths.kernel_root.clone(),
        source: None,
        good_dir: PathBuf::new(),
        good_cfg: String::new(),
        good_sha: String::new(),
        bad_sha: String::new(),
        diff: Vec::new(),
        seen: BTreeMap::new(),
    };
    let good_in = read_text(&a.good)?;
    let bad_in = read_text(&a.bad)?;
    // What strict-ready needs of each side, before anything is built: the checks of
    // `--kernel-config` (a side that cannot boot to strict-ready has nothing to measure).
    let vcpus = u32::from(a.context.vcpus.get());
    for (path, text) in [(&a.good, &good_in), (&a.bad, &bad_in)] {
        own_kernel::require(path, &parse_config(text), vcpus, &[])?;
    }
    if let Some(t) = &a.kernel_tree {
        s.source = Some(own_kernel::check_source(t, &kernel_build::cache_root())?);
    }
    let good_dir = s
        .build(
            &a.good,
            &s.root.join(format!("config-{}", config_key(&good_in))),
        )
        .map_err(|e| BisectRunError::Kernel("good", e))?;
    let bad_dir = s
        .build(
            &a.bad,
            &s.root.join(format!("config-{}", config_key(&bad_in))),
        )
        .map_err(|e| BisectRunError::Kernel("bad", e))?;
    let good_cfg = read_text(&good_dir.join("config"))?;
    let bad_cfg = read_text(&bad_dir.join("config"))?;
    s.diff = config_diff(&good_cfg, &bad_cfg);
    if s.diff.is_empty() {
        return Err(BisectRunError::SameConfig);
    }
    std::fs::create_dir_all(out.join(STEPS_DIR)).map_err(io("create", &out))?;
    s.out = std::path::absolute(&out).map_err(io("resolve", &out))?;
    s.good_sha = sha256_hex(good_cfg.as_bytes());
    s.bad_sha = sha256_hex(bad_cfg.as_bytes());
    s.good_dir = good_dir;
    s.good_cfg = good_cfg;
    let mut f = config_record(&s, &bad_cfg, sizes, invocation);
    let mut log = format!(
        "truecold bisect config: {} assignment(s) differ between the resolved configs:\n{}\n",
        s.diff.len(),
        s.diff
            .iter()
            .map(|d| format!("  {d}\n"))
            .collect::<String>()
    );
    save(&s.out, &f, &log)?;
    // 1. The whole difference must be bad.
    let whole = s.measure(&s.diff.clone(), &mut f, &mut log)?;
    if whole != StepOutcome::Regression {
        f.result = Some(BisectResult::not_bisected(format!(
            "Not bisected: the bad config measured {} against the good one.",
            whole.as_str()
        )));
        f.wall_seconds = Some(t0.elapsed().as_secs());
        save(&s.out, &f, &log)?;
        return Err(BisectRunError::NotBad(whole.as_str().to_string()));
    }
    // 2. ddmin over the assignments.
    let probe = |o: StepOutcome| match o.exit_code() {
        1 => Probe::Fails,
        0 => Probe::Passes,
        _ => Probe::Unresolved,
    };
    let diff = s.diff.clone();
    let culprits = {
        let mut test = |set: &[String]| -> Result<Probe, BisectRunError> {
            Ok(probe(s.measure(set, &mut f, &mut log)?))
        };
        ddmin(diff, &mut test)?
    };
    // 3. Each culprit's effect alone (measured unless ddmin already did).
    let mut effects = Vec::new();
    for c in &culprits {
        let one = vec![c.clone()];
        let at = |f: &BisectFile| {
            f.steps
                .iter()
                .rposition(|st| st.symbols == one && st.outcome.measured())
        };
        if at(&f).is_none() {
            s.measure(&one, &mut f, &mut log)?;
        }
        if let Some(i) = at(&f) {
            effects.push((c.clone(), i));
        }
    }
    f.result = Some(config_result(&f, culprits, effects));
    f.wall_seconds = Some(t0.elapsed().as_secs());
    save(&s.out, &f, &log)?;
    Ok(s.out)
}

/// The result of a finished config bisect: the culprits, the step that measured them
/// together, each one's own effect.
fn config_result(
    f: &BisectFile,
    culprits: Vec<String>,
    effects: Vec<(String, usize)>,
) -> BisectResult {
    let bad_step = f
        .steps
        .iter()
        .rposition(|s| s.symbols == culprits && s.outcome.exit_code() == 1);
    BisectResult {
        first_bad: None,
        last_good: None,
        summary: format!(
            "Culprit{}: `{}` — the smallest set of the bad config's assignments found (ddmin) \
             that, applied to the good config, makes the boot slower.",
            if culprits.len() == 1 { "" } else { "s" },
            culprits.join("`, `")
        ),
        culprits,
        bad_step,
        good_step: None,
        effects,
        profile: None,
    }
}

#[cfg(test)]
mod tests;
