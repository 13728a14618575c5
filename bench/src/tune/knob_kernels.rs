//! The kernels of a tune's arms: each Kconfig knob set's guest directory, built over
//! truecold's base ([`ensure_kernel`]) or over the user's own kernel ([`OwnBase`]), and the
//! knobs left to screen over the user's kernel (`screen_knobs`).

use super::phase_plan::variant_name;
use super::tune_error::TuneError;
use crate::artifacts::guest_files::LinuxGuest;
use crate::artifacts::kernel_build::{self, Got, KernelBuild};
use crate::artifacts::own_kernel::{self, OwnKernel};
use std::path::{Path, PathBuf};
use truecold_proof::kconfig::{not_carried_lines, sets_all, UserKernel};
use truecold_proof::tune::own_kernel_start;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{Change, Knob};

/// Builds (or finds, cached by content) the guest directory of the Kconfig knob set
/// `kconfig`: the kernel from `script tune <dir> <fragments…>`, the base guest's initramfs
/// and init beside it.
pub fn ensure_kernel(
    kconfig: &[Knob],
    base: &LinuxGuest,
    root: &Path,
    script: &Path,
) -> Result<PathBuf, TuneError> {
    ensure_kernel_got(kconfig, base, root, script).map(|g| g.dir)
}

/// [`ensure_kernel`], saying whether the kernel was found in the build script's cache.
pub fn ensure_kernel_got(
    kconfig: &[Knob],
    base: &LinuxGuest,
    root: &Path,
    script: &Path,
) -> Result<Got, TuneError> {
    let name = variant_name(kconfig);
    let dir = root.join(&name);
    let frags = root.join(format!("{name}.fragments"));
    std::fs::create_dir_all(&frags).map_err(PathIoError::at("create directory", &frags))?;
    let mut paths = Vec::new();
    for k in kconfig {
        if let (Change::Kconfig(text), Some(file)) = (k.change(), k.fragment_name()) {
            let p = frags.join(file);
            std::fs::write(&p, text).map_err(PathIoError::at("write", &p))?;
            paths.push(p.into_os_string());
        }
    }
    let build = KernelBuild {
        script,
        variant: "tune",
        args: paths,
        tree: None,
        git_dir: None,
        lineage: None,
        // From the base kernel's objects (the script's default for a tune arm): only what the
        // knobs' symbols change is compiled.
        lineage_from: None,
    };
    build.got(&dir, base).map_err(|source| TuneError::Kernel {
        knobs: name,
        source,
    })
}

/// The user's kernel of a tune (`--kernel-config` / `--kernel-fragment`), built: what the
/// baseline boots and every Kconfig knob's fragment goes over.
pub struct OwnBase {
    pub kernel: OwnKernel,
    /// The config file's bytes as read (and checked) once.
    pub bytes: Vec<u8>,
    /// `tune.json`'s record of it.
    pub record: UserKernel,
    /// Its guest directory (the baseline's).
    pub dir: PathBuf,
    /// Its resolved config.
    pub resolved: String,
}

impl OwnBase {
    /// Builds (or finds cached) the user's kernel `k` under `root` for `vcpus` vCPUs, beside
    /// the base guest's initramfs and init; the symbols that did not carry over noted and
    /// recorded.
    pub fn build(
        k: &OwnKernel,
        vcpus: u32,
        base: &LinuxGuest,
        root: &Path,
        script: &Path,
    ) -> Result<OwnBase, TuneError> {
        let (bytes, _) = own_kernel::read_config(&k.config)?;
        let (dir, nc) = own_kernel::prepare(k, vcpus, &[], script, base, root)?;
        own_kernel::note_not_carried("", &k.config, &dir, &nc);
        let cfg = dir.join("config");
        let resolved = std::fs::read_to_string(&cfg).map_err(PathIoError::at("read", &cfg))?;
        let record = UserKernel {
            form: k.form,
            sha256: truecold_proof::digest::sha256_hex(&bytes),
            given_as: k.config.display().to_string(),
            source: k
                .source
                .as_deref()
                .map(|s| std::path::absolute(s).unwrap_or_else(|_| s.to_path_buf()))
                .map(|s| s.display().to_string()),
            not_carried: not_carried_lines(&String::from_utf8_lossy(&bytes), &resolved),
        };
        Ok(OwnBase {
            kernel: k.clone(),
            bytes,
            record,
            dir,
            resolved,
        })
    }

    /// The Kconfig knobs of `knobs` whose every symbol the resolved config already sets (an
    /// arm of one would measure this kernel again).
    pub fn already_set(&self, knobs: &[Knob]) -> Vec<Knob> {
        knobs
            .iter()
            .copied()
            .filter(|k| match k.change() {
                Change::Kconfig(text) => sets_all(&self.resolved, text),
                _ => false,
            })
            .collect()
    }

    /// The guest directory of the Kconfig knob set `kconfig` over this kernel: the user's file
    /// with the knobs' lines after it ([`own_kernel_start`], what `recommended/reproduce.sh`
    /// writes), built as the user's kernel is; each knob's fragment must have taken.
    pub(super) fn arm_kernel(
        &self,
        kconfig: &[Knob],
        base: &LinuxGuest,
        root: &Path,
        script: &Path,
    ) -> Result<Got, TuneError> {
        let name = variant_name(kconfig);
        std::fs::create_dir_all(root).map_err(PathIoError::at("create directory", root))?;
        let file = root.join(format!("{name}.own.config"));
        let start = own_kernel_start(&self.bytes, kconfig, &self.record);
        std::fs::write(&file, &start).map_err(PathIoError::at("write", &file))?;
        let k = OwnKernel {
            config: file,
            form: self.kernel.form,
            source: self.kernel.source.clone(),
        };
        // What every boot needs is checked; what more vCPUs need is measured, as on
        // truecold's base: a knob that takes SMP away (`no-smp`) breaks strict-ready at 2 vCPUs
        // and is reported so, never refused.
        // Built from the user's kernel's objects: only what the knobs' symbols change is
        // compiled (a full build of a large config takes many minutes).
        let from = kernel_build::config_lineage(&self.bytes);
        let (got, _) = own_kernel::prepare_got(&k, 1, &[], script, base, root, Some(from))?;
        let cfg = got.dir.join("config");
        let resolved = std::fs::read_to_string(&cfg).map_err(PathIoError::at("read", &cfg))?;
        for knob in kconfig {
            if let Change::Kconfig(text) = knob.change() {
                let lost = not_carried_lines(text, &resolved);
                if !lost.is_empty() {
                    return Err(TuneError::KnobDidNotTake {
                        knob: *knob,
                        lines: lost.join("; "),
                        config: cfg,
                    });
                }
            }
        }
        Ok(got)
    }
}

/// The knobs to screen over the user's kernel `own`: `knobs` less the Kconfig knobs it
/// already sets (refused when `listed`, left out otherwise, with a note); and those.
pub(super) fn screen_knobs(
    knobs: Vec<Knob>,
    own: Option<&OwnBase>,
    listed: bool,
) -> Result<(Vec<Knob>, Vec<Knob>), TuneError> {
    let Some(own) = own else {
        return Ok((knobs, Vec::new()));
    };
    let set = own.already_set(&knobs);
    if set.is_empty() {
        return Ok((knobs, set));
    }
    if listed {
        return Err(TuneError::KnobAlreadySet {
            knobs: variant_name(&set).replace('+', ","),
            config: own.dir.join("config"),
        });
    }
    crate::note!(
        "truecold: tune: left out (your kernel already sets every symbol of their fragment): {}",
        variant_name(&set).replace('+', ", ")
    );
    let rest: Vec<Knob> = knobs.into_iter().filter(|k| !set.contains(k)).collect();
    if rest.is_empty() {
        return Err(TuneError::NoKnobLeft);
    }
    Ok((rest, set))
}
