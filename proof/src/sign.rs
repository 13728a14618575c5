//! `truecold-proof sign`: a directory that verifies, whatever its kind, gets an SSH
//! signature over its `SHA256SUMS` ([`sign_bundle`]). The signature itself (making one,
//! checking one, [`SIG_FILE`]) lives in [`crate::signature`], below every verifier; this
//! module sits above them (it verifies before it signs), and re-exports those names.

use std::path::{Path, PathBuf};

use crate::names::SUMS_FILE;

pub use crate::signature::*;

/// `sign --key KEY DIR`: checks that the bundle verifies, signs its `SHA256SUMS` with the
/// SSH private key `key` and writes [`SIG_FILE`] (replacing one that is there, atomically).
/// Returns the signature's path.
pub fn sign_bundle(dir: &Path, key: &Path, ssh: &SshKeygen) -> Result<PathBuf, SignError> {
    let v = crate::verify::verify_dir(dir);
    if !v.is_valid() {
        return Err(SignError::InvalidBundle {
            dir: dir.to_path_buf(),
            report: v.render(dir, 5),
        });
    }
    let sums = crate::skeleton::read_record(&dir.join(SUMS_FILE))?;
    let sig = ssh.sign(key, &sums)?;
    let dest = dir.join(SIG_FILE);
    crate::fsio::write_new(dir, SIG_FILE, &sig)?;
    crate::fsio::sync_dir(dir)?;
    Ok(dest)
}
