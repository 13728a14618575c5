//! SSH signatures over `SHA256SUMS`: making and checking one with `ssh-keygen`
//! (`truecold-proof sign`, [`crate::sign::sign_bundle`], and `verify --signature`).
//!
//! A checksum file proves the bundle's files are the ones it lists, nothing more: anyone
//! who edits a bundle can regenerate it. A signature binds `SHA256SUMS` (and so, through
//! the digests, every listed file) to the holder of a private key. The format is OpenSSH's
//! `SSHSIG` in the namespace [`NAMESPACE`], made and checked by the system's `ssh-keygen`
//! (`-Y sign`, `-Y find-principals`, `-Y verify`; OpenSSH 8.2 or later), so anyone can
//! check a bundle by hand:
//!
//! ```sh
//! ssh-keygen -Y verify -f allowed_signers -I <identity> -n truecold-bundle \
//!     -s SHA256SUMS.sig < SHA256SUMS
//! ```
//!
//! The signature lives next to the checksums in [`SIG_FILE`]; it is not listed in
//! `SHA256SUMS` (it signs that file).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use crate::names::SIG_FILE;
/// The SSHSIG namespace: a signature made for another purpose never verifies as a bundle's.
pub const NAMESPACE: &str = "truecold-bundle";

/// Errors of signing and of checking a signature.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error(
        "`{}` not found: SSH signatures need ssh-keygen from OpenSSH 8.2 or later \
         (Debian/Ubuntu package `openssh-client`)",
        program.display()
    )]
    NoSshKeygen {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("running `{}`", program.display())]
    Run {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] truecold_proto::path_io::PathIoError),
    #[error(transparent)]
    Dir(#[from] crate::skeleton::DirError),
    #[error("refusing to sign {}: it does not verify\n{report}", dir.display())]
    InvalidBundle { dir: PathBuf, report: String },
    #[error("ssh-keygen -Y sign failed ({}): {stderr}", exit_words(*code))]
    SignFailed { code: Option<i32>, stderr: String },
    #[error(
        "the bundle has no {SIG_FILE} (sign it with `truecold-proof sign --key <key> <bundle>`)"
    )]
    Unsigned,
    #[error("no principal in {} holds the key that made {SIG_FILE}: signed by someone not allowed", allowed.display())]
    UnknownSigner { allowed: PathBuf },
    #[error("{SIG_FILE} does not verify for `{identity}` over SHA256SUMS in namespace {NAMESPACE}: {stderr}")]
    BadSignature { identity: String, stderr: String },
    #[error("{SIG_FILE} cannot be read as a signature (a link, a FIFO, another non-regular file or one over {MAX_SIG_BYTES} bytes is none)")]
    SigFile(#[source] crate::fsio::FileError),
}

/// A child's exit as words: `exit 255`, or `killed by a signal` when it has no code.
fn exit_words(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit {c}"),
        None => "killed by a signal".to_string(),
    }
}

/// The most bytes of a `SHA256SUMS.sig` read (an SSH signature is well under 2 KiB).
pub const MAX_SIG_BYTES: u64 = 64 << 10;

/// Verifies the directory's `sig_path` over `data` with `keygen`, never letting ssh-keygen
/// open the directory's file: its bytes are read once here ([`crate::fsio::read_file`]: no
/// link followed, no FIFO waited on, capped), copied into a new private directory and
/// checked there. A file that cannot be read so is [`SignError::SigFile`], a finding.
pub fn verify_copy(
    keygen: &SshKeygen,
    allowed: &Path,
    identity: Option<&str>,
    sig_path: &Path,
    data: &[u8],
) -> Result<String, SignError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let sig = crate::fsio::read_file(sig_path, MAX_SIG_BYTES).map_err(SignError::SigFile)?;
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let private =
        std::env::temp_dir().join(format!("truecold-proof-sig-{}-{n}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(truecold_proto::path_io::PathIoError::at(
            "create (as a new private directory)",
            &private,
        ))?;
    let copy = private.join(SIG_FILE);
    let res = crate::fsio::write_new_file(&copy, &sig)
        .map_err(SignError::from)
        .and_then(|()| keygen.verify(allowed, identity, &copy, data));
    let _ = std::fs::remove_file(&copy);
    let _ = std::fs::remove_dir(&private);
    res
}

impl SignError {
    /// Whether this is a finding about the bundle (its signature is missing, from someone
    /// not allowed, or wrong) rather than a failure to check it.
    pub fn is_finding(&self) -> bool {
        matches!(
            self,
            SignError::Unsigned
                | SignError::UnknownSigner { .. }
                | SignError::BadSignature { .. }
                | SignError::SigFile(_)
        )
    }
}

/// The `ssh-keygen` to run.
#[derive(Clone, Debug)]
pub struct SshKeygen {
    pub program: PathBuf,
}

impl Default for SshKeygen {
    /// `ssh-keygen` from `PATH`.
    fn default() -> Self {
        SshKeygen {
            program: PathBuf::from("ssh-keygen"),
        }
    }
}

/// What `ssh-keygen` printed and how it ended.
struct Ran {
    ok: bool,
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

impl SshKeygen {
    fn run(&self, args: &[OsString], stdin: &[u8]) -> Result<Ran, SignError> {
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => SignError::NoSshKeygen {
                    program: self.program.clone(),
                    source,
                },
                _ => SignError::Run {
                    program: self.program.clone(),
                    source,
                },
            })?;
        let run_err = |source| SignError::Run {
            program: self.program.clone(),
            source,
        };
        // The input is small (SHA256SUMS): written whole before reading the outputs.
        if let Some(mut i) = child.stdin.take() {
            i.write_all(stdin).map_err(run_err)?;
        }
        let out = child.wait_with_output().map_err(run_err)?;
        Ok(Ran {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// Signs `data` with the private key `key`; returns the armoured signature.
    pub fn sign(&self, key: &Path, data: &[u8]) -> Result<Vec<u8>, SignError> {
        let args: Vec<OsString> = vec![
            "-Y".into(),
            "sign".into(),
            "-n".into(),
            NAMESPACE.into(),
            "-f".into(),
            key.into(),
        ];
        let r = self.run(&args, data)?;
        if !r.ok || r.stdout.is_empty() {
            return Err(SignError::SignFailed {
                code: r.code,
                stderr: r.stderr,
            });
        }
        Ok(r.stdout)
    }

    /// Checks the signature in the file `sig` over `data`, made by `identity` (or, without
    /// one, by any principal of `allowed` whose key made it). Returns the principal.
    pub fn verify(
        &self,
        allowed: &Path,
        identity: Option<&str>,
        sig: &Path,
        data: &[u8],
    ) -> Result<String, SignError> {
        let identity = match identity {
            Some(i) => i.to_string(),
            None => {
                let args: Vec<OsString> = vec![
                    "-Y".into(),
                    "find-principals".into(),
                    "-s".into(),
                    sig.into(),
                    "-f".into(),
                    allowed.into(),
                ];
                let r = self.run(&args, b"")?;
                let found = String::from_utf8_lossy(&r.stdout)
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .map(str::to_string);
                match found {
                    Some(p) if r.ok => p,
                    _ => {
                        return Err(SignError::UnknownSigner {
                            allowed: allowed.to_path_buf(),
                        })
                    }
                }
            }
        };
        let args: Vec<OsString> = vec![
            "-Y".into(),
            "verify".into(),
            "-f".into(),
            allowed.into(),
            "-I".into(),
            identity.clone().into(),
            "-n".into(),
            NAMESPACE.into(),
            "-s".into(),
            sig.into(),
        ];
        let r = self.run(&args, data)?;
        if r.ok {
            Ok(identity)
        } else {
            Err(SignError::BadSignature {
                identity,
                stderr: r.stderr,
            })
        }
    }
}
