//! The post-ready workloads. The tmpfs one (every boot): fixed payload → tmpfs file → read
//! back → SHA-256 → delete → gone. The workspace one (`truecold.workspace=1`, after it): the
//! same round trip on the ext4 workspace disk, the page cache dropped after the fsync so the
//! read back comes from the disk.

use crate::error::InitError;
use std::path::Path;
use truecold_init::roundtrip::{round_trip, FileStep, RoundTripError};
use truecold_init::{payload, workspace_probe_path};
use truecold_proto::{BootId, ErrorCode};

const DIR: &str = "/tmp";
const FILE: &str = "/tmp/truecold-workload";

/// Runs the tmpfs workload once; `Ok` means BENCH_OK.
pub fn run() -> Result<(), InitError> {
    crate::sys::mount("tmpfs", DIR, 0).map_err(|source| InitError::Workload {
        code: ErrorCode::WorkloadWrite,
        step: "mount tmpfs",
        source,
    })?;
    round_trip(Path::new(FILE), &payload(), || Ok(())).map_err(|e| match e {
        RoundTripError::Io { step, source, .. } => InitError::Workload {
            code: match step {
                FileStep::Create | FileStep::Write | FileStep::Fsync | FileStep::Evict => {
                    ErrorCode::WorkloadWrite
                }
                FileStep::Read => ErrorCode::WorkloadRead,
                FileStep::Unlink => ErrorCode::WorkloadDelete,
            },
            step: step.as_str(),
            source,
        },
        RoundTripError::Digest { got } => InitError::WorkloadDigest { got },
        RoundTripError::StillPresent(_) => InitError::WorkloadStillPresent,
    })
}

/// The workspace workload: the payload through `/workspace/truecold/probe-<boot id>`, the
/// page cache dropped after the fsync (`/proc/sys/vm/drop_caches` = 1: the clean page
/// cache, which the fsync made of this file; the kernel logs one `KERN_INFO` line about it;
/// the kernel has no `fadvise`, tinyconfig leaves `ADVISE_SYSCALLS` off) so the read back
/// comes from the disk; any failure is `workspace`.
pub fn run_workspace(boot_id: BootId) -> Result<(), InitError> {
    let evict = || std::fs::write("/proc/sys/vm/drop_caches", b"1\n");
    round_trip(Path::new(&workspace_probe_path(boot_id)), &payload(), evict)
        .map_err(InitError::Workspace)
}
