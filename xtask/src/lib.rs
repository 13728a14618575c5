//! Builders of truecold's guest artifacts, behind the `xtask` binary:
//! the kernel (via `kernel-config/build.sh`), the static `truecold-init`, the initramfs
//! (our own deterministic [`cpio`] writer), the parity contract's workspace disk
//! ([`workspace`]: ext4 via e2fsprogs), the `out/guest` bundle of all of them, the L1
//! kernel for the nested harness, and a reproducibility check.

pub mod workspace;

// The cpio writer and the guest directory's names live in proto, where the nested harness
// (which builds L1's initramfs at run time) and the bench use them without this crate.
pub use truecold_proto::cpio;
pub use truecold_proto::parity::PARITY_KERNEL_DIR as PARITY_DIR;

use sha2::{Digest, Sha256};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use truecold_proto::hex;
use truecold_proto::path_io::PathIoError;

/// The target the guest init is built for (static via `+crt-static`).
pub const INIT_TARGET: &str = "x86_64-unknown-linux-gnu";

#[derive(Debug, thiserror::Error)]
pub enum XtaskError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("running `{cmd}`")]
    Spawn {
        cmd: String,
        #[source]
        source: io::Error,
    },
    #[error("`{cmd}` failed with {status}")]
    Failed {
        cmd: String,
        status: std::process::ExitStatus,
    },
    #[error("manifest `{path}`")]
    Manifest {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("manifest `{0}` is not a JSON object with a `files` object")]
    ManifestShape(PathBuf),
    #[error("writing the initramfs")]
    Cpio(#[from] cpio::CpioError),
    #[error("no cached build `{0}` to compare with (run: cargo run --release -p xtask -- guest --out out/guest, or scripts/build-artifacts.sh)")]
    MissingBuild(PathBuf),
    #[error("not reproducible: {0:?} differ between the two builds")]
    NotReproducible(Vec<String>),
    #[error("building the workspace image")]
    Workspace(#[from] workspace::WorkspaceError),
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

pub(crate) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> XtaskError {
    let e = PathIoError::at(op, path);
    move |source| XtaskError::Io(e(source))
}

pub(crate) fn run(cmd: &mut Command) -> Result<(), XtaskError> {
    let text = format!("{cmd:?}");
    let status = cmd.status().map_err(|source| XtaskError::Spawn {
        cmd: text.clone(),
        source,
    })?;
    if !status.success() {
        return Err(XtaskError::Failed { cmd: text, status });
    }
    Ok(())
}

/// Lowercase hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, XtaskError> {
    let bytes = std::fs::read(path).map_err(io_err("read", path))?;
    Ok(hex(&Sha256::digest(&bytes)))
}

/// `kernel-config/build.sh <variant> <out>`; `fresh_dir` forces an uncached build there.
pub fn kernel(variant: &str, out: &Path, fresh_dir: Option<&Path>) -> Result<(), XtaskError> {
    let script = workspace_root().join("kernel-config/build.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script).arg(variant).arg(out);
    if let Some(d) = fresh_dir {
        cmd.env("TRUECOLD_KERNEL_FRESH_DIR", d);
    }
    run(&mut cmd)
}

/// Builds the static `truecold-init` (release, `+crt-static`, paths remapped so the binary
/// does not depend on where the clone or the cargo home is) into `target_dir`; returns its path.
pub fn init(target_dir: &Path) -> Result<PathBuf, XtaskError> {
    let root = workspace_root();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"));
    let rustflags = format!(
        "-C target-feature=+crt-static -C strip=symbols --remap-path-prefix={}=/truecold \
         --remap-path-prefix={}=/cargo --remap-path-prefix={}=/target",
        root.display(),
        cargo_home.display(),
        target_dir.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--release",
            "-p",
            "truecold-init",
            "--target",
            INIT_TARGET,
        ])
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_TARGET_DIR", target_dir);
    run(&mut cmd)?;
    Ok(target_dir.join(INIT_TARGET).join("release/truecold-init"))
}

/// The second init the same build makes: `truecold-platform-init` (prints the guest's
/// platform record and reboots; the guest of the engine-neutral checks), next to `init`'s.
pub fn platform_init_path(init: &Path) -> PathBuf {
    init.with_file_name("truecold-platform-init")
}

/// The target dir `init` uses by default: `$CARGO_TARGET_DIR`, else `<root>/target`.
pub fn default_target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Writes the initramfs for the init binary at `init` to `out`; returns its sha256.
pub fn initramfs(init: &Path, out: &Path) -> Result<String, XtaskError> {
    let bytes = std::fs::read(init).map_err(io_err("read the init", init))?;
    let mut buf = Vec::new();
    cpio::write_newc(&cpio::initramfs_entries(bytes), &mut buf)?;
    write_atomic(out, &buf)?;
    Ok(hex(&Sha256::digest(&buf)))
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), XtaskError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io_err("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err("rename into place", path))
}

/// Everything the guest needs, in `out`: vmlinux, bzImage, config, init, initramfs.cpio,
/// the parity contract's kernel in `parity/` (kernel-config `parity` variant, same init) and
/// its workspace disk `workspace.img`, and manifest.json (the base kernel's manifest with
/// `files.init`, `files."initramfs.cpio"`, `files."parity/vmlinux"`, `files."parity/bzImage"`,
/// `files."workspace.img"` and the image's inputs under `workspace` added).
pub fn guest(out: &Path) -> Result<(), XtaskError> {
    // The base variant last: the source's object directory is left holding it, where
    // `truecold bisect config` from the base config starts (kernel-config/build.sh).
    kernel("parity", &out.join(PARITY_DIR), None)?;
    kernel("base", out, None)?;
    let ws = workspace::build(&out.join(workspace::IMAGE))?;
    let built = init(&default_target_dir())?;
    let init_out = out.join("init");
    let bytes = std::fs::read(&built).map_err(io_err("read", &built))?;
    write_atomic(&init_out, &bytes)?;
    set_executable(&init_out)?;
    let cpio_sha = initramfs(&init_out, &out.join("initramfs.cpio"))?;
    let platform_built = platform_init_path(&built);
    let platform_out = out.join("platform-init");
    let bytes = std::fs::read(&platform_built).map_err(io_err("read", &platform_built))?;
    write_atomic(&platform_out, &bytes)?;
    set_executable(&platform_out)?;
    let platform_cpio_sha = initramfs(&platform_out, &out.join("platform-initramfs.cpio"))?;
    let mpath = out.join("manifest.json");
    let text = std::fs::read_to_string(&mpath).map_err(io_err("read", &mpath))?;
    let mut m: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| XtaskError::Manifest {
            path: mpath.clone(),
            source,
        })?;
    let files = m
        .get_mut("files")
        .and_then(|f| f.as_object_mut())
        .ok_or_else(|| XtaskError::ManifestShape(mpath.clone()))?;
    files.insert("init".into(), sha256_file(&init_out)?.into());
    files.insert("initramfs.cpio".into(), cpio_sha.into());
    files.insert("platform-init".into(), sha256_file(&platform_out)?.into());
    files.insert("platform-initramfs.cpio".into(), platform_cpio_sha.into());
    for f in ["vmlinux", "bzImage"] {
        let sha = sha256_file(&out.join(PARITY_DIR).join(f))?;
        files.insert(format!("parity/{f}"), sha.into());
    }
    files.insert(workspace::IMAGE.into(), ws.sha256.clone().into());
    if let Some(obj) = m.as_object_mut() {
        obj.insert("workspace".into(), ws.manifest());
    }
    let text = serde_json::to_string_pretty(&m).map_err(|source| XtaskError::Manifest {
        path: mpath.clone(),
        source,
    })?;
    write_atomic(&mpath, format!("{text}\n").as_bytes())
}

fn set_executable(p: &Path) -> Result<(), XtaskError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
        .map_err(io_err("make executable", p))
}

/// The nested-host (L1) kernel in `out`.
pub fn l1(out: &Path) -> Result<(), XtaskError> {
    kernel("nested-host", out, None)
}

fn same(a: &Path, b: &Path, name: &str, diffs: &mut Vec<String>) -> Result<(), XtaskError> {
    let (x, y) = (sha256_file(&a.join(name))?, sha256_file(&b.join(name))?);
    println!(
        "repro-check: {name}: {x} {} {y}",
        if x == y { "==" } else { "!=" }
    );
    if x != y {
        diffs.push(name.to_string());
    }
    Ok(())
}

/// Builds everything a second time from the same inputs and compares bytes with the first
/// build: the kernel (the cached build against a fresh, uncached build in a temporary
/// directory — minutes) unless `skip_kernel`; init + initramfs (the init `xtask guest` built
/// in the default target dir, read as it is, against a fresh build in a temporary target dir,
/// so a running cargo's lock on the default one never blocks this); and the workspace image
/// (built twice).
pub fn repro_check(skip_kernel: bool) -> Result<(), XtaskError> {
    let base = std::env::temp_dir().join(format!("truecold-repro-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(io_err("create", &base))?;
    let mut diffs = Vec::new();
    if !skip_kernel {
        let (a, b) = (base.join("kernel-a"), base.join("kernel-b"));
        kernel("base", &a, None)?;
        kernel("base", &b, Some(&base.join("kernel-fresh")))?;
        for f in ["vmlinux", "bzImage", "config"] {
            same(&a, &b, f, &mut diffs)?;
        }
    }
    let (a, b) = (base.join("init-a"), base.join("init-b"));
    let cached = default_target_dir()
        .join(INIT_TARGET)
        .join("release/truecold-init");
    if !cached.is_file() {
        return Err(XtaskError::MissingBuild(cached));
    }
    for (dir, built) in [(&a, cached), (&b, init(&base.join("target-fresh"))?)] {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let bytes = std::fs::read(&built).map_err(io_err("read", &built))?;
        write_atomic(&dir.join("init"), &bytes)?;
        initramfs(&dir.join("init"), &dir.join("initramfs.cpio"))?;
    }
    same(&a, &b, "init", &mut diffs)?;
    same(&a, &b, "initramfs.cpio", &mut diffs)?;
    // The workspace image, twice (the second build at a later wall-clock time: nothing of
    // the build's time may reach the bytes).
    workspace::build(&a.join(workspace::IMAGE))?;
    std::thread::sleep(std::time::Duration::from_millis(1100));
    workspace::build(&b.join(workspace::IMAGE))?;
    same(&a, &b, workspace::IMAGE, &mut diffs)?;
    if diffs.is_empty() {
        let _ = std::fs::remove_dir_all(&base);
        println!("repro-check: all identical");
        Ok(())
    } else {
        println!("repro-check: builds kept in {}", base.display());
        Err(XtaskError::NotReproducible(diffs))
    }
}
