//! The user's own kernel for `truecold run` (`--kernel-config FILE` or `--kernel-fragment
//! FILE`, `--kernel-source DIR`): checked before anything is built, built by the same
//! reproducible, cached recipe as every other kernel (`kernel-config/build.sh config`: the
//! complete `.config` resolved by `olddefconfig`; `build.sh tune`: the fragment merged over
//! tinyconfig and truecold's `base.config`, as a tune knob is), checked again as resolved, and
//! set beside the base guest's init and initramfs in a guest directory of its own
//! (`out/run-kernels/<key>/`).
//!
//! What strict-ready needs of a kernel is [`REQUIREMENTS`], one list: each symbol with the
//! reason guest-init or the VMM needs it. A config that lacks one is refused before the
//! build, every missing symbol named; a symbol of the given config that `olddefconfig` did
//! not keep (a 6.1 config on the pinned 6.12 source, say) is reported, never hidden.

use super::guest_files::LinuxGuest;
use super::kernel_build;
use super::kernel_build::{KernelBuild, KernelError};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
pub use truecold_proof::kconfig::{not_carried, parse_config, ConfigForm, NotCarried};
use truecold_proto::kinds::Engine;
use truecold_proto::path_io::PathIoError;

/// Where the built guest directories go (one per cache key), relative to the working
/// directory.
pub const RUN_KERNELS_DIR: &str = "out/run-kernels";

/// Largest config file read (a full x86_64 `.config` is ~300 KiB).
const CONFIG_CAP: u64 = 4 << 20;

/// The user's kernel, as `truecold run` was given it (validated in [`crate::plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnKernel {
    /// The config file: a complete `.config` or a fragment ([`OwnKernel::form`]).
    pub config: PathBuf,
    pub form: ConfigForm,
    /// A kernel source tree to build instead of the pinned package source (a git work tree,
    /// or any tree through a [`snapshot`]).
    pub source: Option<PathBuf>,
}

/// When a requirement applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Every strict-ready Linux boot.
    Always,
    /// More than one vCPU under any engine: the strict-ready command line every engine's guest
    /// gets has `acpi=off` (proto's `boot_cmdline::base_cmdline`), so the guest finds its CPUs
    /// in the MP table (truecold-vmm and Firecracker write one, `arch/x86_64/mptable.rs` in
    /// Firecracker v1.16.1) or not at all.
    MpTable,
    /// More than one vCPU under any engine.
    Smp,
}

/// One symbol strict-ready needs, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub symbol: &'static str,
    pub need: Need,
    pub why: &'static str,
}

const fn req(symbol: &'static str, need: Need, why: &'static str) -> Requirement {
    Requirement { symbol, need, why }
}

/// What a strict-ready Linux boot needs of the kernel (guest-init/README.md has the guest's
/// side of each): the one list the check before the build and the check of the resolved
/// config both read.
pub const REQUIREMENTS: &[Requirement] = &[
    req(
        "CONFIG_64BIT",
        Need::Always,
        "the VMMs boot an x86_64 kernel",
    ),
    req(
        "CONFIG_PVH",
        Need::Always,
        "truecold-vmm and the peers boot vmlinux at its PVH entry (the Xen PHYS32 ELF note)",
    ),
    req(
        "CONFIG_BLK_DEV_INITRD",
        Need::Always,
        "guest-init runs from the initramfs (an uncompressed cpio: no RD_* decompressor needed)",
    ),
    req(
        "CONFIG_BINFMT_ELF",
        Need::Always,
        "guest-init is a static ELF binary",
    ),
    req(
        "CONFIG_FUTEX",
        Need::Always,
        "guest-init's Rust runtime uses futexes",
    ),
    req(
        "CONFIG_PROC_FS",
        Need::Always,
        "guest-init mounts /proc and reads meminfo and cpuinfo there",
    ),
    req(
        "CONFIG_SYSFS",
        Need::Always,
        "guest-init mounts /sys and reads the online CPU list there",
    ),
    req(
        "CONFIG_FIRMWARE_MEMMAP",
        Need::Always,
        "the exact-RAM rule reads the firmware memory map in /sys/firmware/memmap",
    ),
    req(
        "CONFIG_DEVTMPFS",
        Need::Always,
        "guest-init mounts /dev as devtmpfs",
    ),
    req(
        "CONFIG_NET",
        Need::Always,
        "strict-ready brings loopback up",
    ),
    req(
        "CONFIG_INET",
        Need::Always,
        "guest-init brings loopback up (an IPv4 socket ioctl)",
    ),
    req(
        "CONFIG_X86_IOPL_IOPERM",
        Need::Always,
        "guest-init rings the truecold ports with ioperm(2)",
    ),
    req("CONFIG_TTY", Need::Always, "the 8250 serial port is a tty"),
    req(
        "CONFIG_SERIAL_8250",
        Need::Always,
        "the peers' strict-ready is observed on the 8250 serial port",
    ),
    req(
        "CONFIG_SMP",
        Need::Smp,
        "more than one vCPU needs an SMP kernel",
    ),
    req(
        "CONFIG_X86_MPPARSE",
        Need::MpTable,
        "the strict-ready command line has acpi=off (every engine), so the vCPUs are found in the \
         MP table: without MPPARSE a multi-vCPU guest brings up one CPU and fails the CPU check",
    ),
];

/// [`REQUIREMENTS`] as the Markdown table docs/your-kernel.md shows (a test holds the two
/// equal).
pub fn requirements_markdown() -> String {
    let mut s = String::from("| symbol | needed | why |\n|---|---|---|\n");
    for r in REQUIREMENTS {
        let when = match r.need {
            Need::Always => "always",
            Need::Smp => "more than one vCPU",
            Need::MpTable => "more than one vCPU (any engine)",
        };
        s.push_str(&format!("| `{}` | {when} | {} |\n", r.symbol, r.why));
    }
    s
}

/// Why the user's kernel cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OwnKernelError {
    #[error("reading the kernel config")]
    Read(#[source] PathIoError),
    #[error("{path} is larger than {CONFIG_CAP} bytes: not a kernel .config")]
    TooLarge { path: PathBuf },
    #[error(
        "{path} is not a complete kernel .config (no CONFIG_ line); give the file `make \
         olddefconfig` wrote, e.g. <build>/.config"
    )]
    NotAConfig { path: PathBuf },
    #[error(
        "{config} cannot boot to strict-ready: {}",
        missing.iter().map(|r| format!("{} is not set ({})", r.symbol, r.why)).collect::<Vec<_>>().join("; ")
    )]
    Missing {
        config: PathBuf,
        missing: Vec<Requirement>,
    },
    #[error(
        "the resolved config (after olddefconfig) lost what strict-ready needs: {}; the \
         source's Kconfig dropped them (their dependencies are off)",
        missing.iter().map(|r| format!("{} ({})", r.symbol, r.why)).collect::<Vec<_>>().join("; ")
    )]
    Lost { missing: Vec<Requirement> },
    #[error(
        "--kernel-source {dir}: snapshotting the tree (it has no git of its own) into {git_dir} \
         failed: `{command}`: {detail}"
    )]
    Snapshot {
        dir: PathBuf,
        git_dir: PathBuf,
        command: String,
        detail: String,
    },
    #[error(
        "--kernel-source {dir} holds an in-tree build ({found}): an out-of-tree build (`make \
         O=`) refuses such a tree; run `make mrproper` in it first"
    )]
    InTreeBuild { dir: PathBuf, found: &'static str },
    #[error("building the kernel")]
    Build(#[source] KernelError),
    #[error("writing the fragment into the guest directory")]
    Write(#[source] PathIoError),
}

/// The base fragment every fragment is merged over, beside the build script.
pub const BASE_FRAGMENT: &str = "base.config";

/// The name the user's fragment has in its guest directory (what `build.sh tune` takes:
/// `tune-<name>.config`; the build's manifest lists it so).
pub const OWN_FRAGMENT: &str = "tune-own.config";

/// Whether `sym` is built in (`y`; a module is no use before init runs).
fn enabled(config: &BTreeMap<String, String>, sym: &str) -> bool {
    config.get(sym).is_some_and(|v| v == "y")
}

/// The requirements `config` does not meet for a campaign of `vcpus` vCPUs on `engines`
/// (empty: truecold-vmm alone; every requirement applies under every engine today, since
/// every engine's guest gets the same strict-ready command line).
pub fn missing(
    config: &BTreeMap<String, String>,
    vcpus: u32,
    _engines: &[Engine],
) -> Vec<Requirement> {
    REQUIREMENTS
        .iter()
        .filter(|r| match r.need {
            Need::Always => true,
            Need::Smp => vcpus > 1,
            Need::MpTable => vcpus > 1,
        })
        .filter(|r| !enabled(config, r.symbol))
        .copied()
        .collect()
}

/// The check before a build: `intended` (what the config `config` asks for) meets every
/// requirement of a campaign of `vcpus` vCPUs on `engines`, or the refusal names each one
/// it misses.
pub fn require(
    config: &Path,
    intended: &BTreeMap<String, String>,
    vcpus: u32,
    engines: &[Engine],
) -> Result<(), OwnKernelError> {
    let lacks = missing(intended, vcpus, engines);
    if lacks.is_empty() {
        return Ok(());
    }
    Err(OwnKernelError::Missing {
        config: config.to_path_buf(),
        missing: lacks,
    })
}

/// Reads a config file: a regular file, at most [`CONFIG_CAP`] bytes, with a `CONFIG_` line.
/// Returns its bytes and its symbols.
pub fn read_config(path: &Path) -> Result<(Vec<u8>, BTreeMap<String, String>), OwnKernelError> {
    use std::io::Read;
    let read = |source| OwnKernelError::Read(PathIoError::at("read", path)(source));
    let f = std::fs::File::open(path).map_err(read)?;
    let meta = f.metadata().map_err(read)?;
    if !meta.is_file() {
        return Err(read(std::io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    f.take(CONFIG_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > CONFIG_CAP {
        return Err(OwnKernelError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let m = parse_config(&String::from_utf8_lossy(&bytes));
    if m.is_empty() {
        return Err(OwnKernelError::NotAConfig {
            path: path.to_path_buf(),
        });
    }
    Ok((bytes, m))
}

/// A `--kernel-source` tree as the build keys it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceTree {
    /// A git work tree with a commit: the build keys its cache by the commit (plus a hash of
    /// the uncommitted diff of tracked files).
    Git(PathBuf),
    /// A tree without git of its own: its content is committed into a git directory of
    /// truecold's under the kernel cache ([`snapshot`]), never into the tree, and the build
    /// reads that directory as the tree's (`GIT_DIR`, `GIT_WORK_TREE`).
    Snapshot { tree: PathBuf, git_dir: PathBuf },
}

impl SourceTree {
    /// The tree the build compiles.
    pub fn tree(&self) -> &Path {
        match self {
            SourceTree::Git(t) | SourceTree::Snapshot { tree: t, .. } => t,
        }
    }

    /// The git directory of truecold's own that stands for the tree's (a snapshot's).
    pub fn git_dir(&self) -> Option<&Path> {
        match self {
            SourceTree::Git(_) => None,
            SourceTree::Snapshot { git_dir, .. } => Some(git_dir),
        }
    }
}

/// A `--kernel-source` tree fit for the build: no in-tree build (kbuild's out-of-tree build
/// refuses a source that holds one); a git work tree with a commit as it is, any other tree
/// through a [`snapshot`] of its content in a git directory under `cache`.
pub fn check_source(dir: &Path, cache: &Path) -> Result<SourceTree, OwnKernelError> {
    // What `make` leaves in a tree it configured or built in place (the markers kbuild's own
    // "source tree is not clean" check looks for).
    for found in [".config", "include/config", "arch/x86/include/generated"] {
        if dir.join(found).exists() {
            return Err(OwnKernelError::InTreeBuild {
                dir: dir.to_path_buf(),
                found,
            });
        }
    }
    if is_git_top(dir) {
        return Ok(SourceTree::Git(dir.to_path_buf()));
    }
    snapshot(dir, cache)
}

/// Whether `dir` is the top of a git work tree with a commit (a directory inside another
/// repository, such as a source unpacked in a checkout, is not: that repository's commit
/// does not describe it).
fn is_git_top(dir: &Path) -> bool {
    let out = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_string())
    };
    if out(&["rev-parse", "--verify", "-q", "HEAD"]).is_none() {
        return false;
    }
    let (Some(top), Ok(dir)) = (out(&["rev-parse", "--show-toplevel"]), dir.canonicalize()) else {
        return false;
    };
    Path::new(&top).canonicalize().is_ok_and(|t| t == dir)
}

/// Where the snapshots of trees without git live: one git directory per tree path.
pub const SNAPSHOT_DIR: &str = "trees";

/// The snapshot commit's author, committer and date: fixed, so that its id is a function of
/// the tree's content alone (the same files, modes and links at any path, on any machine,
/// give the same commit and so the same kernel cache key).
const SNAPSHOT_IDENT: [(&str, &str); 6] = [
    ("GIT_AUTHOR_NAME", "truecold"),
    ("GIT_AUTHOR_EMAIL", "truecold@localhost"),
    ("GIT_AUTHOR_DATE", "@0 +0000"),
    ("GIT_COMMITTER_NAME", "truecold"),
    ("GIT_COMMITTER_EMAIL", "truecold@localhost"),
    ("GIT_COMMITTER_DATE", "@0 +0000"),
];

/// Commits the content of `tree` (a kernel source without git) into the git directory
/// `<cache>/trees/<16 hex of sha256(tree's absolute path)>.git` and makes it that directory's
/// HEAD: every file, its executable bit and every symbolic link, as `git add -A` sees them
/// (the tree's own `.gitignore` files apply, as they do to a git tree's untracked files;
/// `.truecold-build/`, the build's object directory, is left out). The tree itself is only
/// read. Later snapshots of the same path reuse the directory's index, so only changed files
/// are read again.
pub fn snapshot(tree: &Path, cache: &Path) -> Result<SourceTree, OwnKernelError> {
    let tree = std::path::absolute(tree).unwrap_or_else(|_| tree.to_path_buf());
    let name = truecold_proof::digest::sha256_hex(tree.as_os_str().as_encoded_bytes());
    let git_dir = cache
        .join(SNAPSHOT_DIR)
        .join(format!("{}.git", &name[..16]));
    let failed = |command: &str, detail: String| OwnKernelError::Snapshot {
        dir: tree.clone(),
        git_dir: git_dir.clone(),
        command: command.to_string(),
        detail,
    };
    let git = |args: &[&str]| -> Result<String, OwnKernelError> {
        let mut c = std::process::Command::new("git");
        c.arg("--git-dir")
            .arg(&git_dir)
            .arg("--work-tree")
            .arg(&tree)
            .args(["-c", "core.autocrlf=false", "-c", "core.fileMode=true"])
            .args(args);
        // Nothing of the caller's git environment may redirect the snapshot.
        for v in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
        ] {
            c.env_remove(v);
        }
        c.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .envs(SNAPSHOT_IDENT);
        let command = format!("git {}", args.join(" "));
        let o = c.output().map_err(|e| failed(&command, e.to_string()))?;
        if !o.status.success() {
            return Err(failed(
                &command,
                format!(
                    "{}: {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim_end()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if !git_dir.join("HEAD").is_file() {
        std::fs::create_dir_all(&git_dir).map_err(|e| failed("mkdir", e.to_string()))?;
        git(&["init", "-q"])?;
    }
    let exclude = git_dir.join("info").join("exclude");
    std::fs::create_dir_all(git_dir.join("info")).map_err(|e| failed("mkdir", e.to_string()))?;
    std::fs::write(&exclude, "/.truecold-build/\n").map_err(|e| failed("write", e.to_string()))?;
    git(&["add", "-A", "."])?;
    let t = git(&["write-tree"])?;
    let c = git(&[
        "commit-tree",
        &t,
        "-m",
        "truecold: snapshot of a kernel source tree without git",
    ])?;
    git(&["update-ref", "HEAD", &c])?;
    Ok(SourceTree::Snapshot { tree, git_dir })
}

/// The guest directory of the user's kernel, built (or found cached) under `root` (one
/// directory per cache key; `truecold run`'s is [`RUN_KERNELS_DIR`]) for a campaign of
/// `vcpus` vCPUs on `engines`: checks the config, builds it with `script`, checks the
/// resolved config, and returns the directory and the symbols that did not carry over.
pub fn prepare(
    k: &OwnKernel,
    vcpus: u32,
    engines: &[Engine],
    script: &Path,
    base: &LinuxGuest,
    root: &Path,
) -> Result<(PathBuf, Vec<NotCarried>), OwnKernelError> {
    prepare_got(k, vcpus, engines, script, base, root, None).map(|(g, nc)| (g.dir, nc))
}

/// [`prepare`], the build's new object directory (when it has none) starting from the
/// objects of the lineage `from` (`kernel-config/build.sh`'s `TRUECOLD_KERNEL_LINEAGE_FROM`),
/// and saying whether the kernel was found in the build script's cache.
pub fn prepare_got(
    k: &OwnKernel,
    vcpus: u32,
    engines: &[Engine],
    script: &Path,
    base: &LinuxGuest,
    root: &Path,
    from: Option<String>,
) -> Result<(kernel_build::Got, Vec<NotCarried>), OwnKernelError> {
    let (given_bytes, given) = read_config(&k.config)?;
    // What the build starts from, as far as the file says: the config itself, or the base
    // fragment with the user's lines over it (tinyconfig below both sets none of the
    // requirements that the base does not).
    let intended = match k.form {
        ConfigForm::Full => given.clone(),
        ConfigForm::Fragment => {
            let base = script
                .parent()
                .unwrap_or(Path::new("."))
                .join(BASE_FRAGMENT);
            let (_, mut merged) = read_config(&base)?;
            merged.extend(given.clone());
            merged
        }
    };
    require(&k.config, &intended, vcpus, engines)?;
    let source = match &k.source {
        Some(src) => Some(check_source(src, &kernel_build::cache_root())?),
        None => None,
    };
    let dir = root.join(key(&given_bytes, k.form, k.source.as_deref()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| OwnKernelError::Read(PathIoError::at("create", &dir)(e)))?;
    let (variant, file) = match k.form {
        ConfigForm::Full => ("config", k.config.clone()),
        ConfigForm::Fragment => {
            // The bytes already read and checked, under the name `build.sh tune` takes (the
            // directory is this content's: its key is the bytes' digest).
            let f = dir.join(OWN_FRAGMENT);
            std::fs::write(&f, &given_bytes)
                .map_err(|e| OwnKernelError::Write(PathIoError::at("write", &f)(e)))?;
            ("tune", f)
        }
    };
    let build = KernelBuild {
        script,
        variant,
        args: vec![OsString::from(file)],
        tree: source.as_ref().map(SourceTree::tree),
        git_dir: source.as_ref().and_then(SourceTree::git_dir),
        lineage: None,
        lineage_from: from.filter(|_| source.is_none()),
    };
    let got = build.got(&dir, base).map_err(OwnKernelError::Build)?;
    let (_, resolved) = read_config(&got.dir.join("config"))?;
    let lost = missing(&resolved, vcpus, engines);
    if !lost.is_empty() {
        return Err(OwnKernelError::Lost { missing: lost });
    }
    Ok((got, not_carried(&given, &resolved)))
}

/// The note on the symbols of `config` that did not carry over into the resolved config of
/// the guest directory `dir` (`who`: whose kernel, for the messages); every one listed.
pub fn note_not_carried(who: &str, config: &Path, dir: &Path, not_carried: &[NotCarried]) {
    if not_carried.is_empty() {
        crate::note!(
            "truecold: {who}kernel: every symbol of {} carried over into the resolved config",
            config.display()
        );
    } else {
        crate::note!(
            "truecold: {who}kernel: {} symbol(s) of {} did not carry over (olddefconfig on \
             this source; the resolved config is {}/config):",
            not_carried.len(),
            config.display(),
            dir.display()
        );
        for n in not_carried {
            crate::note!("  {n}");
        }
    }
}

/// The guest directory's name: the first 16 hex digits of sha256 over the config's bytes (a
/// fragment's marked as one) and the source tree's path (the build's own cache key covers
/// the rest: commit, script, toolchain).
fn key(config: &[u8], form: ConfigForm, source: Option<&Path>) -> String {
    let mut input = match form {
        ConfigForm::Full => Vec::new(),
        ConfigForm::Fragment => b"fragment\0".to_vec(),
    };
    input.extend_from_slice(config);
    if let Some(s) = source {
        input.extend_from_slice(b"\0source=");
        input.extend_from_slice(s.as_os_str().as_encoded_bytes());
    }
    truecold_proof::digest::sha256_hex(&input)[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: &[&str]) -> BTreeMap<String, String> {
        parse_config(&lines.join("\n"))
    }

    /// Every requirement set, so each test can take one away.
    fn complete() -> Vec<String> {
        REQUIREMENTS
            .iter()
            .map(|r| format!("{}=y", r.symbol))
            .collect()
    }

    /// A fragment is checked over the base: the base alone meets every requirement (so a
    /// fragment is refused only for what it turns off).
    #[test]
    fn the_base_fragment_meets_every_requirement() {
        let base = parse_config(include_str!("../../../kernel-config/base.config"));
        assert_eq!(missing(&base, 2, &[]), Vec::<Requirement>::new());
    }

    #[test]
    fn a_full_config_and_the_same_bytes_as_a_fragment_are_two_guests() {
        let b = b"CONFIG_HZ_100=y\n";
        assert_ne!(
            key(b, ConfigForm::Full, None),
            key(b, ConfigForm::Fragment, None)
        );
        assert_eq!(
            key(b, ConfigForm::Fragment, None),
            key(b, ConfigForm::Fragment, None)
        );
    }

    /// A fragment that turns a requirement off is refused before anything is built, by
    /// name; the build script is never run (it does not exist here).
    #[test]
    fn a_fragment_turning_a_requirement_off_is_refused_before_the_build() {
        let t = tempfile::tempdir().unwrap();
        let frag = t.path().join("mine.config");
        std::fs::write(&frag, "CONFIG_HZ_100=y\n# CONFIG_PVH is not set\n").unwrap();
        let scripts = t.path().join("kernel-config");
        std::fs::create_dir(&scripts).unwrap();
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../kernel-config/base.config"),
            scripts.join(BASE_FRAGMENT),
        )
        .unwrap();
        let k = OwnKernel {
            config: frag,
            form: ConfigForm::Fragment,
            source: None,
        };
        let base = LinuxGuest {
            vmlinux: t.path().join("vmlinux"),
            initramfs: t.path().join("initramfs"),
            init: t.path().join("init"),
            config: t.path().join("config"),
            symbols: t.path().join("vmlinux"),
        };
        match prepare(
            &k,
            2,
            &[],
            &scripts.join("absent-build.sh"),
            &base,
            t.path(),
        ) {
            Err(OwnKernelError::Missing { missing, .. }) => {
                let names: Vec<&str> = missing.iter().map(|r| r.symbol).collect();
                assert_eq!(names, ["CONFIG_PVH"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_doc_shows_this_requirement_table() {
        let doc = include_str!("../../../docs/your-kernel.md");
        let want = requirements_markdown();
        assert!(
            doc.contains(&want),
            "docs/your-kernel.md must contain the requirement table exactly:\n{want}"
        );
    }

    #[test]
    fn each_missing_requirement_is_named_and_only_where_it_applies() {
        let all = complete();
        let full: Vec<&str> = all.iter().map(String::as_str).collect();
        assert!(missing(&cfg(&full), 2, &[]).is_empty());
        for r in REQUIREMENTS {
            let without: Vec<&str> = full
                .iter()
                .copied()
                .filter(|l| !l.starts_with(&format!("{}=", r.symbol)))
                .collect();
            let m = cfg(&without);
            let got = missing(&m, 2, &[]);
            assert_eq!(got, vec![*r], "{}", r.symbol);
            // A module is not built in: the same verdict.
            let mut as_module = without.clone();
            let line = format!("{}=m", r.symbol);
            as_module.push(&line);
            assert_eq!(missing(&cfg(&as_module), 2, &[]), vec![*r]);
        }
        // One vCPU needs neither SMP nor the MP table; more than one needs both under every
        // engine (acpi=off on every engine's command line).
        let no_smp: Vec<&str> = full
            .iter()
            .copied()
            .filter(|l| !l.starts_with("CONFIG_SMP=") && !l.starts_with("CONFIG_X86_MPPARSE="))
            .collect();
        assert!(missing(&cfg(&no_smp), 1, &[]).is_empty());
        let no_mp: Vec<&str> = full
            .iter()
            .copied()
            .filter(|l| !l.starts_with("CONFIG_X86_MPPARSE="))
            .collect();
        assert_eq!(
            missing(&cfg(&no_mp), 2, &[Engine::Firecracker])
                .iter()
                .map(|r| r.symbol)
                .collect::<Vec<_>>(),
            ["CONFIG_X86_MPPARSE"]
        );
        assert_eq!(
            missing(&cfg(&no_mp), 2, &[Engine::Firecracker, Engine::Truecold])
                .iter()
                .map(|r| r.symbol)
                .collect::<Vec<_>>(),
            ["CONFIG_X86_MPPARSE"]
        );
    }

    #[test]
    fn the_refusal_names_every_missing_symbol_with_its_reason() {
        let e = OwnKernelError::Missing {
            config: "fc.config".into(),
            missing: missing(&cfg(&["CONFIG_64BIT=y", "CONFIG_PVH=y"]), 2, &[]),
        };
        let s = e.to_string();
        for r in REQUIREMENTS
            .iter()
            .filter(|r| r.symbol != "CONFIG_64BIT" && r.symbol != "CONFIG_PVH")
        {
            assert!(s.contains(&format!("{} is not set", r.symbol)), "{s}");
        }
        assert!(!s.contains("CONFIG_PVH is not set"), "{s}");
    }

    #[test]
    fn a_file_without_config_lines_or_too_large_is_refused() {
        let d = std::env::temp_dir().join(format!("truecold-own-kernel-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let empty = d.join("empty.config");
        std::fs::write(&empty, "hello\n").unwrap();
        assert!(matches!(
            read_config(&empty),
            Err(OwnKernelError::NotAConfig { .. })
        ));
        let big = d.join("big.config");
        std::fs::write(&big, vec![b'#'; (CONFIG_CAP + 1) as usize]).unwrap();
        assert!(matches!(
            read_config(&big),
            Err(OwnKernelError::TooLarge { .. })
        ));
        assert!(matches!(read_config(&d), Err(OwnKernelError::Read(_))));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A scratch directory of this test's, removed first.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("truecold-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn git_in(d: &Path, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(d)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// Every path under `d` with its bytes (a link: its target), sorted.
    fn listing(d: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut v = Vec::new();
        let mut todo = vec![d.to_path_buf()];
        while let Some(p) = todo.pop() {
            for e in std::fs::read_dir(&p).unwrap() {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                let rel = e.path().strip_prefix(d).unwrap().to_path_buf();
                if t.is_dir() {
                    v.push((rel, Vec::new()));
                    todo.push(e.path());
                } else if t.is_symlink() {
                    let l = std::fs::read_link(e.path()).unwrap();
                    v.push((rel, l.into_os_string().into_encoded_bytes()));
                } else {
                    v.push((rel, std::fs::read(e.path()).unwrap()));
                }
            }
        }
        v.sort();
        v
    }

    #[test]
    fn a_source_tree_with_an_in_tree_build_is_refused_naming_mrproper() {
        let d = scratch("own-src");
        let cache = scratch("own-src-cache");
        std::fs::write(d.join("Makefile"), "all:\n").unwrap();
        git_in(&d, &["init", "-q"]);
        git_in(&d, &["add", "Makefile"]);
        git_in(&d, &["commit", "-q", "-m", "x"]);
        assert_eq!(
            check_source(&d, &cache).unwrap(),
            SourceTree::Git(d.clone())
        );
        std::fs::write(d.join(".config"), "CONFIG_A=y\n").unwrap();
        let e = check_source(&d, &cache).unwrap_err();
        assert!(e.to_string().contains("make mrproper"), "{e}");
        // The same refusal for a tree without git, before anything is snapshotted.
        std::fs::remove_dir_all(d.join(".git")).unwrap();
        let e = check_source(&d, &cache).unwrap_err();
        assert!(matches!(e, OwnKernelError::InTreeBuild { .. }), "{e}");
        assert!(!cache.join(SNAPSHOT_DIR).exists());
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_tree_without_git_is_snapshotted_by_content_outside_the_tree() {
        let cache = scratch("snap-cache");
        let a = scratch("snap-a");
        std::fs::create_dir_all(a.join("scripts")).unwrap();
        std::fs::write(a.join("Makefile"), "all:\n").unwrap();
        std::fs::write(a.join("scripts/gen.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("Makefile", a.join("GNUmakefile")).unwrap();
        // The build's object directory is not the source.
        std::fs::create_dir_all(a.join(".truecold-build")).unwrap();
        std::fs::write(a.join(".truecold-build/vmlinux.o"), "obj").unwrap();
        let before = listing(&a);
        let s = check_source(&a, &cache).unwrap();
        let SourceTree::Snapshot { tree, git_dir } = &s else {
            panic!("a tree without git is snapshotted: {s:?}");
        };
        assert_eq!(tree, &std::path::absolute(&a).unwrap());
        assert!(git_dir.starts_with(cache.join(SNAPSHOT_DIR)), "{git_dir:?}");
        assert_eq!(listing(&a), before, "the tree is only read");
        let head = |g: &Path| {
            let o = std::process::Command::new("git")
                .arg("--git-dir")
                .arg(g)
                .args(["rev-parse", "HEAD"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let files = |g: &Path| {
            let o = std::process::Command::new("git")
                .arg("--git-dir")
                .arg(g)
                .args(["ls-tree", "-r", "HEAD"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let c1 = head(git_dir);
        assert_eq!(c1.len(), 40, "{c1}");
        let listed = files(git_dir);
        assert!(listed.contains("\tMakefile"), "{listed}");
        assert!(listed.contains("120000 blob") && listed.contains("\tGNUmakefile"));
        assert!(!listed.contains(".truecold-build"), "{listed}");
        // The same snapshot again: the same commit.
        assert_eq!(check_source(&a, &cache).unwrap(), s);
        assert_eq!(head(git_dir), c1);
        // The same content at another path: another git directory, the same commit (the
        // build's cache key is the content's).
        let b = scratch("snap-b");
        std::fs::remove_dir_all(&b).unwrap();
        let cp = std::process::Command::new("cp")
            .arg("-a")
            .arg(&a)
            .arg(&b)
            .status()
            .unwrap();
        assert!(cp.success());
        std::fs::write(b.join(".truecold-build/vmlinux.o"), "other obj").unwrap();
        let sb = check_source(&b, &cache).unwrap();
        let gb = sb.git_dir().unwrap().to_path_buf();
        assert_ne!(gb, *git_dir);
        assert_eq!(head(&gb), c1);
        // A changed file, or a changed executable bit: another commit.
        std::fs::write(b.join("Makefile"), "all: x\n").unwrap();
        check_source(&b, &cache).unwrap();
        let c2 = head(&gb);
        assert_ne!(c2, c1);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            b.join("scripts/gen.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        check_source(&b, &cache).unwrap();
        assert_ne!(head(&gb), c2);
        // What the build script sees through GIT_DIR / GIT_WORK_TREE: that commit, clean.
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(&b)
            .args(["status", "--porcelain", "--untracked-files=no"])
            .env("GIT_DIR", &gb)
            .env("GIT_WORK_TREE", &b)
            .output()
            .unwrap();
        assert!(o.status.success() && o.stdout.is_empty(), "{o:?}");
        for d in [&a, &b, &cache] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
