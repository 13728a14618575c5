//! The parity contract's workspace disk: a small ext4 image with one file,
//! `truecold/seed` = [`WORKSPACE_SEED`], built reproducibly without root or loop devices.
//!
//! Recipe (e2fsprogs 1.47.0, Debian 12):
//! 1. `mke2fs` on the image file with every input pinned: our own `MKE2FS_CONFIG` (so the
//!    host's `/etc/mke2fs.conf` cannot change the features), fixed size, block size, inode
//!    count and size, label, UUID (`-U`) and directory hash seed (`-E hash_seed=`), root
//!    owned by 0:0, no reserved blocks, inode tables and journal written out (no lazy init),
//!    no discard.
//! 2. `debugfs -w -f <commands>` populates it: `mkdir truecold`, `write <seed> truecold/seed`,
//!    then `sif` pins both modes (the seed's would otherwise come from the host's umask).
//!    debugfs's `write` sets uid/gid 0 and every time stamp to the filesystem's "now"; unlike
//!    `mke2fs -d` it copies no time stamp, owner or ctime from the host file.
//! 3. Time: `E2FSPROGS_FAKE_TIME` for both tools (`SOURCE_DATE_EPOCH` is only read from
//!    e2fsprogs 1.47.1 on), so the superblock's mkfs/write/check times, the directories' and
//!    the file's times are all [`FAKE_TIME`].
//! 4. Check: `debugfs -R "cat truecold/seed"` must print the seed (debugfs's `-f` keeps going
//!    after a failed command and exits 0), and `dumpe2fs -h` must show the pinned UUID.
//!
//! Built twice, the bytes are identical (`xtask repro-check`). A different e2fsprogs version
//! may lay the image out differently: its version goes into the manifest.

use crate::{io_err, write_atomic, XtaskError};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use truecold_proto::hex;
use truecold_proto::parity::{WORKSPACE_MOUNT, WORKSPACE_SEED, WORKSPACE_SEED_FILE};

pub use truecold_proto::parity::WORKSPACE_IMAGE as IMAGE;
/// Image size: 8 MiB (2048 blocks of 4 KiB; mke2fs gives it a 4 MiB journal).
pub const SIZE: u64 = 8 << 20;
/// Filesystem UUID (`-U`); also seeds metadata_csum.
pub const UUID: &str = "74727565-636f-6c64-7773-000000000001";
/// Directory hash seed (`-E hash_seed=`).
pub const HASH_SEED: &str = "74727565-636f-6c64-7773-000000000002";
/// Every time stamp in the image (`E2FSPROGS_FAKE_TIME`): 2024-01-01T00:00:00Z. Not 0: the
/// library reads 0 as "no fake time".
pub const FAKE_TIME: u64 = 1_704_067_200;
/// Volume label.
pub const LABEL: &str = "truecold-ws";
/// The package that has `mke2fs` and `debugfs`.
pub const PACKAGE: &str = "e2fsprogs";
/// Our mke2fs configuration (replaces `/etc/mke2fs.conf`): Debian 12's ext4 feature set,
/// without `acl` among the default mount options (the parity kernel has no POSIX ACLs).
pub const MKE2FS_CONF: &str = "[defaults]
\tbase_features = sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr
\tdefault_mntopts = user_xattr
\tenable_periodic_fsck = 0
\tblocksize = 4096
\tinode_size = 256
\tinode_ratio = 16384

[fs_types]
\text4 = {
\t\tfeatures = has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize
\t}
";

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("`{tool}` not found (on PATH, /usr/sbin, /sbin): install the `{PACKAGE}` package")]
    MissingTool { tool: &'static str },
    #[error("`{0} -V` printed no version")]
    NoVersion(&'static str),
    #[error("the image's seed file reads back as {got:?}, not the seed")]
    SeedMismatch { got: String },
    #[error("the image's UUID is not {UUID}:\n{0}")]
    UuidMismatch(String),
}

/// What was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub sha256: String,
    /// `mke2fs -V`'s version (e.g. `1.47.0`).
    pub e2fsprogs: String,
}

impl Image {
    /// The manifest's `workspace` object: the image's inputs and the tool version.
    pub fn manifest(&self) -> serde_json::Value {
        serde_json::json!({
            "file": IMAGE,
            "sha256": self.sha256,
            "e2fsprogs": self.e2fsprogs,
            "size": SIZE,
            "uuid": UUID,
            "hash_seed": HASH_SEED,
            "fake_time": FAKE_TIME,
            "label": LABEL,
            "seed_file": WORKSPACE_SEED_FILE,
            "seed_sha256": hex(&Sha256::digest(WORKSPACE_SEED)),
        })
    }
}

/// `tool` on `PATH`, else in `/usr/sbin` or `/sbin` (not on a non-root user's PATH).
pub fn find_tool(tool: &'static str) -> Result<PathBuf, WorkspaceError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or(WorkspaceError::MissingTool { tool })
}

/// The e2fsprogs version from `mke2fs -V` (`mke2fs 1.47.0 (5-Feb-2023)` → `1.47.0`).
pub fn parse_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("mke2fs "))?;
    let v = line.split_whitespace().nth(1)?;
    v.bytes()
        .all(|b| b.is_ascii_digit() || b == b'.')
        .then(|| v.to_string())
}

/// The path of the seed inside the image (relative to its root).
fn seed_in_image() -> &'static str {
    WORKSPACE_SEED_FILE
        .strip_prefix(WORKSPACE_MOUNT)
        .and_then(|p| p.strip_prefix('/'))
        .unwrap_or("truecold/seed")
}

fn output(cmd: &mut Command) -> Result<String, XtaskError> {
    let text = format!("{cmd:?}");
    let out = cmd.output().map_err(|source| XtaskError::Spawn {
        cmd: text.clone(),
        source,
    })?;
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        return Err(XtaskError::Failed {
            cmd: text,
            status: out.status,
        });
    }
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Builds the image at `out` (atomically: in a scratch directory beside it, then renamed).
pub fn build(out: &Path) -> Result<Image, XtaskError> {
    let mke2fs = find_tool("mke2fs")?;
    let debugfs = find_tool("debugfs")?;
    let dumpe2fs = find_tool("dumpe2fs")?;
    let version = output(Command::new(&mke2fs).arg("-V"))?;
    let e2fsprogs = parse_version(&version).ok_or(WorkspaceError::NoVersion("mke2fs"))?;
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let scratch = dir.join(format!(".workspace-build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(io_err("create", &scratch))?;
    let r = build_in(&scratch, out, &mke2fs, &debugfs, &dumpe2fs);
    let _ = std::fs::remove_dir_all(&scratch);
    let sha256 = r?;
    Ok(Image { sha256, e2fsprogs })
}

fn build_in(
    scratch: &Path,
    out: &Path,
    mke2fs: &Path,
    debugfs: &Path,
    dumpe2fs: &Path,
) -> Result<String, XtaskError> {
    let conf = scratch.join("mke2fs.conf");
    write_atomic(&conf, MKE2FS_CONF.as_bytes())?;
    let seed = scratch.join("seed");
    write_atomic(&seed, WORKSPACE_SEED)?;
    let img = scratch.join(IMAGE);
    let f = std::fs::File::create(&img).map_err(io_err("create", &img))?;
    f.set_len(SIZE).map_err(io_err("size", &img))?;
    drop(f);
    let fake_time = FAKE_TIME.to_string();
    let env = |c: &mut Command| {
        c.env("E2FSPROGS_FAKE_TIME", &fake_time)
            .env("MKE2FS_CONFIG", &conf)
            .env("LC_ALL", "C")
            .env("TZ", "UTC");
    };
    let mut c = Command::new(mke2fs);
    env(&mut c);
    c.args([
        "-q", "-F", "-t", "ext4", "-b", "4096", "-I", "256", "-N", "64",
    ])
    .args(["-m", "0", "-L", LABEL, "-U", UUID])
    .arg("-E")
    .arg(format!(
        "hash_seed={HASH_SEED},root_owner=0:0,nodiscard,lazy_itable_init=0,lazy_journal_init=0"
    ))
    .arg(&img)
    .arg(format!("{}k", SIZE / 1024));
    output(&mut c)?;
    let dest = seed_in_image();
    let parent = dest.rsplit_once('/').map_or("", |(p, _)| p);
    let mut cmds = String::new();
    if !parent.is_empty() {
        cmds.push_str(&format!("mkdir {parent}\nsif {parent} mode 040755\n"));
    }
    cmds.push_str(&format!(
        "write {} {dest}\nsif {dest} mode 0100644\n",
        seed.display()
    ));
    let cmdfile = scratch.join("debugfs.cmds");
    write_atomic(&cmdfile, cmds.as_bytes())?;
    let mut c = Command::new(debugfs);
    env(&mut c);
    c.arg("-w").arg("-f").arg(&cmdfile).arg(&img);
    output(&mut c)?;
    // debugfs's -f goes on after a failed command and exits 0: read the seed back.
    let mut c = Command::new(debugfs);
    env(&mut c);
    c.arg("-R").arg(format!("cat {dest}")).arg(&img);
    let cat = c.output().map_err(|source| XtaskError::Spawn {
        cmd: format!("{c:?}"),
        source,
    })?;
    if cat.stdout != WORKSPACE_SEED {
        return Err(WorkspaceError::SeedMismatch {
            got: String::from_utf8_lossy(&cat.stdout).into_owned(),
        }
        .into());
    }
    let mut c = Command::new(dumpe2fs);
    env(&mut c);
    let head = output(c.arg("-h").arg(&img))?;
    if !head
        .lines()
        .any(|l| l.starts_with("Filesystem UUID:") && l.trim_end().ends_with(UUID))
    {
        return Err(WorkspaceError::UuidMismatch(head).into());
    }
    let bytes = std::fs::read(&img).map_err(io_err("read", &img))?;
    write_atomic(out, &bytes)?;
    Ok(hex(&Sha256::digest(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_parsed_from_mke2fs_v() {
        assert_eq!(
            parse_version("mke2fs 1.47.0 (5-Feb-2023)\n\tUsing EXT2FS Library version 1.47.0\n")
                .as_deref(),
            Some("1.47.0")
        );
        assert_eq!(parse_version("mkfs.ext4: nothing\n"), None);
        assert_eq!(parse_version("mke2fs x.y (date)\n"), None);
    }

    #[test]
    fn the_seed_lives_under_truecold_in_the_image() {
        assert_eq!(seed_in_image(), "truecold/seed");
    }

    #[test]
    fn a_missing_tool_names_the_package() {
        let e = find_tool("mke2fs-that-does-not-exist").unwrap_err();
        assert!(
            e.to_string().contains("install the `e2fsprogs` package"),
            "{e}"
        );
    }
}
