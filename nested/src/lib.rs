//! The nested harness. `/dev/kvm` on this project's build machines is a software backend that
//! cannot run an unmodified Linux (docs/architecture.md), so the real VMM is exercised against a
//! real Linux guest like this:
//!
//! 1. QEMU with software emulation and an emulated AMD CPU with SVM and nested paging
//!    (`-accel tcg -cpu EPYC,+svm,+npt`) boots an L1 Linux (the `nested-host` kernel variant,
//!    KVM_AMD built in) whose initramfs holds the static truecold binaries, the guest artifacts
//!    and [`truecold-l1-init`](../truecold_l1_init/index.html).
//! 2. L1's init runs one [`Job`] — e.g. `truecold-vmm boot …` or a whole `truecold run`
//!    campaign — on L1's real KVM, which boots the tuned guest kernel (L2) to strict-ready.
//! 3. Every file the job wrote under [`OUT_DIR`] comes back over L1's second serial port
//!    ([`stream`]) and L1 reboots, which ends QEMU (`-no-reboot`).
//!
//! Time inside L1 is the harness's virtual clock (docs/virtual-clock.md): under QEMU's
//! `-icount` each emulated instruction is 1 ns, so reruns are bit-identical and host load does
//! not move it; it is a cost model of the boot's work, never wall time, and bundles made this
//! way say `nested-emulated` with clock `virtual`. Which of its verdicts hold on hardware is
//! in docs/fidelity.md. No test asserts a time.

pub mod engines;
pub mod parallel;
pub mod stream;

pub use truecold_proto::kinds::Engine;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use truecold_proto::path_io::PathIoError;

/// Where the host puts the job description inside L1's initramfs.
pub const JOB_FILE: &str = "/l1/job";
/// Where the job leaves files for the host.
pub const OUT_DIR: &str = "/out";
/// `argv[0]` of the built-in job that checks L1's `/dev/kvm` (API version, VM creation).
pub const KVM_CHECK: &str = "@kvm-check";
/// Iterations of the busy loop [`KVM_CHECK`] times on one L1 CPU and then on two at once
/// (about 4 instructions each: ~20 ms of virtual time per CPU, a fraction of a second of
/// wall time).
pub const CLOCK_CHECK_ITERS: u64 = 5_000_000;
/// The band [`KVM_CHECK`]'s two-CPU time must fall in, as a multiple of its one-CPU time,
/// for the harness's reading of its clock to hold (docs/virtual-clock.md, finding 8): about
/// 2 when L1's CPUs' instructions add on one virtual clock, about 1 if they overlapped.
pub const CLOCK_TWO_CPU_RATIO: std::ops::RangeInclusive<f64> = 1.9..=2.1;
/// The band the same two-CPU time must fall in on the parallel clock
/// ([`parallel::ParallelClock`]), as a multiple of its one-CPU time there: about 1, since
/// that clock counts the two CPUs' loops as overlapping.
pub const PARALLEL_TWO_CPU_RATIO: std::ops::RangeInclusive<f64> = 0.98..=1.02;
/// L1's second serial port: the data stream (the first is the console).
pub const STREAM_TTY: &str = "/dev/ttyS1";

/// L1's current clocksource (sysfs).
pub const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// How long L1's init waits, in L1's (virtual) time, for [`clock_settled`] before it gives up
/// on the job; the refined TSC calibration normally settles it about 1 s after boot.
pub const CLOCK_SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// Whether L1's clock is final: its clocksource ([`CLOCKSOURCE`]'s text) is the TSC after the
/// refined calibration, no longer `tsc-early`. L1's init runs the job only then: a guest
/// booted across that switch ran 7x slower in virtual time, or hung, on a 2-CPU L1
/// (docs/virtual-clock.md).
pub fn clock_settled(current_clocksource: &str) -> bool {
    current_clocksource.trim() == "tsc"
}

/// One command for L1's init to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// Program and arguments (absolute program path inside L1).
    pub argv: Vec<String>,
    /// File (under [`OUT_DIR`]) that receives the job's stdout; inherited console if `None`.
    pub stdout: Option<String>,
    /// Environment variables the job gets besides L1 init's own (name, value): the host's
    /// [`FORWARDED_ENV`] ([`forwarded_env`]).
    pub env: Vec<(String, String)>,
}

/// The host's environment variables a campaign in L1 gets too: the VMM jail's opt-out
/// (`TRUECOLD_VMM_JAIL=off`, docs/security.md), so that it means the same in L1 as on the
/// host. Nothing else of the host's environment reaches L1.
pub const FORWARDED_ENV: [&str; 1] = [truecold_engine::truecold::JAIL_ENV];

/// [`FORWARDED_ENV`]'s variables set in this process's environment (as UTF-8), in order.
pub fn forwarded_env() -> Vec<(String, String)> {
    FORWARDED_ENV
        .iter()
        .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
        .collect()
}

/// A job file that does not parse.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("job line {0}: expected `arg <value>`, `stdout <path>` or `env <name>=<value>`")]
    BadLine(usize),
    #[error("job has no program")]
    Empty,
    #[error("job argument contains a newline")]
    Newline,
    #[error("job environment variable `{0}`: a name is non-empty, without `=` or a newline")]
    EnvName(String),
}

impl Job {
    /// Text form: `stdout <path>` (optional), one `env <name>=<value>` line per variable,
    /// then one `arg <value>` line per argv element.
    pub fn encode(&self) -> Result<String, JobError> {
        let mut s = String::new();
        if let Some(p) = &self.stdout {
            s.push_str(&format!("stdout {p}\n"));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains(['=', '\n']) {
                return Err(JobError::EnvName(k.clone()));
            }
            if v.contains('\n') {
                return Err(JobError::Newline);
            }
            s.push_str(&format!("env {k}={v}\n"));
        }
        for a in &self.argv {
            if a.contains('\n') {
                return Err(JobError::Newline);
            }
            s.push_str(&format!("arg {a}\n"));
        }
        Ok(s)
    }

    /// Parses [`Job::encode`]'s form.
    pub fn decode(text: &str) -> Result<Job, JobError> {
        let mut job = Job {
            argv: Vec::new(),
            stdout: None,
            env: Vec::new(),
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(a) = line.strip_prefix("arg ") {
                job.argv.push(a.to_string());
            } else if let Some(p) = line.strip_prefix("stdout ") {
                job.stdout = Some(p.to_string());
            } else if let Some(kv) = line.strip_prefix("env ") {
                match kv.split_once('=') {
                    Some((k, v)) if !k.is_empty() => job.env.push((k.into(), v.into())),
                    _ => return Err(JobError::BadLine(i + 1)),
                }
            } else if !line.is_empty() {
                return Err(JobError::BadLine(i + 1));
            }
        }
        if job.argv.is_empty() {
            return Err(JobError::Empty);
        }
        Ok(job)
    }
}

/// The L0 QEMU's name on `PATH`: the emulator that runs L1, and with the L1 kernel the
/// definition of the virtual clock. `scripts/deps.sh` builds QEMU 10.0.2 from the source of
/// Debian's `bookworm-backports` package with one fix of truecold's to its SVM emulation (an
/// interrupt injected through EVENTINJ was delivered a second time with the guest's IF clear:
/// docs/virtual-clock.md, finding 6), installs it with that package's firmware into a prefix
/// of its own (`/opt/truecold/qemu-10.0.2-<build>`) and links it under this name, beside
/// whatever `qemu-system-x86_64` the machine has (the qemu-microvm engine's QEMU is that one,
/// never this).
pub const L0_QEMU: &str = "truecold-l0-qemu";
/// The QEMU release of the harness's L0 (scripts/deps.sh pins its Debian source package and
/// names its build in the version line, e.g. `QEMU emulator version 10.0.2 (truecold-1: …)`).
pub const L0_QEMU_RELEASE: &str = "10.0.2";
/// Names another L0 QEMU binary than [`L0_QEMU`] on `PATH` (its version line and the L1
/// kernel's digest go into every bundle, so a bundle says which clock it is on).
pub const L0_QEMU_ENV: &str = "TRUECOLD_L0_QEMU";

/// The L0 QEMU, located and resolved once per campaign ([`L0Qemu::locate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L0Qemu {
    /// The binary, links resolved.
    pub bin: PathBuf,
    /// The firmware directories of the binary's own install (`<prefix>/share/qemu`,
    /// `<prefix>/share/seabios` beside `<prefix>/bin`), given to QEMU as `-L` ahead of the ones
    /// compiled into it: Debian's QEMU looks in `/usr/share/qemu` and `/usr/share/seabios` only,
    /// so a private install would otherwise boot L1 on whichever SeaBIOS the machine has (or
    /// none), and L1's firmware is part of the clock.
    pub firmware: Vec<PathBuf>,
}

impl L0Qemu {
    /// [`L0_QEMU_ENV`] if set, else [`L0_QEMU`] on `PATH`; never another QEMU in its place.
    pub fn locate() -> Result<Self, NestedError> {
        let path = match std::env::var_os(L0_QEMU_ENV) {
            Some(p) => PathBuf::from(p),
            None => std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join(L0_QEMU))
                .find(|p| p.is_file())
                .ok_or(NestedError::NoL0Qemu)?,
        };
        Self::at(&path)
    }

    /// The QEMU at `path` and its install's firmware directories.
    pub fn at(path: &Path) -> Result<Self, NestedError> {
        let bin = fs::canonicalize(path).map_err(PathIoError::at("resolve", path))?;
        let share = bin.parent().and_then(Path::parent).map(|p| p.join("share"));
        let firmware = share
            .iter()
            .flat_map(|s| [s.join("qemu"), s.join("seabios")])
            .filter(|d| d.is_dir())
            .collect();
        Ok(L0Qemu { bin, firmware })
    }
}

/// Where L1's initramfs holds [`HarnessFacts`] (read by the bench inside L1).
pub const HARNESS_FILE: &str = "/l1/harness";

/// What a nested bundle records about the harness that made it, beyond what the bench in L1
/// can see: L1's QEMU `-seed`, the QEMU (L0) that emulates L1 and the L1 kernel's digest.
/// Written into L1's initramfs by [`write_initramfs`]; the inner bench copies it into the
/// bundle's `environment.nested`. L0, the L1 kernel and L1's CPU count (which the bench in
/// L1 counts itself) are the virtual clock's identity: bundles whose identities differ are
/// never set side by side (`truecold_proof::schema::NestedHarness::clock_differs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HarnessFacts {
    /// [`L1Run::seed`].
    pub l1_seed: u64,
    /// The first line of `qemu-system-x86_64 --version` on L0.
    pub l0_qemu: String,
    /// SHA-256 (lowercase hex) of the L1 kernel QEMU boots.
    pub l1_kernel_sha256: String,
    /// SHA-256 of L1's init and of the static bench packed into L1 ([`Self::with_binaries`]);
    /// `None` where the run packs none of its own (a harness test's job).
    pub l1_init_sha256: Option<String>,
    pub bench_sha256: Option<String>,
}

/// Why [`HarnessFacts`] could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum HarnessFactsError {
    #[error("{HARNESS_FILE}: expected `l1_seed <u64>`, `l0_qemu <text>`, `l1_kernel <sha256>`, then optionally `l1_init <sha256>` and `bench <sha256>`, got {0:?}")]
    Malformed(String),
    #[error("`{qemu} --version` gave no version line ({why}); install QEMU with scripts/deps.sh")]
    QemuVersion { qemu: String, why: String },
    #[error("reading the L1 kernel {}", path.display())]
    Kernel {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {}, packed into L1", path.display())]
    Binary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl HarnessFacts {
    /// Most bytes of the QEMU version line kept.
    pub const MAX_VERSION: usize = 200;

    /// The facts of an L1 run of `kernel` under `qemu` and `seed`: asks that QEMU its
    /// version and digests the kernel.
    pub fn probe(qemu: &L0Qemu, kernel: &Path, seed: u64) -> Result<Self, HarnessFactsError> {
        let err = |why: String| HarnessFactsError::QemuVersion {
            qemu: qemu.bin.display().to_string(),
            why,
        };
        let out = Command::new(&qemu.bin)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| err(e.to_string()))?;
        if !out.status.success() {
            return Err(err(format!("exit {}", out.status)));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().map(str::trim).unwrap_or_default();
        if line.is_empty() {
            return Err(err("empty output".into()));
        }
        let kernel_err = |source| HarnessFactsError::Kernel {
            path: kernel.to_path_buf(),
            source,
        };
        let mut h = <sha2::Sha256 as sha2::Digest>::new();
        std::io::copy(&mut fs::File::open(kernel).map_err(kernel_err)?, &mut h)
            .map_err(kernel_err)?;
        Ok(HarnessFacts {
            l1_seed: seed,
            l0_qemu: line
                .chars()
                .filter(|c| !c.is_control())
                .take(Self::MAX_VERSION)
                .collect(),
            l1_kernel_sha256: truecold_proto::hex(&sha2::Digest::finalize(h)),
            l1_init_sha256: None,
            bench_sha256: None,
        })
    }

    /// The same facts with the digests of the L1 init and the bench that are packed into L1
    /// (a campaign's, a tune phase's): inputs of the figures as much as the L1 kernel is.
    pub fn with_binaries(
        mut self,
        l1_init: &Path,
        bench: &Path,
    ) -> Result<Self, HarnessFactsError> {
        let digest = |p: &Path| -> Result<String, HarnessFactsError> {
            let err = |source| HarnessFactsError::Binary {
                path: p.to_path_buf(),
                source,
            };
            let mut h = <sha2::Sha256 as sha2::Digest>::new();
            std::io::copy(&mut fs::File::open(p).map_err(err)?, &mut h).map_err(err)?;
            Ok(truecold_proto::hex(&sha2::Digest::finalize(h)))
        };
        self.l1_init_sha256 = Some(digest(l1_init)?);
        self.bench_sha256 = Some(digest(bench)?);
        Ok(self)
    }

    /// The file's text: three lines, then the binaries' two when recorded.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "l1_seed {}\nl0_qemu {}\nl1_kernel {}\n",
            self.l1_seed, self.l0_qemu, self.l1_kernel_sha256
        );
        if let (Some(i), Some(b)) = (&self.l1_init_sha256, &self.bench_sha256) {
            s.push_str(&format!("l1_init {i}\nbench {b}\n"));
        }
        s
    }

    /// Parses [`HarnessFacts::encode`].
    pub fn decode(text: &str) -> Result<Self, HarnessFactsError> {
        let bad = || HarnessFactsError::Malformed(text.chars().take(300).collect());
        let mut lines = text.lines();
        let seed = lines
            .next()
            .and_then(|l| l.strip_prefix("l1_seed "))
            .and_then(|v| v.parse().ok())
            .ok_or_else(bad)?;
        let qemu = lines
            .next()
            .and_then(|l| l.strip_prefix("l0_qemu "))
            .filter(|v| !v.is_empty() && v.len() <= Self::MAX_VERSION * 4)
            .ok_or_else(bad)?;
        let hex64 =
            |v: &&str| v.len() == 64 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let kernel = lines
            .next()
            .and_then(|l| l.strip_prefix("l1_kernel "))
            .filter(hex64)
            .ok_or_else(bad)?;
        let (l1_init, bench) = match lines.next() {
            None => (None, None),
            Some(l) => {
                let i = l.strip_prefix("l1_init ").filter(hex64).ok_or_else(bad)?;
                let b = lines
                    .next()
                    .and_then(|l| l.strip_prefix("bench "))
                    .filter(hex64)
                    .ok_or_else(bad)?;
                (Some(i.to_string()), Some(b.to_string()))
            }
        };
        if lines.next().is_some() {
            return Err(bad());
        }
        Ok(HarnessFacts {
            l1_seed: seed,
            l0_qemu: qemu.to_string(),
            l1_kernel_sha256: kernel.to_string(),
            l1_init_sha256: l1_init,
            bench_sha256: bench,
        })
    }
}

/// The ids of the VMM's jail user ([`truecold_proto::report::JAIL_USER`]) inside L1: the
/// user truecold-vmm drops to in its jail there (docs/security.md). L1 has no user database
/// of its own; [`write_initramfs`] writes [`l1_passwd`] as its /etc/passwd. The user owns no
/// file in L1 and needs no access to `/dev/kvm` (the VMM opens every descriptor before the
/// drop).
pub const L1_JAIL_UID: u32 = 999;
/// See [`L1_JAIL_UID`].
pub const L1_JAIL_GID: u32 = 999;
// Root is no drop (the VMM refuses a jail user of id 0).
const _: () = assert!(L1_JAIL_UID != 0 && L1_JAIL_GID != 0);

/// L1's /etc/passwd: root and the jail user (no home, no shell).
pub fn l1_passwd() -> String {
    format!(
        "root:x:0:0:root:/:/bin/false\n{}:x:{L1_JAIL_UID}:{L1_JAIL_GID}::/nonexistent:/usr/sbin/nologin\n",
        truecold_proto::report::JAIL_USER
    )
}

/// A file to put into L1's initramfs.
#[derive(Clone, Debug)]
pub struct L1File {
    /// Path inside L1, relative (`bin/truecold-vmm`).
    pub dest: String,
    pub src: PathBuf,
    pub executable: bool,
}

/// Writes L1's initramfs: `init` (the static `truecold-l1-init`), the job file, the
/// harness facts ([`HARNESS_FILE`]), /etc/passwd ([`l1_passwd`]) and `files` (with their
/// parent directories).
/// Deterministic, like the guest's.
pub fn write_initramfs(
    out: &Path,
    l1_init: &Path,
    job: &Job,
    facts: &HarnessFacts,
    files: &[L1File],
) -> Result<(), NestedError> {
    use truecold_proto::cpio::{self, Entry, Kind};
    let read = |p: &Path| fs::read(p).map_err(|e| NestedError::Io(PathIoError::at("read", p)(e)));
    let mut entries = cpio::initramfs_entries(read(l1_init)?);
    let mut dirs: Vec<String> = vec!["out".into(), "l1".into(), "etc".into()];
    for f in files {
        let mut parent = Path::new(&f.dest).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.push(p.to_string_lossy().into_owned());
            parent = p.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        if !entries.iter().any(|e| e.name == d) {
            entries.push(Entry {
                name: d,
                perm: 0o755,
                kind: Kind::Dir,
            });
        }
    }
    entries.push(Entry {
        name: JOB_FILE.trim_start_matches('/').into(),
        perm: 0o644,
        kind: Kind::File(job.encode()?.into_bytes()),
    });
    entries.push(Entry {
        name: HARNESS_FILE.trim_start_matches('/').into(),
        perm: 0o644,
        kind: Kind::File(facts.encode().into_bytes()),
    });
    entries.push(Entry {
        name: truecold_proto::report::JAIL_PASSWD
            .trim_start_matches('/')
            .into(),
        perm: 0o644,
        kind: Kind::File(l1_passwd().into_bytes()),
    });
    for f in files {
        entries.push(Entry {
            name: f.dest.clone(),
            perm: if f.executable { 0o755 } else { 0o644 },
            kind: Kind::File(read(&f.src)?),
        });
    }
    let mut buf = Vec::new();
    cpio::write_newc(&entries, &mut buf).map_err(|e| NestedError::Initramfs(e.to_string()))?;
    fs::write(out, buf).map_err(|e| NestedError::Io(PathIoError::at("write", out)(e)))
}

/// Where the harness finds what it packs into L1: the static binaries, the guest artifacts and
/// the L1 kernel. [`Layout::discover`] reads `TRUECOLD_STATIC_DIR`, `TRUECOLD_GUEST_DIR` and
/// `TRUECOLD_L1_DIR`, defaulting to what `scripts/build-artifacts.sh` builds in the workspace.
#[derive(Clone, Debug)]
pub struct Layout {
    pub l1_kernel: PathBuf,
    pub l1_init: PathBuf,
    pub vmm: PathBuf,
    pub bench: PathBuf,
    /// The static `truecold-engines` (engines side by side inside L1).
    pub engines: PathBuf,
    pub guest_dir: PathBuf,
}

/// Where an engine's binary is inside L1 (QEMU keeps its install layout: it finds its
/// firmware relative to its binary, `../share/qemu`).
pub fn engine_l1_path(engine: Engine) -> &'static str {
    match engine {
        Engine::Truecold => "/bin/truecold-vmm",
        Engine::Firecracker => "/bin/firecracker",
        Engine::CloudHypervisor => "/bin/cloud-hypervisor",
        Engine::QemuMicrovm => "/usr/bin/qemu-system-x86_64",
    }
}

/// The peer engines' binaries, located (truecold-vmm comes from [`Layout`] or `--vmm`).
#[derive(Clone, Debug, Default)]
pub struct EngineBinaries {
    pub firecracker: Option<PathBuf>,
    pub cloud_hypervisor: Option<PathBuf>,
    pub qemu: Option<PathBuf>,
}

impl EngineBinaries {
    /// Each of `engines`' binaries from its flag, its variable or its default
    /// ([`truecold_engine::locate::peer_binary`]); truecold-vmm comes from [`Layout`].
    pub fn locate(
        engines: &[Engine],
        firecracker: Option<&Path>,
        cloud_hypervisor: Option<&Path>,
        qemu: Option<&Path>,
    ) -> Result<EngineBinaries, truecold_engine::locate::Missing> {
        use truecold_engine::locate::peer_binary;
        let mut b = EngineBinaries::default();
        for &e in engines {
            match e {
                Engine::Truecold => {}
                Engine::Firecracker => b.firecracker = Some(peer_binary(e, firecracker)?),
                Engine::CloudHypervisor => {
                    b.cloud_hypervisor = Some(peer_binary(e, cloud_hypervisor)?)
                }
                Engine::QemuMicrovm => b.qemu = Some(peer_binary(e, qemu)?),
            }
        }
        Ok(b)
    }
}

/// QEMU's firmware for `-M microvm` with a PVH `-kernel`: qboot and the PVH option ROM
/// (what QEMU 7.2 opens, seen with strace), under `<prefix>/share/qemu`.
pub const QEMU_FIRMWARE: [&str; 2] = ["bios-microvm.bin", "pvh.bin"];

/// The files L1 needs to run `engines` besides truecold-vmm: Firecracker and Cloud
/// Hypervisor are static binaries; QEMU is Debian's dynamic build, so it comes with every
/// library `ldd` names (at the same paths, the dynamic loader included) and its firmware.
/// A missing binary is an error naming how to get it.
pub fn engine_files(engines: &[Engine], bins: &EngineBinaries) -> Result<Vec<L1File>, NestedError> {
    let need = |p: &Option<PathBuf>, what: &'static str, e: Engine| match p {
        Some(p) if p.is_file() => Ok(p.clone()),
        other => Err(NestedError::Missing {
            what,
            path: other.clone().unwrap_or_default(),
            hint: truecold_engine::locate::how_to_get(e),
        }),
    };
    let file = |dest: &str, src: PathBuf, executable: bool| L1File {
        dest: dest.trim_start_matches('/').to_string(),
        src,
        executable,
    };
    let mut out = Vec::new();
    for &e in engines {
        match e {
            Engine::Truecold => {}
            Engine::Firecracker => out.push(file(
                engine_l1_path(e),
                need(&bins.firecracker, "the Firecracker binary", e)?,
                true,
            )),
            Engine::CloudHypervisor => out.push(file(
                engine_l1_path(e),
                need(&bins.cloud_hypervisor, "the Cloud Hypervisor binary", e)?,
                true,
            )),
            Engine::QemuMicrovm => {
                let qemu = need(&bins.qemu, "qemu-system-x86_64", e)?;
                out.extend(qemu_files(&qemu)?);
            }
        }
    }
    Ok(out)
}

/// QEMU, its libraries and firmware as L1 files.
fn qemu_files(qemu: &Path) -> Result<Vec<L1File>, NestedError> {
    let ldd = Command::new("ldd")
        .arg(qemu)
        .output()
        .map_err(|source| NestedError::Spawn {
            qemu: PathBuf::from("ldd"),
            source,
        })?;
    if !ldd.status.success() {
        return Err(NestedError::Initramfs(format!(
            "`ldd {}` failed: {}",
            qemu.display(),
            String::from_utf8_lossy(&ldd.stderr).trim()
        )));
    }
    let mut out = vec![L1File {
        dest: engine_l1_path(Engine::QemuMicrovm)
            .trim_start_matches('/')
            .to_string(),
        src: qemu.to_path_buf(),
        executable: true,
    }];
    for lib in parse_ldd(&String::from_utf8_lossy(&ldd.stdout)).map_err(NestedError::Initramfs)? {
        out.push(L1File {
            dest: lib.trim_start_matches('/').to_string(),
            src: PathBuf::from(&lib),
            executable: true,
        });
    }
    // The firmware is found from the binary's real place (QEMU resolves its own path): a
    // QEMU linked into PATH (scripts/deps.sh's private install) keeps it beside the target.
    let real = fs::canonicalize(qemu).unwrap_or_else(|_| qemu.to_path_buf());
    let share = real
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("share/qemu"))
        .unwrap_or_default();
    for fw in QEMU_FIRMWARE {
        out.push(L1File {
            dest: format!("usr/share/qemu/{fw}"),
            src: share.join(fw),
            executable: false,
        });
        // Debian links bios-microvm.bin to qboot.rom, and QEMU asks for either name
        // depending on the machine options: both names get the file.
        if let Ok(target) = fs::read_link(share.join(fw)) {
            if let Some(name) = target.file_name().and_then(|n| n.to_str()) {
                out.push(L1File {
                    dest: format!("usr/share/qemu/{name}"),
                    src: share.join(fw),
                    executable: false,
                });
            }
        }
    }
    Ok(out)
}

/// The absolute library paths in `ldd` output (`name => /path (addr)` and the loader's
/// `/path (addr)` line); the vDSO has no file. Anything `ldd` could not resolve is an error.
pub fn parse_ldd(text: &str) -> Result<Vec<String>, String> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let path = match line.split_once(" => ") {
            Some((name, rest)) => {
                let p = rest.split_whitespace().next().unwrap_or("");
                if p == "not" || !p.starts_with('/') {
                    return Err(format!("ldd cannot resolve {name}: `{line}`"));
                }
                p
            }
            None if line.starts_with('/') => line.split_whitespace().next().unwrap_or(""),
            None if line.starts_with("linux-vdso") || line.starts_with("linux-gate") => continue,
            None => return Err(format!("unexpected ldd line `{line}`")),
        };
        libs.push(path.to_string());
    }
    libs.sort();
    libs.dedup();
    Ok(libs)
}

/// The guest artifacts L1 gets, under `/guest/`.
pub const GUEST_FILES: [&str; 6] = [
    "vmlinux",
    "initramfs.cpio",
    "config",
    "manifest.json",
    "init",
    "platform-initramfs.cpio",
];

/// The checkout whose `out/` and `target/` the harness uses by default: the workspace above
/// `CARGO_MANIFEST_DIR` while cargo runs this process (a test, `cargo run`), else the nearest
/// directory above this executable that holds the workspace (a `Cargo.toml` beside
/// `nested/`: a binary under `target/`), else the current directory. No path is compiled in,
/// so one commit builds the same binaries in any checkout (docs/fleet.md, "Reproducible
/// binaries").
pub fn workspace_root() -> PathBuf {
    let is_root = |d: &Path| d.join("Cargo.toml").is_file() && d.join("nested").is_dir();
    let from_cargo = std::env::var_os("CARGO_MANIFEST_DIR")
        .and_then(|m| Path::new(&m).parent().map(Path::to_path_buf))
        .filter(|d| is_root(d));
    let from_exe = || {
        std::env::current_exe().ok().and_then(|e| {
            e.ancestors()
                .skip(1)
                .find(|d| is_root(d))
                .map(Path::to_path_buf)
        })
    };
    from_cargo
        .or_else(from_exe)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default()
}

impl Layout {
    /// The default layout ([`workspace_root`]'s), with environment overrides.
    pub fn discover() -> Layout {
        let root = workspace_root();
        let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
        let target = var("CARGO_TARGET_DIR").unwrap_or_else(|| root.join("target"));
        let stat = var("TRUECOLD_STATIC_DIR")
            .unwrap_or_else(|| target.join("x86_64-unknown-linux-gnu/release"));
        let l1 = var("TRUECOLD_L1_DIR").unwrap_or_else(|| root.join("out/l1"));
        Layout {
            l1_kernel: l1.join("bzImage"),
            l1_init: stat.join("truecold-l1-init"),
            vmm: stat.join("truecold-vmm"),
            bench: stat.join("truecold"),
            engines: stat.join("truecold-engines"),
            guest_dir: var("TRUECOLD_GUEST_DIR").unwrap_or_else(|| root.join("out/guest")),
        }
    }

    /// Every input present, or the first missing one with the command that builds it.
    pub fn check(&self) -> Result<(), NestedError> {
        const HINT: &str = "build it with scripts/build-artifacts.sh";
        let mut need = vec![
            ("the nested-host (L1) kernel", self.l1_kernel.clone()),
            ("the static truecold-l1-init", self.l1_init.clone()),
            ("the static truecold-vmm", self.vmm.clone()),
            ("the static truecold bench", self.bench.clone()),
            ("the static truecold-engines", self.engines.clone()),
        ];
        need.extend(
            GUEST_FILES
                .iter()
                .map(|f| ("a guest artifact", self.guest_dir.join(f))),
        );
        for (what, path) in need {
            if !path.is_file() {
                return Err(NestedError::Missing {
                    what,
                    path,
                    hint: HINT,
                });
            }
        }
        Ok(())
    }

    /// The files L1 gets: `/bin/truecold-vmm`, `/bin/truecold`, `/guest/*`.
    pub fn l1_files(&self) -> Vec<L1File> {
        let mut v = vec![
            L1File {
                dest: "bin/truecold-vmm".into(),
                src: self.vmm.clone(),
                executable: true,
            },
            L1File {
                dest: "bin/truecold".into(),
                src: self.bench.clone(),
                executable: true,
            },
            L1File {
                dest: "bin/truecold-engines".into(),
                src: self.engines.clone(),
                executable: true,
            },
        ];
        v.extend(GUEST_FILES.iter().map(|f| L1File {
            dest: format!("guest/{f}"),
            src: self.guest_dir.join(f),
            executable: false,
        }));
        v
    }
}

/// Errors of the harness (host side).
#[derive(Debug, thiserror::Error)]
pub enum NestedError {
    #[error("{what}: {} is missing ({hint})", path.display())]
    Missing {
        what: &'static str,
        path: PathBuf,
        hint: &'static str,
    },
    #[error(
        "no L0 QEMU: `{L0_QEMU}` is not on PATH and {L0_QEMU_ENV} is not set (scripts/deps.sh \
         installs QEMU 10.0.2 from Debian's bookworm-backports as {L0_QEMU})"
    )]
    NoL0Qemu,
    #[error("could not start {qemu}")]
    Spawn {
        qemu: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("the harness facts")]
    Facts(#[source] HarnessFactsError),
    #[error("writing L1's initramfs: {0}")]
    Initramfs(String),
    #[error("bad job")]
    Job(#[from] JobError),
    #[error("L1 did not finish within {0:?} (QEMU killed); console tail:\n{1}")]
    Timeout(Duration, String),
    #[error("L1's data stream is malformed; console tail:\n{console}")]
    Stream {
        console: String,
        #[source]
        source: stream::StreamError,
    },
    #[error("L1 ended without reporting the job's exit (QEMU {status}); console tail:\n{console}")]
    NoExit { status: ExitStatus, console: String },
}

/// One L1 run under QEMU TCG.
#[derive(Clone, Debug)]
pub struct L1Run {
    /// The QEMU that emulates L1 ([`L0Qemu::locate`]).
    pub l0: L0Qemu,
    /// The `nested-host` bzImage.
    pub kernel: PathBuf,
    /// From [`write_initramfs`].
    pub initramfs: PathBuf,
    pub mem_mib: u32,
    /// 2 MiB hugetlb pages L1's kernel reserves at boot (`hugepages=N` on its command line,
    /// out of `mem_mib`); 0: none. A hugetlb-backed guest needs a pool that holds all of its
    /// mapping: the VMMs map hugetlb memory reserved at mmap time (no `MAP_NORESERVE`).
    pub hugepages_2m: u64,
    pub cpus: u32,
    pub timeout: Duration,
    /// Receives `console.log` and `stream.log`.
    pub workdir: PathBuf,
    /// QEMU's `-seed`: every guest-visible random number of the run (RDRAND/RDSEED in L1 and
    /// in the guest, so the nonces and boot ids) is a sequence drawn from it. Two runs with
    /// one seed repeat them; a caller gives each run of one campaign or tune its own.
    pub seed: u64,
    /// L1's transparent-huge-page mode (`transparent_hugepage=` on its command line); `None`:
    /// the harness's, `madvise` (set by L1's init). It is the "host THP mode" of everything
    /// in L1: a peer engine's anonymous guest memory gets huge pages under `always` without
    /// asking for them. Every bundle made in L1 records the mode it ran under
    /// (`environment.thp_enabled`).
    pub thp: Option<L1Thp>,
}

/// L1's transparent-huge-page mode (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L1Thp {
    Always,
    Madvise,
    Never,
}

impl L1Thp {
    pub const ALL: [L1Thp; 3] = [L1Thp::Always, L1Thp::Madvise, L1Thp::Never];

    pub fn as_str(self) -> &'static str {
        match self {
            L1Thp::Always => "always",
            L1Thp::Madvise => "madvise",
            L1Thp::Never => "never",
        }
    }

    /// Parses [`L1Thp::as_str`].
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not a THP mode (want always, madvise or never)"))
    }
}

/// The L1 kernel command-line key of its THP mode.
pub const L1_THP_KEY: &str = "transparent_hugepage";

/// L1's `-seed` when the caller has no seed of its own (the harness's tests, the engines
/// tool).
pub const DEFAULT_L1_SEED: u64 = 1;

/// What came back from L1.
#[derive(Debug)]
pub struct L1Outcome {
    pub job_exit: i32,
    pub files: std::collections::BTreeMap<String, Vec<u8>>,
    pub console_log: PathBuf,
    /// Wall time of the whole QEMU run (emulated: informational only).
    pub wall: Duration,
}

/// L1's kernel command line (before [`l1_cmdline`]'s hugetlb pool).
pub const L1_CMDLINE: &str = "console=ttyS0 reboot=k panic=-1 rdinit=/init";

/// L1's kernel command line for `r`: [`L1_CMDLINE`], `hugepages=N` when the run reserves a
/// pool ([`L1Run::hugepages_2m`]; 2 MiB is the x86 default huge page size), and its THP mode
/// when the run sets one ([`L1Run::thp`]: L1's init then leaves the kernel's mode alone).
pub fn l1_cmdline(r: &L1Run) -> String {
    let mut s = L1_CMDLINE.to_string();
    if r.hugepages_2m > 0 {
        s.push_str(&format!(" hugepages={}", r.hugepages_2m));
    }
    if let Some(t) = r.thp {
        s.push_str(&format!(" {L1_THP_KEY}={}", t.as_str()));
    }
    s
}

/// How QEMU emulates L1: TCG with an instruction-counting virtual clock (`-icount`, each
/// instruction 2^0 ns, idle time skipped). Without it, L1's clock follows the host's wall
/// clock: on a loaded host emulation falls behind, L1's timer interrupt is pending at every
/// VMRUN, and the L2 vCPU never retires an instruction (seen: RIP at the PVH entry for 240 s,
/// zero exits, whenever the 2 host cores were busy). With `-icount` L1 gets the same work
/// done between two ticks however busy the host is, so the harness is load-independent.
/// `-icount` runs all of L1's vCPUs on one host thread.
///
/// The remaining inputs that came from the host are pinned, so one L1 run is a function of
/// its command line, initramfs and [`L1Run::seed`] alone (docs/virtual-clock.md): `-seed`
/// (added by [`qemu_command`]) makes the emulated CPU's RDRAND/RDSEED (and every other
/// guest-visible random number QEMU makes) a seeded sequence; `-rtc base=…,clock=vm` starts
/// L1's CMOS clock at a fixed date and runs it on the virtual clock, not on the host's time
/// of day.
pub const QEMU_ACCEL: [&str; 6] = [
    "-accel",
    "tcg",
    "-icount",
    "shift=0,sleep=off",
    "-rtc",
    "base=2026-01-01T00:00:00,clock=vm",
];

/// The QEMU command line for an L1 run.
pub fn qemu_command(r: &L1Run) -> Command {
    let mut c = Command::new(&r.l0.bin);
    let log = |name: &str| format!("file:{}", r.workdir.join(name).display());
    for dir in &r.l0.firmware {
        c.arg("-L").arg(dir);
    }
    c.args(["-M", "q35", "-cpu", "EPYC,+svm,+npt"])
        .args(["-smp", &r.cpus.to_string(), "-m", &r.mem_mib.to_string()])
        .args(QEMU_ACCEL)
        .args(["-seed", &r.seed.to_string()])
        .args([
            "-nodefaults",
            "-display",
            "none",
            "-no-reboot",
            "-no-user-config",
        ])
        .args([
            "-serial",
            &log("console.log"),
            "-serial",
            &log("stream.log"),
        ])
        .arg("-kernel")
        .arg(&r.kernel)
        .arg("-initrd")
        .arg(&r.initramfs)
        .arg("-append")
        .arg(l1_cmdline(r))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// Boots L1, waits (bounded) for it to end, and decodes what it sent back.
pub fn run_l1(r: &L1Run) -> Result<L1Outcome, NestedError> {
    for (what, path, hint) in [
        (
            "L1 kernel",
            &r.kernel,
            "build it: cargo run -p xtask -- l1 --out out/l1",
        ),
        (
            "L1 initramfs",
            &r.initramfs,
            "see truecold_nested::write_initramfs",
        ),
    ] {
        if !path.is_file() {
            return Err(NestedError::Missing {
                what,
                path: path.clone(),
                hint,
            });
        }
    }
    fs::create_dir_all(&r.workdir).map_err(PathIoError::at("create", &r.workdir))?;
    let start = Instant::now();
    let mut cmd = qemu_command(r);
    // L1 dies with this process: a campaign, tune or bisect that is killed (SIGTERM, SIGKILL,
    // a CI timeout) leaves no emulator running on the host. The waiting below happens on this
    // thread, so the thread the signal is tied to outlives the child.
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec and only calls prctl(2) and
        // getppid(2), both async-signal-safe, with constant arguments. A parent that died
        // before the prctl took effect is caught by the getppid check (the spawn then fails).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::other("the spawning process is gone"));
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|source| NestedError::Spawn {
        qemu: r.l0.bin.clone(),
        source,
    })?;
    let status = wait_bounded(&mut child, r.timeout);
    let console_log = r.workdir.join("console.log");
    let console = tail(&console_log);
    let Some(status) = status else {
        return Err(NestedError::Timeout(r.timeout, console));
    };
    let stream_log = r.workdir.join("stream.log");
    let text = fs::read(&stream_log).map_err(PathIoError::at("read", &stream_log))?;
    let received =
        stream::decode(&String::from_utf8_lossy(&text)).map_err(|source| NestedError::Stream {
            console: console.clone(),
            source,
        })?;
    let Some(job_exit) = received.exit else {
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        return Err(NestedError::NoExit {
            status,
            console: format!("{console}\n[qemu stderr]\n{stderr}"),
        });
    };
    Ok(L1Outcome {
        job_exit,
        files: received.files,
        console_log,
        wall: start.elapsed(),
    })
}

/// Waits for `child` up to `timeout`; kills it and returns `None` past that.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The last 40 lines of a log, for error messages.
fn tail(path: &Path) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_facts_read_back_and_bad_files_are_refused() {
        let f = HarnessFacts {
            l1_seed: 8390898134065048676,
            l0_qemu: "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)".into(),
            l1_kernel_sha256: "ab".repeat(32),
            l1_init_sha256: None,
            bench_sha256: None,
        };
        assert_eq!(HarnessFacts::decode(&f.encode()).unwrap(), f);
        let g = HarnessFacts {
            l1_init_sha256: Some("cd".repeat(32)),
            bench_sha256: Some("ef".repeat(32)),
            ..f.clone()
        };
        assert_eq!(HarnessFacts::decode(&g.encode()).unwrap(), g);
        let k = "ab".repeat(32);
        for bad in [
            String::new(),
            format!("l1_seed x\nl0_qemu q\nl1_kernel {k}\n"),
            "l1_seed 1\n".into(),
            "l1_seed 1\nl0_qemu q\n".into(),
            format!("l1_seed 1\nl0_qemu \nl1_kernel {k}\n"),
            format!("l0_qemu q\nl1_seed 1\nl1_kernel {k}\n"),
            "l1_seed 1\nl0_qemu q\nl1_kernel AB\n".into(),
            format!("l1_seed 1\nl0_qemu q\nl1_kernel {}\n", "AB".repeat(32)),
            format!("l1_seed 1\nl0_qemu q\nl1_kernel {k}\nmore\n"),
            format!("l1_seed 1\nl0_qemu q\nl1_kernel {k}\nl1_init {k}\n"),
            format!("l1_seed 1\nl0_qemu q\nl1_kernel {k}\nl1_init AB\nbench {k}\n"),
        ] {
            assert!(HarnessFacts::decode(&bad).is_err(), "{bad:?}");
        }
        let nowhere = L0Qemu {
            bin: "/nonexistent/qemu".into(),
            firmware: vec![],
        };
        let e = HarnessFacts::probe(&nowhere, Path::new("/nonexistent/k"), 1).unwrap_err();
        assert!(e.to_string().contains("scripts/deps.sh"), "{e}");
    }

    #[test]
    fn l1_initramfs_holds_the_jail_user_with_ids_not_root() {
        let t = tempfile::tempdir().unwrap();
        let init = t.path().join("init");
        fs::write(&init, b"init").unwrap();
        let facts = HarnessFacts {
            l1_seed: 1,
            l0_qemu: "QEMU emulator version 10.0.2 (test)".into(),
            l1_kernel_sha256: "ab".repeat(32),
            l1_init_sha256: None,
            bench_sha256: None,
        };
        let job = Job {
            argv: vec!["/bin/truecold".into()],
            stdout: None,
            env: Vec::new(),
        };
        let out = t.path().join("l1.cpio");
        write_initramfs(&out, &init, &job, &facts, &[]).unwrap();
        let bytes = fs::read(&out).unwrap();
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"etc/passwd\0"));
        let passwd = l1_passwd();
        assert!(has(passwd.as_bytes()), "{passwd}");
        // The VMM's lookup (vmm/src/jail.rs find_user): name, password, uid, gid.
        let user = truecold_proto::report::JAIL_USER;
        let fields: Vec<&str> = passwd
            .lines()
            .find(|l| l.split(':').next() == Some(user))
            .unwrap_or_else(|| panic!("no {user} in {passwd}"))
            .split(':')
            .collect();
        let ids = (fields[2].parse::<u32>(), fields[3].parse::<u32>());
        assert_eq!(ids, (Ok(L1_JAIL_UID), Ok(L1_JAIL_GID)), "{passwd}");
    }

    #[test]
    fn deps_pins_the_l0_qemu_release_the_harness_names() {
        let deps = include_str!("../../scripts/deps.sh");
        let pin = deps
            .lines()
            .find_map(|l| l.strip_prefix("L0_QEMU_VERSION="))
            .expect("scripts/deps.sh pins L0_QEMU_VERSION");
        assert!(
            pin.starts_with(&format!("1:{L0_QEMU_RELEASE}+")),
            "deps pins {pin}, the harness names {L0_QEMU_RELEASE}"
        );
        assert!(deps.contains("L0_SUITE=bookworm-backports"));
        assert!(deps.contains(&format!("/usr/local/bin/{L0_QEMU}")));
    }

    #[test]
    fn the_l0_qemu_is_found_by_its_own_name_and_its_firmware_beside_it() {
        let t = tempfile::tempdir().unwrap();
        let prefix = t.path().join("qemu-10/usr");
        for d in ["bin", "share/qemu", "share/seabios"] {
            fs::create_dir_all(prefix.join(d)).unwrap();
        }
        let bin = prefix.join("bin/qemu-system-x86_64");
        fs::write(
            &bin,
            "#!/bin/sh\necho 'QEMU emulator version 10.0.2 (test)'\n",
        )
        .unwrap();
        fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let link = t.path().join(L0_QEMU);
        std::os::unix::fs::symlink(&bin, &link).unwrap();
        let l0 = L0Qemu::at(&link).unwrap();
        let real = fs::canonicalize(&prefix).unwrap();
        assert_eq!(l0.bin, real.join("bin/qemu-system-x86_64"));
        assert_eq!(
            l0.firmware,
            [real.join("share/qemu"), real.join("share/seabios")]
        );
        // The firmware goes to QEMU as -L, ahead of its compiled-in directories.
        let r = L1Run { l0, ..sample_run() };
        let args: Vec<String> = qemu_command(&r)
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let l = format!(
            "-L {} -L {}",
            real.join("share/qemu").display(),
            real.join("share/seabios").display()
        );
        assert!(args.join(" ").starts_with(&l), "{args:?}");
        // The facts: its version line and the L1 kernel's digest, of the kernel's bytes.
        let kernel = t.path().join("bzImage");
        fs::write(&kernel, b"abc").unwrap();
        let f = HarnessFacts::probe(&r.l0, &kernel, 3).unwrap();
        assert_eq!(f.l0_qemu, "QEMU emulator version 10.0.2 (test)");
        assert_eq!(
            f.l1_kernel_sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let e = HarnessFacts::probe(&r.l0, &t.path().join("none"), 3).unwrap_err();
        assert!(matches!(e, HarnessFactsError::Kernel { .. }), "{e:?}");
        // No L0 QEMU is no fallback to another QEMU: it is an error naming deps.
        let e = NestedError::NoL0Qemu.to_string();
        assert!(e.contains("scripts/deps.sh") && e.contains(L0_QEMU), "{e}");
    }

    #[test]
    fn ldd_output_gives_every_library_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f01)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f02)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f03)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            vec![
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib/x86_64-linux-gnu/libz.so.1",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert!(parse_ldd("\tlibfoo.so.1 => not found\n").is_err());
        assert!(parse_ldd("garbage\n").is_err());
    }

    #[test]
    fn a_missing_engine_binary_names_how_to_get_it() {
        let bins = EngineBinaries {
            firecracker: Some(PathBuf::from("/nonexistent/firecracker")),
            ..EngineBinaries::default()
        };
        let e = engine_files(&[Engine::Truecold, Engine::Firecracker], &bins).unwrap_err();
        assert!(e.to_string().contains("--firecracker PATH"), "{e}");
        let e = engine_files(&[Engine::QemuMicrovm], &bins).unwrap_err();
        assert!(
            e.to_string().contains("apt-get install qemu-system-x86"),
            "{e}"
        );
        assert!(engine_files(&[Engine::Truecold], &bins).unwrap().is_empty());
    }

    #[test]
    fn only_the_refined_tsc_is_a_settled_clock() {
        assert!(clock_settled("tsc\n"));
        assert!(clock_settled("tsc"));
        assert!(!clock_settled("tsc-early\n"));
        assert!(!clock_settled("hpet\n"));
        assert!(!clock_settled("acpi_pm\n"));
        assert!(!clock_settled(""));
    }

    #[test]
    fn job_round_trip_and_errors() {
        let j = Job {
            argv: vec![
                "/bin/truecold-vmm".into(),
                "boot".into(),
                "--cmdline-extra".into(),
                "a b".into(),
            ],
            stdout: Some("/out/report.json".into()),
            env: vec![
                ("TRUECOLD_VMM_JAIL".into(), "off".into()),
                ("E".into(), "a=b".into()),
            ],
        };
        assert_eq!(Job::decode(&j.encode().unwrap()), Ok(j));
        assert_eq!(Job::decode("stdout /x\n"), Err(JobError::Empty));
        assert_eq!(Job::decode("arg a\nrun b\n"), Err(JobError::BadLine(2)));
        assert_eq!(Job::decode("env =x\narg a\n"), Err(JobError::BadLine(1)));
        assert_eq!(Job::decode("env x\narg a\n"), Err(JobError::BadLine(1)));
        let bad = Job {
            argv: vec!["a\nb".into()],
            stdout: None,
            env: Vec::new(),
        };
        assert_eq!(bad.encode(), Err(JobError::Newline));
        for (k, v) in [("", "x"), ("A=B", "x"), ("A\nB", "x")] {
            let bad = Job {
                argv: vec!["a".into()],
                stdout: None,
                env: vec![(k.into(), v.into())],
            };
            assert_eq!(bad.encode(), Err(JobError::EnvName(k.into())), "{k:?}");
        }
        let bad = Job {
            argv: vec!["a".into()],
            stdout: None,
            env: vec![("A".into(), "x\ny".into())],
        };
        assert_eq!(bad.encode(), Err(JobError::Newline));
    }

    fn sample_run() -> L1Run {
        L1Run {
            l0: L0Qemu {
                bin: "qemu-system-x86_64".into(),
                firmware: vec![],
            },
            kernel: "k".into(),
            initramfs: "i".into(),
            mem_mib: 2048,
            hugepages_2m: 0,
            thp: None,
            cpus: 2,
            timeout: Duration::from_secs(1),
            workdir: "/w".into(),
            seed: 7,
        }
    }

    #[test]
    fn qemu_command_has_the_nested_cpu_and_two_serial_ports() {
        let r = sample_run();
        let args: Vec<String> = qemu_command(&r)
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        assert!(joined.contains("-cpu EPYC,+svm,+npt"), "{joined}");
        assert!(joined.contains("-accel tcg -icount shift=0"), "{joined}");
        // The host's randomness and time of day do not reach L1 (docs/virtual-clock.md).
        assert!(joined.contains("-seed 7"), "{joined}");
        assert!(joined.contains("clock=vm"), "{joined}");
        assert!(joined.contains("-no-reboot"), "{joined}");
        assert_eq!(args.iter().filter(|a| *a == "-serial").count(), 2);
        assert!(joined.contains("file:/w/stream.log"), "{joined}");
    }

    #[test]
    fn a_hugetlb_pool_is_reserved_on_l1s_command_line_only_when_asked() {
        let mut r = sample_run();
        assert_eq!(l1_cmdline(&r), L1_CMDLINE);
        r.hugepages_2m = 8194;
        let args: Vec<String> = qemu_command(&r)
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = args.iter().position(|a| a == "-append").expect("-append");
        assert_eq!(args[at + 1], format!("{L1_CMDLINE} hugepages=8194"));
    }

    #[test]
    fn l1s_thp_mode_goes_on_its_command_line_only_when_set() {
        let mut r = sample_run();
        assert!(!l1_cmdline(&r).contains(L1_THP_KEY));
        r.thp = Some(L1Thp::Always);
        r.hugepages_2m = 4;
        assert_eq!(
            l1_cmdline(&r),
            format!("{L1_CMDLINE} hugepages=4 transparent_hugepage=always")
        );
        assert_eq!(L1Thp::parse("never"), Ok(L1Thp::Never));
        assert!(L1Thp::parse("sometimes").is_err());
    }

    #[test]
    fn missing_kernel_is_a_clear_error() {
        let r = L1Run {
            kernel: "/nonexistent/bzImage".into(),
            initramfs: "/nonexistent/i".into(),
            workdir: std::env::temp_dir(),
            ..sample_run()
        };
        let e = run_l1(&r).unwrap_err().to_string();
        assert!(e.contains("L1 kernel") && e.contains("xtask -- l1"), "{e}");
    }
}
