//! A kernel for a tune arm or a bisect step: `kernel-config/build.sh` (reproducible, cached
//! by content) into a complete guest directory — the kernel files (vmlinux, bzImage, config,
//! manifest.json) and, beside them, every other file of the base guest directory (its
//! initramfs and init, and what the nested harness packs with them).

use super::guest_files::LinuxGuest;
use crate::terminal::output;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use truecold_proto::path_io::PathIoError;

/// The build script, relative to the repository root (the working directory every command
/// runs from), unless `--kernel-build` names another.
pub const DEFAULT_KERNEL_BUILD: &str = "kernel-config/build.sh";

/// What the build script writes (never copied from the base guest).
pub const KERNEL_FILES: [&str; 4] = ["vmlinux", "bzImage", "config", "manifest.json"];

/// One invocation of the build script.
#[derive(Clone, Debug)]
pub struct KernelBuild<'a> {
    /// `kernel-config/build.sh`.
    pub script: &'a Path,
    /// Its variant (`base`, `tune`, `config`).
    pub variant: &'a str,
    /// Its arguments after the output directory (tune fragments, the start config).
    pub args: Vec<OsString>,
    /// `TRUECOLD_KERNEL_TREE`: a kernel git work tree to build instead of the package.
    pub tree: Option<&'a Path>,
    /// The git directory that stands for `tree`'s own (`GIT_DIR`, with `GIT_WORK_TREE` the
    /// tree): a tree without git, snapshotted ([`crate::artifacts::own_kernel::snapshot`]).
    pub git_dir: Option<&'a Path>,
    /// The pinned source's object directory to build in (`TRUECOLD_KERNEL_LINEAGE`; `None`:
    /// the script's default for the variant).
    pub lineage: Option<String>,
    /// The lineage whose objects a new object directory starts from
    /// (`TRUECOLD_KERNEL_LINEAGE_FROM`: a tune arm's baseline, a bisect's start).
    pub lineage_from: Option<String>,
}

/// The pinned source's object directory `kernel-config/build.sh` builds a complete `.config`
/// with these bytes in by default: `config-` and the first 16 hex digits of its SHA-256.
pub fn config_lineage(config_bytes: &[u8]) -> String {
    format!(
        "config-{}",
        &truecold_proof::digest::sha256_hex(config_bytes)[..16]
    )
}

/// The kernel cache, `${TRUECOLD_CACHE:-/var/cache/truecold}`, as `kernel-config/build.sh`
/// reads it.
pub fn cache_root() -> PathBuf {
    std::env::var_os("TRUECOLD_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/truecold"))
}

/// Why a kernel is not there.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(
        "the kernel build script {0} is missing (run from the repository root, or pass \
         --kernel-build kernel-config/build.sh)"
    )]
    ScriptMissing(PathBuf),
    #[error("`{command}` failed ({status}); its last lines:\n{tail}")]
    Failed {
        command: String,
        status: String,
        tail: String,
    },
    #[error(transparent)]
    Io(#[from] PathIoError),
}

/// A kernel the build script got: its guest directory, and whether the script found it in
/// its cache (its `cache hit` line) instead of building it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Got {
    pub dir: PathBuf,
    pub cached: bool,
}

/// Whether the build script's output says it found the kernel in its cache
/// (`kernel-config/build.sh: cache hit <dir>`).
pub fn says_cache_hit(output: &str) -> bool {
    output
        .lines()
        .any(|l| l.starts_with("kernel-config/build.sh: cache hit "))
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> KernelError {
    let at = PathIoError::at(op, path);
    move |source| KernelError::Io(at(source))
}

impl KernelBuild<'_> {
    /// The command line with these arguments after `dir`, as a user would type it.
    fn command_line(&self, dir: &Path, args: &[OsString]) -> String {
        let mut s = String::new();
        if let (Some(g), Some(t)) = (self.git_dir, self.tree) {
            s.push_str(&format!(
                "GIT_DIR={} GIT_WORK_TREE={} ",
                g.display(),
                t.display()
            ));
        }
        if let Some(t) = self.tree {
            s.push_str(&format!("TRUECOLD_KERNEL_TREE={} ", t.display()));
        }
        if let Some(l) = &self.lineage {
            s.push_str(&format!("TRUECOLD_KERNEL_LINEAGE={l} "));
        }
        if let Some(l) = &self.lineage_from {
            s.push_str(&format!("TRUECOLD_KERNEL_LINEAGE_FROM={l} "));
        }
        s.push_str(&format!(
            "bash {} {} {}",
            self.script.display(),
            self.variant,
            dir.display()
        ));
        for a in args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    /// Builds (or finds cached) the kernel into `dir` and copies every other regular file of
    /// the base guest's directory (the one holding `base.initramfs`) beside it. The script's
    /// own output is passed through to stderr.
    pub fn guest_dir(&self, dir: &Path, base: &LinuxGuest) -> Result<PathBuf, KernelError> {
        self.got(dir, base).map(|g| g.dir)
    }

    /// [`KernelBuild::guest_dir`], saying whether the script found the kernel in its cache.
    pub fn got(&self, dir: &Path, base: &LinuxGuest) -> Result<Got, KernelError> {
        if !self.script.is_file() {
            return Err(KernelError::ScriptMissing(self.script.to_path_buf()));
        }
        // The script merges its fragments from inside its object directory, where a relative
        // path names nothing: every path argument goes to it absolute.
        let args = absolute_args(&self.args).map_err(io("resolve", dir))?;
        let command = self.command_line(dir, &args);
        crate::note!("truecold: kernel: {command}");
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(self.script).arg(self.variant).arg(dir).args(&args);
        match self.tree {
            Some(t) => cmd.env("TRUECOLD_KERNEL_TREE", t),
            None => cmd.env_remove("TRUECOLD_KERNEL_TREE"),
        };
        match (self.git_dir, self.tree) {
            (Some(g), Some(t)) => cmd.env("GIT_DIR", g).env("GIT_WORK_TREE", t),
            _ => cmd.env_remove("GIT_DIR").env_remove("GIT_WORK_TREE"),
        };
        for (var, v) in [
            ("TRUECOLD_KERNEL_LINEAGE", &self.lineage),
            ("TRUECOLD_KERNEL_LINEAGE_FROM", &self.lineage_from),
        ] {
            match v {
                Some(v) => cmd.env(var, v),
                None => cmd.env_remove(var),
            };
        }
        let out = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(io("run", self.script))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The build's own output is a note (`--quiet` hides it) unless the build failed.
        if !output::quiet() || !out.status.success() {
            eprint!("{text}");
        }
        if !out.status.success() {
            let lines: Vec<&str> = text.lines().collect();
            return Err(KernelError::Failed {
                command,
                status: out.status.to_string(),
                tail: lines[lines.len().saturating_sub(20)..].join("\n"),
            });
        }
        let from = base.initramfs.parent().unwrap_or(Path::new("."));
        for e in std::fs::read_dir(from).map_err(io("list", from))? {
            let e = e.map_err(io("list", from))?;
            let name = e.file_name();
            let kernel_file = KERNEL_FILES.iter().any(|k| name == *k);
            if kernel_file || !e.file_type().map_err(io("stat", &e.path()))?.is_file() {
                continue;
            }
            let to = dir.join(&name);
            std::fs::copy(e.path(), &to).map_err(io("copy into", &to))?;
        }
        Ok(Got {
            dir: dir.to_path_buf(),
            cached: says_cache_hit(&text),
        })
    }
}

/// The build script's arguments after its output directory (fragment files, a start config),
/// each made absolute against the current directory (not resolved through links: the script
/// hashes and reads the file it is given).
fn absolute_args(args: &[OsString]) -> std::io::Result<Vec<OsString>> {
    args.iter()
        .map(|a| std::path::absolute(a).map(PathBuf::into_os_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_hit_is_the_scripts_own_line() {
        assert!(says_cache_hit(
            "x\nkernel-config/build.sh: cache hit /var/cache/truecold/kernel/k\n"
        ));
        assert!(!says_cache_hit(
            "kernel-config/build.sh: building tune in /b (-j1)\n"
        ));
        assert!(!says_cache_hit("make: cache hit\n"));
    }

    #[test]
    fn relative_fragments_reach_the_script_absolute_and_naming_the_same_file() {
        // The test runs in the crate's directory: src/artifacts/kernel_build.rs is this file.
        let args = absolute_args(&[OsString::from("src/artifacts/kernel_build.rs")]).unwrap();
        let p = Path::new(&args[0]);
        assert!(p.is_absolute(), "{p:?}");
        assert_eq!(
            std::fs::read(p).unwrap(),
            std::fs::read("src/artifacts/kernel_build.rs").unwrap()
        );
        let already = absolute_args(&[OsString::from("/etc/hostname")]).unwrap();
        assert_eq!(already, [OsString::from("/etc/hostname")]);
    }
}
