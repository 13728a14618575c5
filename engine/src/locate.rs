//! Where the peer engines' binaries are: the flag, else the environment variable, else the
//! default (the static builds in `../shared/peers/bin` beside the clone for Firecracker and
//! Cloud Hypervisor, `qemu-system-x86_64` on `PATH`). One definition for the bench and the
//! nested harness; truecold-vmm is found by the bench's artifact lookup.

use std::path::{Path, PathBuf};
use truecold_proto::kinds::Engine;

/// The peers' directory, relative to the directory that holds the clone.
pub const PEERS_BIN: &str = "shared/peers/bin";

/// A binary that is not where it was looked for.
#[derive(Debug, thiserror::Error)]
#[error("the {engine} binary was not found (looked at {looked}); {how}")]
pub struct Missing {
    pub engine: Engine,
    pub looked: String,
    pub how: &'static str,
}

/// The file name of each engine's binary.
pub fn binary_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Truecold => "truecold-vmm",
        Engine::Firecracker => "firecracker",
        Engine::CloudHypervisor => "cloud-hypervisor",
        Engine::QemuMicrovm => "qemu-system-x86_64",
    }
}

/// The environment variable naming an engine's binary.
pub fn env_var(engine: Engine) -> Option<&'static str> {
    match engine {
        Engine::Truecold => None,
        Engine::Firecracker => Some("TRUECOLD_FIRECRACKER"),
        Engine::CloudHypervisor => Some("TRUECOLD_CLOUD_HYPERVISOR"),
        Engine::QemuMicrovm => Some("TRUECOLD_QEMU"),
    }
}

/// How to get a missing engine.
pub fn how_to_get(engine: Engine) -> &'static str {
    match engine {
        Engine::Truecold => {
            "build it with `cargo build --release -p truecold-vmm` or pass --vmm PATH"
        }
        Engine::Firecracker => {
            "pass --firecracker PATH or set TRUECOLD_FIRECRACKER; a static v1.16.1 build and how \
             it was made are described in ../shared/peers/README.md (on a machine with \
             internet: the official release asset, checked against the sha256 published with \
             it; docs/engines.md, \"Where the engine binaries come from\")"
        }
        Engine::CloudHypervisor => {
            "pass --cloud-hypervisor PATH or set TRUECOLD_CLOUD_HYPERVISOR; a static v53.0 \
             build and how it was made are described in ../shared/peers/README.md (on a \
             machine with internet: the official release asset, checked against the sha256 \
             published with it; docs/engines.md, \"Where the engine binaries come from\")"
        }
        Engine::QemuMicrovm => {
            "install it with `apt-get install qemu-system-x86`, pass --qemu PATH or set \
             TRUECOLD_QEMU"
        }
    }
}

/// Where a peer binary is looked for when no flag or variable names it: `../shared/peers/bin`
/// beside the clone, from the working directory and from this binary's place in the clone
/// (`<clone>/target/<profile>/<bin>` or `<clone>/target/<triple>/<profile>/<bin>`), or, for
/// QEMU, every directory of `PATH`.
fn defaults(engine: Engine) -> Vec<PathBuf> {
    let name = binary_name(engine);
    if engine == Engine::QemuMicrovm {
        return std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect())
            .unwrap_or_default();
    }
    let mut v = vec![Path::new("..").join(PEERS_BIN).join(name)];
    if let Ok(exe) = std::env::current_exe() {
        for up in [4, 5] {
            if let Some(beside) = exe.ancestors().nth(up) {
                v.push(beside.join(PEERS_BIN).join(name));
            }
        }
    }
    v
}

/// The binary of a peer `engine` (not truecold): `flag`, else its variable, else the
/// defaults; the first that is a file, canonicalized. A missing one names how to get it.
pub fn peer_binary(engine: Engine, flag: Option<&Path>) -> Result<PathBuf, Missing> {
    let given = flag.map(Path::to_path_buf).or_else(|| {
        env_var(engine)
            .and_then(std::env::var_os)
            .map(PathBuf::from)
    });
    let candidates = match given {
        Some(p) => vec![p],
        None if engine == Engine::Truecold => vec![],
        None => defaults(engine),
    };
    match candidates.iter().find(|p| p.is_file()) {
        Some(p) => Ok(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        None => Err(Missing {
            engine,
            looked: if candidates.is_empty() {
                "nothing: no flag, variable or default".into()
            } else {
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            how: how_to_get(engine),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_naming_nothing_is_an_error_that_says_how_to_get_it() {
        let e = peer_binary(Engine::Firecracker, Some(Path::new("/nonexistent/fc"))).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("/nonexistent/fc"), "{text}");
        assert!(text.contains("../shared/peers/README.md"), "{text}");
        let e = peer_binary(Engine::QemuMicrovm, Some(Path::new("/nonexistent/q"))).unwrap_err();
        assert!(
            e.to_string().contains("apt-get install qemu-system-x86"),
            "{e}"
        );
        let sh = peer_binary(Engine::QemuMicrovm, Some(Path::new("/bin/sh"))).unwrap();
        assert!(sh.is_absolute());
    }
}
