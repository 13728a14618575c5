//! The post-ready workload: fixed payload → tmpfs file → read back → SHA-256 → delete → gone.

use crate::error::InitError;
use std::fs;
use std::io::{self, Write};
use truecold_init::{payload, sha256};
use truecold_proto::ErrorCode;

const DIR: &str = "/tmp";
const FILE: &str = "/tmp/truecold-workload";

fn step(code: ErrorCode, step: &'static str) -> impl FnOnce(io::Error) -> InitError {
    move |source| InitError::Workload { code, step, source }
}

/// Runs the workload once; `Ok` means BENCH_OK.
pub fn run() -> Result<(), InitError> {
    crate::sys::mount("tmpfs", DIR, 0).map_err(step(ErrorCode::WorkloadWrite, "mount tmpfs"))?;
    let data = payload();
    let want = sha256(&data);
    let mut f = fs::File::create(FILE).map_err(step(ErrorCode::WorkloadWrite, "create"))?;
    f.write_all(&data)
        .map_err(step(ErrorCode::WorkloadWrite, "write"))?;
    f.sync_all()
        .map_err(step(ErrorCode::WorkloadWrite, "fsync"))?;
    drop(f);
    let back = fs::read(FILE).map_err(step(ErrorCode::WorkloadRead, "read"))?;
    if sha256(&back) != want {
        return Err(InitError::WorkloadDigest { got: back.len() });
    }
    fs::remove_file(FILE).map_err(step(ErrorCode::WorkloadDelete, "unlink"))?;
    match fs::symlink_metadata(FILE) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        _ => Err(InitError::WorkloadStillPresent),
    }
}
