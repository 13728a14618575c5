//! Finding what a campaign launches, and the sha256 of each artifact for the bundle.
//!
//! - The VMM: `--vmm PATH`, else `truecold-vmm` next to the running `truecold` binary.
//! - Guest artifacts (Linux campaigns): `--guest-dir`, else `$TRUECOLD_GUEST_DIR`, else
//!   `out/guest/` (see docs/architecture.md): `vmlinux`, `initramfs.cpio`, `init`, `config`.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use truecold_proto::path_io::PathIoError;

/// The VMM binary's file name.
pub const VMM_NAME: &str = "truecold-vmm";
/// Default guest artifact directory, relative to the working directory.
pub const DEFAULT_GUEST_DIR: &str = "out/guest";
/// The name of the parity guest's workspace image in the guest directory (xtask's).
pub const WORKSPACE_IMAGE: &str = truecold_proto::parity::WORKSPACE_IMAGE;
/// Where the parity kernel (vmlinux, config) is in the guest directory (xtask's).
pub const PARITY_KERNEL_DIR: &str = truecold_proto::parity::PARITY_KERNEL_DIR;

/// Missing or unreadable artifacts.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(
        "the VMM binary was not found (looked at {}); build it with \
         `cargo build --release -p truecold-vmm` or pass --vmm PATH",
        list(.searched)
    )]
    VmmMissing { searched: Vec<PathBuf> },
    #[error("{path} is not an executable file; pass --vmm with the truecold-vmm binary")]
    VmmNotExecutable { path: PathBuf },
    #[error(
        "guest artifact `{name}` is missing at {path} (guest directory {dir}); build the guest \
         artifacts (kernel, init, initramfs) into {dir}, point --guest-dir or \
         TRUECOLD_GUEST_DIR at them, or run the probe-guest campaign with --probe"
    )]
    GuestMissing {
        name: &'static str,
        path: PathBuf,
        dir: PathBuf,
    },
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("cannot locate the running truecold binary")]
    CurrentExe(#[source] std::io::Error),
}

fn list(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Locates the VMM binary.
pub fn find_vmm(explicit: Option<&Path>) -> Result<PathBuf, ArtifactError> {
    let candidate = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let exe = std::env::current_exe().map_err(ArtifactError::CurrentExe)?;
            let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
            // Test binaries live in target/<profile>/deps; the VMM one level up.
            let mut searched = vec![dir.join(VMM_NAME)];
            if dir.file_name().is_some_and(|n| n == "deps") {
                if let Some(up) = dir.parent() {
                    searched.push(up.join(VMM_NAME));
                }
            }
            match searched.iter().find(|p| p.is_file()) {
                Some(p) => p.clone(),
                None => return Err(ArtifactError::VmmMissing { searched }),
            }
        }
    };
    let meta = std::fs::metadata(&candidate).map_err(|_| ArtifactError::VmmMissing {
        searched: vec![candidate.clone()],
    })?;
    use std::os::unix::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(ArtifactError::VmmNotExecutable { path: candidate });
    }
    // An absolute path, so the bundle and the spawn name the same file.
    Ok(std::fs::canonicalize(&candidate).unwrap_or(candidate))
}

/// The guest directory: flag, then `TRUECOLD_GUEST_DIR`, then `out/guest`.
pub fn guest_dir(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("TRUECOLD_GUEST_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_GUEST_DIR))
}

/// The Linux guest's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinuxGuest {
    /// The kernel image the VMM boots (`vmlinux`, or `bzImage`: [`linux_guest_bzimage`]).
    pub vmlinux: PathBuf,
    pub initramfs: PathBuf,
    pub init: PathBuf,
    pub config: PathBuf,
    /// The ELF image whose symbol table names the kernel's functions (attribution): the
    /// `vmlinux`, also when the guest boots the `bzImage` built with it (which has none).
    pub symbols: PathBuf,
}

/// Checks that every Linux guest artifact exists in `dir`.
pub fn linux_guest(dir: &Path) -> Result<LinuxGuest, ArtifactError> {
    let need = |name: &'static str| {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(ArtifactError::GuestMissing {
                name,
                path,
                dir: dir.to_path_buf(),
            })
        }
    };
    let vmlinux = need("vmlinux")?;
    Ok(LinuxGuest {
        symbols: vmlinux.clone(),
        vmlinux,
        initramfs: need("initramfs.cpio")?,
        init: need("init")?,
        config: need("config")?,
    })
}

/// The Linux guest of `dir` booting its `bzImage` (the 64-bit boot protocol) instead of
/// `vmlinux`: `truecold run --bzimage`, and a tune arm with the `bzimage` knob.
pub fn linux_guest_bzimage(dir: &Path) -> Result<LinuxGuest, ArtifactError> {
    let mut g = linux_guest(dir)?;
    let bz = dir.join("bzImage");
    if !bz.is_file() {
        return Err(ArtifactError::GuestMissing {
            name: "bzImage",
            path: bz,
            dir: dir.to_path_buf(),
        });
    }
    // Booted instead of vmlinux; the functions keep vmlinux's names (`symbols`).
    g.vmlinux = bz;
    Ok(g)
}

/// Lowercase hex sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, ArtifactError> {
    let err = |source| ArtifactError::Io(PathIoError::at("read", path)(source));
    let mut f = std::fs::File::open(path).map_err(err)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(truecold_proto::hex(&h.finalize()))
}

/// The files of a campaign whose digests its bundle records, by the name the bundle schema
/// gives each (`truecold_proof::schema::required_artifacts`): what [`digests`] digests and
/// what `truecold replay` holds to a record.
pub fn artifact_files(vmm: &Path, guest: Option<&LinuxGuest>) -> Vec<(&'static str, PathBuf)> {
    let mut f = vec![("vmm", vmm.to_path_buf())];
    if let Some(g) = guest {
        f.extend([
            ("vmlinux", g.vmlinux.clone()),
            ("initramfs", g.initramfs.clone()),
            ("guest_init", g.init.clone()),
            ("config", g.config.clone()),
        ]);
    }
    f
}

/// The artifact digests of a campaign ([`artifact_files`]).
pub fn digests(
    vmm: &Path,
    guest: Option<&LinuxGuest>,
) -> Result<BTreeMap<String, String>, ArtifactError> {
    artifact_files(vmm, guest)
        .into_iter()
        .map(|(name, p)| Ok((name.to_string(), sha256_file(&p)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use truecold_proof::schema::{required_artifacts, ContractKind};

    #[test]
    fn sha256_of_a_known_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("abc");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(matches!(
            sha256_file(&d.path().join("nope")),
            Err(ArtifactError::Io(_))
        ));
    }

    /// A guest booting its `bzImage` keeps `vmlinux` as its symbol file (the bzImage has no
    /// symbol table): attribution names its functions from the same build's ELF image.
    #[test]
    fn a_bzimage_guest_names_its_functions_from_its_vmlinux() {
        let d = tempfile::tempdir().unwrap();
        for f in ["vmlinux", "initramfs.cpio", "init", "config", "bzImage"] {
            std::fs::write(d.path().join(f), f.as_bytes()).unwrap();
        }
        let g = linux_guest(d.path()).unwrap();
        assert_eq!(g.symbols, d.path().join("vmlinux"));
        assert_eq!(g.symbols, g.vmlinux);
        let bz = linux_guest_bzimage(d.path()).unwrap();
        assert_eq!(bz.vmlinux, d.path().join("bzImage"));
        assert_eq!(bz.symbols, d.path().join("vmlinux"));
    }

    #[test]
    fn missing_guest_artifacts_name_the_file_and_the_fix() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("vmlinux"), b"k").unwrap();
        let e = linux_guest(d.path()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("initramfs.cpio"), "{msg}");
        assert!(msg.contains("--probe"), "{msg}");
        for f in ["initramfs.cpio", "init", "config"] {
            std::fs::write(d.path().join(f), f.as_bytes()).unwrap();
        }
        let g = linux_guest(d.path()).unwrap();
        let vmm = d.path().join("vmm");
        std::fs::write(&vmm, b"v").unwrap();
        let dg = digests(&vmm, Some(&g)).unwrap();
        for name in required_artifacts(ContractKind::Linux) {
            assert!(dg.contains_key(*name), "{name}");
        }
        let dp = digests(&vmm, None).unwrap();
        assert_eq!(
            dp.keys().map(String::as_str).collect::<Vec<_>>(),
            required_artifacts(ContractKind::Probe)
        );
    }

    #[test]
    fn vmm_must_exist_and_be_executable() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("truecold-vmm");
        assert!(matches!(
            find_vmm(Some(&p)),
            Err(ArtifactError::VmmMissing { .. })
        ));
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        assert!(matches!(
            find_vmm(Some(&p)),
            Err(ArtifactError::VmmNotExecutable { .. })
        ));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(find_vmm(Some(&p)).unwrap().is_absolute());
    }

    #[test]
    fn guest_dir_precedence() {
        assert_eq!(guest_dir(Some(Path::new("/x"))), PathBuf::from("/x"));
    }
}
