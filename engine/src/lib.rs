//! The engines of a side-by-side campaign (`truecold run --engine …`): truecold-vmm,
//! Firecracker, Cloud Hypervisor and QEMU's microvm, each booting the same guest (vmlinux,
//! initramfs, vCPUs, memory, backing) with the one kernel command line
//! `truecold_proto::boot_cmdline::cmdline(SerialUse::Transport(engine), …)`.
//!
//! One small module per engine says, purely, how to launch it ([`Launch`]: its argv and any
//! file it reads), how to read its `--version` line ([`version`]) and how it ends ([`Ending`]).
//! [`observer`] is the pure serial observer (the `TC1` protocol on the engine's 8250, which
//! is its stdio), [`smaps`] picks the guest-memory mapping out of `/proc/<pid>/smaps`, and
//! [`driver`] is the one piece of I/O: spawn, observe, challenge, read smaps, reap.

pub mod cloud_hypervisor;
pub mod driver;
pub mod firecracker;
pub mod locate;
pub mod network;
pub mod observer;
pub mod parity;
pub mod qemu_microvm;
pub mod smaps;
pub mod truecold;
pub mod version;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::{Path, PathBuf};
use truecold_proto::boot_cmdline::{cmdline, CmdlineError, SerialUse};
pub use truecold_proto::kinds::Engine;
use truecold_proto::kinds::{Backing, HostKind, RamLayout};
pub use truecold_proto::limits::GuestMem;
use truecold_proto::parity::{uds_port_path, NetPair, AGENT_PORT};

/// One guest, identical for every engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guest {
    /// The uncompressed ELF vmlinux (PVH entry for QEMU, ELF load for the others).
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    pub vcpus: u32,
    pub mem: GuestMem,
    pub backing: Backing,
    /// Appended to the one command line (`truecold run --cmdline-extra`).
    pub cmdline_extra: String,
    /// truecold-vmm's RAM layout (`truecold run --ram-layout`); the peers lay RAM out their
    /// own documented way ([`Engine::low_ram_hole`]) and never get it.
    pub ram_layout: RamLayout,
}

impl Guest {
    /// The kernel command line this guest gets under `engine`: the one definition. Under
    /// truecold-vmm it carries the layout's word first
    /// ([`truecold_proto::boot_cmdline::ram_layout_key`]), as the VMM builds it.
    pub fn cmdline(&self, engine: Engine) -> Result<String, EngineError> {
        let word = truecold_proto::boot_cmdline::ram_layout_word(self.layout_of(engine));
        let extra = match word {
            Some(w) => format!("{w} {}", self.cmdline_extra),
            None => self.cmdline_extra.clone(),
        };
        cmdline(SerialUse::Transport(engine), self.mem, &extra).map_err(EngineError::Cmdline)
    }

    /// The RAM layout `engine` boots this guest with: truecold-vmm's [`Guest::ram_layout`];
    /// a peer's own, which records as [`RamLayout::ABSENT`] (the layout is truecold-vmm's).
    pub fn layout_of(&self, engine: Engine) -> RamLayout {
        match engine {
            Engine::Truecold => self.ram_layout,
            _ => RamLayout::ABSENT,
        }
    }
}

/// Why an engine cannot be launched as asked.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the guest command line")]
    Cmdline(#[source] CmdlineError),
    #[error("{engine} cannot give the guest `--backing {backing}`: {why}")]
    Unsupported {
        engine: Engine,
        backing: Backing,
        why: &'static str,
    },
    #[error("{engine}: {what} is not valid UTF-8: {}", path.display())]
    NotUtf8 {
        engine: Engine,
        what: &'static str,
        path: PathBuf,
    },
    #[error("serializing Firecracker's configuration")]
    Config(#[source] serde_json::Error),
    #[error("the parity contract")]
    Parity(#[source] parity::ParityUnsupported),
    #[error("{0}: the arm's launch has no config file to give the parity devices")]
    NoConfigFile(Engine),
    #[error("{engine}: the arm's launch has no `{flag}` for the parity contract to set")]
    NoFlag { engine: Engine, flag: &'static str },
}

/// How an engine's process ends after the guest's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exits by itself: truecold-vmm at the exit port, Firecracker at the i8042 reset,
    /// QEMU at the `isa-debug-exit` port (or the reset, with `-no-reboot`).
    ExitsItself,
    /// It reboots the guest on the reset (Cloud Hypervisor): the bench kills it right after
    /// the record, and the row says `killed`.
    KillAfterRecord,
}

/// How `engine` ends (see [`Ending`]).
pub fn ending(engine: Engine) -> Ending {
    match engine {
        Engine::CloudHypervisor => Ending::KillAfterRecord,
        Engine::Truecold | Engine::Firecracker | Engine::QemuMicrovm => Ending::ExitsItself,
    }
}

/// Whether the engine takes its serial input only from a terminal: Cloud Hypervisor v53.0
/// (`--serial tty`) reads stdin into the guest's 8250 only when stdin is a TTY
/// (vmm/src/serial_manager.rs), so the bench gives it a raw pseudo-terminal as stdin; the
/// others read a pipe.
pub fn stdin_is_tty(engine: Engine) -> bool {
    engine == Engine::CloudHypervisor
}

/// Whether exit status `code` is the engine's clean end after a guest that finished.
pub fn exit_is_clean(engine: Engine, code: i32) -> bool {
    match engine {
        Engine::QemuMicrovm => qemu_microvm::exit_is_clean(code),
        _ => code == 0,
    }
}

/// The guest's exit-port code as the engine's exit status tells it, where it does (QEMU's
/// `isa-debug-exit`; truecold's is in its report).
pub fn guest_exit_code(engine: Engine, code: i32) -> Option<u8> {
    match engine {
        Engine::QemuMicrovm => qemu_microvm::guest_exit_code(code),
        _ => None,
    }
}

/// One engine launch, fixed for a whole arm: the program, its argv, the files it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub engine: Engine,
    pub program: PathBuf,
    /// Everything after the program (truecold: without the per-sample stamps).
    pub args: Vec<String>,
    /// Written before each launch, outside its measured window (Firecracker's config; its
    /// log file, created empty because Firecracker opens it without creating it).
    pub files: Vec<(PathBuf, Vec<u8>)>,
    /// truecold: where the VMM writes its JSON report (removed before each launch, read
    /// after the reap).
    pub report_file: Option<PathBuf>,
    /// truecold: `--request-ns <request> --deadline-at-ns <deadline>` appended per sample.
    pub per_sample_stamps: bool,
    /// The parity contract's agent channel (`crate::parity`: every engine's hybrid vsock):
    /// the `TC1` lines arrive on a Unix socket, not on the engine's stdout.
    pub agent: Option<Agent>,
    /// The RAM layout the engine boots the guest with ([`Guest::layout_of`]): the size of
    /// the guest-memory mapping the driver reads ([`Engine::expected_mapping`]).
    pub ram_layout: RamLayout,
}

/// Where the bench meets the guest's agent and proves its network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agent {
    /// The socket the bench listens on before the spawn: the VMM's hybrid vsock connects the
    /// guest's connection to `truecold_proto::parity::AGENT_PORT` there
    /// (`uds_port_path(<--vsock-uds>, AGENT_PORT)`). Removed after the launch.
    pub listen: PathBuf,
    /// The guest's listener for the network proof (its network-pair address and
    /// `truecold_proto::parity::TCP_PORT`).
    pub tcp: std::net::SocketAddrV4,
}

/// The name of the hybrid vsock's socket in a launch's run directory (the agent listens on
/// `<it>_<AGENT_PORT>`).
pub const VSOCK_UDS: &str = "v.sock";
/// The per-launch workspace clone's name in the run directory.
pub const WORKSPACE_CLONE: &str = "workspace.img";

/// What one parity launch gives the engine (the parity contract: [`parity`]).
#[derive(Clone, Copy, Debug)]
pub struct PerLaunch<'a> {
    /// The launch's own directory (the vsock sockets, the workspace clone).
    pub run_dir: &'a Path,
    /// The launch's tap name.
    pub tap: &'a str,
    pub pair: NetPair,
}

impl PerLaunch<'_> {
    /// The hybrid vsock's socket.
    pub fn vsock_uds(&self) -> PathBuf {
        self.run_dir.join(VSOCK_UDS)
    }

    /// The workspace clone.
    pub fn image(&self) -> PathBuf {
        self.run_dir.join(WORKSPACE_CLONE)
    }

    /// The files the launch leaves in its run directory besides the clone, which the bench
    /// removes: the agent's socket and the engine's own vsock socket.
    pub fn sockets(&self) -> Vec<PathBuf> {
        vec![
            uds_port_path(&self.vsock_uds(), AGENT_PORT),
            self.vsock_uds(),
        ]
    }
}

/// The per-sample flag carrying the request stamp (CLOCK_MONOTONIC ns).
pub const REQUEST_FLAG: &str = "--request-ns";
/// The per-sample flag carrying the absolute deadline (CLOCK_MONOTONIC ns).
pub const DEADLINE_FLAG: &str = "--deadline-at-ns";

impl Launch {
    /// The argv of one sample (after the program).
    pub fn args_for(&self, request_ns: u64, deadline_at_ns: u64) -> Vec<String> {
        let mut v = self.args.clone();
        if self.per_sample_stamps {
            v.extend([
                REQUEST_FLAG.to_string(),
                request_ns.to_string(),
                DEADLINE_FLAG.to_string(),
                deadline_at_ns.to_string(),
            ]);
        }
        v
    }

    /// The command as one shell line, per-sample values symbolic (`<actual_request_ns>`,
    /// `<actual_request_ns+DEADLINE>`), as `cmdline.txt` records it.
    pub fn display(&self, deadline_ns: u64) -> String {
        let mut s = shell_quote(&self.program.to_string_lossy());
        for a in &self.args {
            s.push(' ');
            s.push_str(&shell_quote(a));
        }
        if self.per_sample_stamps {
            s.push_str(&format!(
                " {REQUEST_FLAG} <actual_request_ns> {DEADLINE_FLAG} <actual_request_ns+{deadline_ns}>"
            ));
        }
        s
    }
}

/// The launch of `engine` (binary `program`) for `guest`; its files live in `work` (one
/// directory per arm). `host` is the campaign's host kind (truecold-vmm's `--host-kind`).
pub fn launch(
    engine: Engine,
    program: &Path,
    guest: &Guest,
    work: &Path,
    host: HostKind,
) -> Result<Launch, EngineError> {
    let mut l = match engine {
        Engine::Truecold => truecold::launch(program, guest, work, host),
        Engine::Firecracker => firecracker::launch(program, guest, work),
        Engine::CloudHypervisor => cloud_hypervisor::launch(program, guest),
        Engine::QemuMicrovm => qemu_microvm::launch(program, guest),
    }?;
    l.ram_layout = guest.layout_of(engine);
    Ok(l)
}

/// A path as an argv word (the engines take UTF-8 paths in their configs).
fn utf8(engine: Engine, what: &'static str, p: &Path) -> Result<String, EngineError> {
    p.to_str().map(str::to_string).ok_or(EngineError::NotUtf8 {
        engine,
        what,
        path: p.to_path_buf(),
    })
}

/// The run order of a campaign of `arms` arms: `rounds` rounds, each arm once per round,
/// shuffled per round by `seed` (so drift and thermal effects hit every arm alike). Items are
/// (round, arm index), in run order.
pub fn order(arms: usize, rounds: u64, seed: u64) -> Vec<(u64, usize)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for r in 0..rounds {
        let mut e: Vec<usize> = (0..arms).collect();
        e.shuffle(&mut rng);
        out.extend(e.into_iter().map(|x| (r, x)));
    }
    out
}

/// `s` as one POSIX-shell word: unchanged when it is only safe characters, else in single
/// quotes (an embedded `'` written as `'\''`).
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;
