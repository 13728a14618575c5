//! Writing a bundle atomically, and `report` on one: its generated files (README, plots,
//! the attribution files) regenerated from its records.

use std::fs;
use std::path::{Path, PathBuf};

use truecold_proto::path_io::PathIoError;

use super::check::*;
use super::readme::*;
use super::record::*;
use crate::csv::write_samples;
use crate::digest::sha256_hex;
use crate::names::{
    is_valid_name, CDF_FILE, CMDLINE_FILE, CONFIG_FILE, README_FILE, RESULT_FILE, SAMPLES_FILE,
    STAGES_FILE, SUMS_FILE,
};
use crate::schema::{ContractKind, ResultJson, Sample};
use crate::skeleton;
use crate::sums::{format_sums, parse_sums};
use crate::verdict::{Verdict, VerifyOptions};

/// What the caller supplies besides the result and the samples.
#[derive(Clone, Debug, Default)]
pub struct BundleInputs {
    /// The guest kernel's `.config` (required for Linux, absent for probe).
    pub kernel_config: Option<Vec<u8>>,
    /// The exact command line used (written to `cmdline.txt`).
    pub cmdline: String,
    /// Extra files (logs …): `(name, bytes)`; covered by SHA256SUMS.
    pub extra_files: Vec<(String, Vec<u8>)>,
    /// Extra files already on disk (written as the campaign ran: the bench's
    /// `reports.jsonl`): copied in through a fixed buffer and hashed as they are copied,
    /// never held whole; covered by SHA256SUMS like `extra_files`.
    pub staged_files: Vec<StagedFile>,
}

/// An extra file of a bundle that is already on disk: the whole of `file` (from offset 0 to
/// its end, read with positional reads, so its cursor is never used) becomes `name`.
#[derive(Clone, Debug)]
pub struct StagedFile {
    pub name: String,
    pub file: std::sync::Arc<fs::File>,
}

/// Reads a file from `pos` on with positional reads (`pread`).
struct ReadAt<'a> {
    file: &'a fs::File,
    pos: u64,
}

impl std::io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// What [`copy_staged`] reads, written to `out` as it is read.
struct Tee<'a, R> {
    from: R,
    out: &'a mut fs::File,
}

impl<R: std::io::Read> std::io::Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::Write;
        let n = self.from.read(buf)?;
        self.out.write_all(&buf[..n])?;
        Ok(n)
    }
}

/// Copies `staged` to the new file `path` (fsynced) and returns its digest.
fn copy_staged(path: &Path, staged: &fs::File) -> Result<String, BundleError> {
    let mut out = crate::fsio::create_new(path)?;
    let (digest, _) = crate::digest::sha256_reader(Tee {
        from: ReadAt {
            file: staged,
            pos: 0,
        },
        out: &mut out,
    })
    .map_err(PathIoError::at("copy the staged file to", path))?;
    out.sync_all().map_err(PathIoError::at("fsync", path))?;
    Ok(digest)
}

/// The file set of a bundle held in memory (everything but SHA256SUMS and the staged files,
/// whose names are checked here), in write order.
pub fn bundle_files(
    result: &ResultJson,
    samples: &[Sample],
    inputs: &BundleInputs,
) -> Result<Vec<(String, Vec<u8>)>, BundleError> {
    match (result.contract.kind, &inputs.kernel_config) {
        (ContractKind::Linux, None) | (ContractKind::Probe, Some(_)) => {
            return Err(BundleError::ConfigPresence)
        }
        _ => {}
    }
    let mut files = vec![
        (RESULT_FILE.to_string(), result_bytes(result)?),
        (
            SAMPLES_FILE.to_string(),
            write_samples(samples).into_bytes(),
        ),
        (CMDLINE_FILE.to_string(), {
            let mut c = inputs.cmdline.clone().into_bytes();
            if !c.ends_with(b"\n") {
                c.push(b'\n');
            }
            c
        }),
    ];
    if let Some(cfg) = &inputs.kernel_config {
        files.push((CONFIG_FILE.to_string(), cfg.clone()));
    }
    let attribution = inputs
        .extra_files
        .iter()
        .find(|(n, _)| n == crate::attribution::JSONL_FILE)
        .and_then(|(_, b)| crate::attribution::readme_section(b));
    files.extend(generated_files_with(
        result,
        samples,
        attribution.as_deref(),
    ));
    for (name, bytes) in &inputs.extra_files {
        if !is_valid_name(name) || name == SUMS_FILE || files.iter().any(|(n, _)| n == name) {
            return Err(BundleError::BadExtraName(name.clone()));
        }
        files.push((name.clone(), bytes.clone()));
    }
    for (i, f) in inputs.staged_files.iter().enumerate() {
        let name = &f.name;
        if !is_valid_name(name)
            || name == SUMS_FILE
            || files.iter().any(|(n, _)| n == name)
            || inputs.staged_files[..i].iter().any(|g| &g.name == name)
        {
            return Err(BundleError::BadExtraName(name.clone()));
        }
    }
    Ok(files)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    Ok(crate::fsio::write_new_file(path, bytes)?)
}

fn sync_dir(path: &Path) -> Result<(), BundleError> {
    Ok(crate::fsio::sync_dir(path)?)
}

/// A bundle written to disk, and what the verifier says about it. A bundle whose data
/// break the contract (e.g. a repeated boot id) is still written — failures are data —
/// and `verdict` lists every reason.
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub verdict: Verdict,
}

/// Writes a bundle to `dest` atomically: every file goes into a temporary directory in
/// the same parent, each file and the directory are fsynced, the directory is renamed to
/// `dest` and the parent fsynced. A reader never sees half a bundle. `dest` must not
/// exist. Works for partial campaigns too (`result.contract.incomplete`).
pub fn write_bundle(
    dest: &Path,
    result: &ResultJson,
    samples: &[Sample],
    inputs: &BundleInputs,
) -> Result<Written, BundleError> {
    let files = bundle_files(result, samples, inputs)?;
    let parent = dest
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .ok_or_else(|| BundleError::BadDestination(dest.to_path_buf()))?;
    let name = dest
        .file_name()
        .ok_or_else(|| BundleError::BadDestination(dest.to_path_buf()))?;
    if dest.symlink_metadata().is_ok() {
        return Err(BundleError::Exists(dest.to_path_buf()));
    }
    let tmp = parent.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    fs::create_dir(&tmp).map_err(PathIoError::at("create directory", &tmp))?;
    let res = (|| {
        let mut sums = Vec::new();
        for (n, bytes) in &files {
            write_synced(&tmp.join(n), bytes)?;
            sums.push((n.clone(), sha256_hex(bytes)));
        }
        for f in &inputs.staged_files {
            sums.push((f.name.clone(), copy_staged(&tmp.join(&f.name), &f.file)?));
        }
        write_synced(&tmp.join(SUMS_FILE), format_sums(&sums).as_bytes())?;
        sync_dir(&tmp)?;
        let verdict = verify_bundle_with(&tmp, &VerifyOptions::default());
        rename_noreplace(&tmp, dest)?;
        sync_dir(parent)?;
        Ok(verdict)
    })();
    match res {
        Ok(verdict) => Ok(Written {
            path: dest.to_path_buf(),
            verdict,
        }),
        Err(e) => {
            // Best effort: leave no temporary directory behind.
            let _ = fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// Renames `from` to `to` atomically unless `to` exists (`renameat2` with
/// `RENAME_NOREPLACE`): unlike check-then-rename, an existing (even empty) directory at
/// `to` is never replaced, whoever created it and whenever. An existing `to` is
/// [`BundleError::Exists`]; a filesystem without `RENAME_NOREPLACE` support is an I/O
/// error (`EINVAL`), never a fallback to a replacing rename.
pub fn rename_noreplace(from: &Path, to: &Path) -> Result<(), BundleError> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| BundleError::BadDestination(p.to_path_buf()))
    };
    let (f, t) = (c(from)?, c(to)?);
    #[allow(unsafe_code)]
    // SAFETY: `f` and `t` are valid NUL-terminated strings that outlive the call;
    // AT_FDCWD makes relative paths relative to the working directory, as `fs::rename`
    // does; renameat2 only reads the two strings and touches no memory of ours.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EEXIST) | Some(libc::ENOTEMPTY) => Err(BundleError::Exists(to.to_path_buf())),
        _ => Err(BundleError::Path(PathIoError {
            op: "rename into place (renameat2 RENAME_NOREPLACE)",
            path: to.to_path_buf(),
            source: e,
        })),
    }
}

/// Whether `report` regenerates the file `name` of a bundle (the attribution plots only
/// where the bundle lists its attribution file).
pub fn is_regenerated(name: &str, attribution: bool) -> bool {
    matches!(
        name,
        README_FILE | CDF_FILE | STAGES_FILE | crate::names::HTML_FILE
    ) || (attribution && crate::attribution::is_generated(name))
}

/// `report DIR`: regenerates README.md and the plots from `result.json` and
/// `samples.csv`, then SHA256SUMS. Refuses when any file that is not regenerated differs
/// from its SHA256SUMS entry (that would launder a change). Each file is replaced
/// atomically (write + fsync + rename). Returns the names rewritten.
pub fn regenerate(dir: &Path) -> Result<Vec<String>, BundleError> {
    let listed = skeleton::read_listing(dir, parse_sums)?;
    let attribution = listed
        .iter()
        .any(|(n, _)| n == crate::attribution::JSONL_FILE);
    let is_generated = |n: &str| is_regenerated(n, attribution);
    let mut sums = skeleton::check_unchanged(dir, &listed, is_generated)?;
    let (result, samples) = read_bundle(dir)?;
    let section = attribution
        .then(|| crate::attribution::readme_section_of_dir(dir))
        .flatten();
    let mut generated = generated_files_with(&result, &samples, section.as_deref());
    if attribution {
        generated.extend(
            crate::attribution::regenerate(dir, &result, &samples)?
                .map_err(BundleError::Attribution)?,
        );
    }
    let mut written = Vec::new();
    for (name, bytes) in &generated {
        replace_file(dir, name, bytes)?;
        sums.push((name.clone(), sha256_hex(bytes)));
        written.push(name.clone());
    }
    skeleton::write_sums(dir, &sums)?;
    written.push(SUMS_FILE.to_string());
    Ok(written)
}

fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), BundleError> {
    Ok(crate::fsio::write_new(dir, name, bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_never_replaces_an_existing_empty_directory() {
        let t = tempfile::tempdir().unwrap();
        let (src, dst) = (t.path().join("src"), t.path().join("dst"));
        fs::create_dir(&src).unwrap();
        fs::write(src.join("f"), b"x").unwrap();
        fs::create_dir(&dst).unwrap(); // created by someone else after any check
        match rename_noreplace(&src, &dst) {
            Err(BundleError::Exists(p)) => assert_eq!(p, dst),
            other => panic!("expected Exists, got {other:?}"),
        }
        assert!(src.join("f").exists());
        assert_eq!(fs::read_dir(&dst).unwrap().count(), 0);
        // Nothing there: renamed.
        fs::remove_dir(&dst).unwrap();
        rename_noreplace(&src, &dst).unwrap();
        assert!(dst.join("f").exists() && !src.exists());
        // An existing file is not replaced either.
        let file = t.path().join("file");
        fs::write(&file, b"keep").unwrap();
        assert!(matches!(
            rename_noreplace(&dst, &file),
            Err(BundleError::Exists(_))
        ));
        assert_eq!(fs::read(&file).unwrap(), b"keep");
    }
}
