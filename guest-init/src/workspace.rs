//! The parity contract's workspace disk (`truecold.workspace=1`): mount
//! [`WORKSPACE_DEVICE`] (ext4) at [`WORKSPACE_MOUNT`] and check that its seed file holds
//! [`WORKSPACE_SEED`], the proof that the guest reads the image the host built.

use crate::error::InitError;
use std::io::Read;
use truecold_init::seed_matches;
use truecold_proto::parity::{
    WORKSPACE_DEVICE, WORKSPACE_FSTYPE, WORKSPACE_MOUNT, WORKSPACE_SEED, WORKSPACE_SEED_FILE,
};

/// Mounts the workspace (`nosuid,nodev,noexec,noatime`; the mount point is created) and
/// checks the seed (read bounded: at most one byte more than the seed). Every failure is
/// `workspace_mount`.
pub fn mount() -> Result<(), InitError> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_NOATIME;
    crate::sys::mount_source(WORKSPACE_DEVICE, WORKSPACE_FSTYPE, WORKSPACE_MOUNT, flags).map_err(
        |source| InitError::WorkspaceMount {
            step: "mount",
            source,
        },
    )?;
    let mut got = Vec::with_capacity(WORKSPACE_SEED.len() + 1);
    std::fs::File::open(WORKSPACE_SEED_FILE)
        .and_then(|f| {
            f.take(WORKSPACE_SEED.len() as u64 + 1)
                .read_to_end(&mut got)
        })
        .map_err(|source| InitError::WorkspaceMount {
            step: "read the seed file",
            source,
        })?;
    if !seed_matches(&got) {
        return Err(InitError::WorkspaceSeed { got: got.len() });
    }
    Ok(())
}
