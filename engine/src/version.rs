//! What an engine binary says of itself: the first line of `<binary> --version`, run once per
//! campaign before the first launch (outside every measured window), checked to be that
//! engine's (so a binary passed to the wrong flag is an error, not a mislabelled arm).

use std::path::{Path, PathBuf};
use truecold_proto::kinds::Engine;

/// Why an engine's version could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    #[error("cannot run `{} --version`", binary.display())]
    Spawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{} --version` failed ({status})", binary.display())]
    Failed { binary: PathBuf, status: String },
    #[error("`{} --version` printed {line:?}, which is not {engine}'s version line", binary.display())]
    NotThisEngine {
        binary: PathBuf,
        engine: Engine,
        line: String,
    },
}

/// The first non-empty line of `stdout`, trimmed, when it is `engine`'s version line.
pub fn parse(engine: Engine, stdout: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().next().unwrap_or("").trim().to_string();
    let ok = match engine {
        Engine::Truecold => crate::truecold::is_version_line(&line),
        Engine::Firecracker => crate::firecracker::is_version_line(&line),
        Engine::CloudHypervisor => crate::cloud_hypervisor::is_version_line(&line),
        Engine::QemuMicrovm => crate::qemu_microvm::is_version_line(&line),
    };
    if ok {
        Ok(line)
    } else {
        Err(line)
    }
}

/// Runs `<binary> --version` once and returns its first line (see [`parse`]).
pub fn query(engine: Engine, binary: &Path) -> Result<String, VersionError> {
    let out = std::process::Command::new(binary)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| VersionError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(VersionError::Failed {
            binary: binary.to_path_buf(),
            status: out.status.to_string(),
        });
    }
    parse(engine, &out.stdout).map_err(|line| VersionError::NotThisEngine {
        binary: binary.to_path_buf(),
        engine,
        line,
    })
}
