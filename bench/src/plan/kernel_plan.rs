//! Where kernels come from and go: a tune's or a bisect's [`KernelPlan`] (the VMM, the base
//! guest, the kernel directory, the build script) and the user's own kernel as the flags
//! name it ([`kernel_config_of`]).

use super::arg_error::ArgError;
use crate::artifacts::guest_files::guest_dir;
use crate::artifacts::kernel_build::DEFAULT_KERNEL_BUILD;
use crate::artifacts::own_kernel::{ConfigForm, OwnKernel};
use crate::cli::{KernelConfigArgs, KernelPaths};
use std::path::{Path, PathBuf};

/// Where a tune's or a bisect's kernels come from and go, defaults resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// The truecold-vmm binary (`None`: next to this binary).
    pub vmm: Option<PathBuf>,
    /// The base guest directory in effect: its initramfs and init go with every kernel.
    pub guest_dir: PathBuf,
    /// Where the kernels are built.
    pub kernel_root: PathBuf,
    /// The kernel build script.
    pub script: PathBuf,
}

impl KernelPlan {
    /// `--vmm`, `--guest-dir` (else $TRUECOLD_GUEST_DIR, else out/guest), `--kernel-dir`
    /// (else `default_root`), `--kernel-build` (else kernel-config/build.sh).
    pub fn from_cli(p: &KernelPaths, default_root: &str) -> KernelPlan {
        KernelPlan {
            vmm: p.vmm.clone(),
            guest_dir: guest_dir(p.guest_dir.as_deref()),
            kernel_root: p
                .kernel_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(default_root)),
            script: p
                .kernel_build
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_KERNEL_BUILD)),
        }
    }
}

/// `--kernel-config` / `--kernel-fragment` of `truecold tune` and `truecold bisect run/step`
/// (with `source`: tune's `--kernel-source`; a bisect builds its tree) as the user's kernel;
/// `None` when neither is given.
pub fn kernel_config_of(
    k: &KernelConfigArgs,
    source: Option<&Path>,
) -> Result<Option<OwnKernel>, ArgError> {
    let (config, form) = match (&k.kernel_config, &k.kernel_fragment) {
        (Some(c), None) => (c, ConfigForm::Full),
        (None, Some(f)) => (f, ConfigForm::Fragment),
        (Some(_), Some(_)) => {
            return Err(ArgError::OwnKernel(
                "give a complete .config (--kernel-config) or a fragment over truecold's base \
                 (--kernel-fragment), not both",
            ))
        }
        (None, None) if source.is_some() => {
            return Err(ArgError::OwnKernel(
                "--kernel-source builds the kernel --kernel-config or --kernel-fragment \
                 describes: give one",
            ))
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(OwnKernel {
        config: config.clone(),
        form,
        source: source.map(Path::to_path_buf),
    }))
}
