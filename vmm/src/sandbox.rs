//! Least privilege for the `truecold-vmm boot` process (docs/security.md):
//!
//! 1. [`at_start`]: no-new-privileges, and every inherited descriptor above 2 closed (the VMM
//!    is handed none: the report is a path it opens, the serial transport is stdin/stdout).
//! 2. [`drop_privileges`] (`--uid/--gid`): no supplementary groups, then the gid, then the
//!    uid; checked (ids, no capability, root cannot be regained) and /dev/kvm must be usable
//!    by what is left. Done before /dev/kvm and the kernel files are opened.
//! 3. [`Filters`]: a seccomp-bpf allowlist ([`allowlist`], typed, one entry per syscall with
//!    its argument rules and why it is needed) compiled by rust-vmm `seccompiler`, installed
//!    by the boot after the kernel is loaded and before the vCPUs are created, so every vCPU
//!    thread inherits it. A syscall outside it traps: [`SIGSYS`](install_violation_handler)
//!    says which one on stderr and ends the process with [`EXIT_SECCOMP_VIOLATION`].
use std::collections::BTreeMap;
use std::path::Path;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};

/// The exit status of a VMM that made a syscall its filter refuses (128 + SIGSYS, what a shell
/// shows for a process killed by SIGSYS).
pub const EXIT_SECCOMP_VIOLATION: u8 = 159;

/// Why a sandboxing step failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("prctl(PR_SET_NO_NEW_PRIVS) failed")]
    NoNewPrivs(#[source] std::io::Error),
    #[error("cannot close the inherited descriptors {fds:?}")]
    CloseFds {
        fds: Vec<i32>,
        #[source]
        source: std::io::Error,
    },
    #[error("--uid/--gid: dropping to {what} 0 is no drop (pick an unprivileged id)")]
    RootTarget { what: &'static str },
    #[error("setgroups([]) failed (dropping privileges needs root: CAP_SETGID)")]
    SetGroups(#[source] std::io::Error),
    #[error("setresgid({gid}) failed (dropping privileges needs root: CAP_SETGID)")]
    SetGid {
        gid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("setresuid({uid}) failed (dropping privileges needs root: CAP_SETUID)")]
    SetUid {
        uid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("after the drop the process still has {what}")]
    NotDropped { what: String },
    #[error("after the drop to uid {uid} the process could become root again ({how})")]
    RegainedRoot { uid: u32, how: &'static str },
    #[error(
        "uid {uid} gid {gid} cannot read and write {path} (owner {owner}, group {group}, mode \
         {mode:o}): the VMM keeps no supplementary group, so the device must be usable by that \
         uid or gid itself: pass --gid {group} if /dev/kvm's group may use it (a kvm group: \
         `chgrp kvm /dev/kvm && chmod 0660 /dev/kvm`), or grant the uid (`setfacl -m \
         u:{uid}:rw /dev/kvm`)"
    )]
    KvmAccess {
        uid: u32,
        gid: u32,
        path: String,
        owner: u32,
        group: u32,
        mode: u32,
    },
    #[error("cannot stat {path}")]
    KvmStat {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the seccomp filter")]
    Build(#[source] seccompiler::BackendError),
    #[error("cannot install the SIGSYS handler")]
    Handler(#[source] std::io::Error),
    #[error("cannot install the seccomp filter")]
    Install(#[source] seccompiler::Error),
}

impl SandboxError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::NoNewPrivs(_) => "no-new-privs-failed",
            SandboxError::CloseFds { .. } => "close-fds-failed",
            SandboxError::RootTarget { .. }
            | SandboxError::SetGroups(_)
            | SandboxError::SetGid { .. }
            | SandboxError::SetUid { .. }
            | SandboxError::NotDropped { .. }
            | SandboxError::RegainedRoot { .. } => "privilege-drop-failed",
            SandboxError::KvmAccess { .. } => "kvm-access-denied",
            SandboxError::KvmStat { .. } => "kvm-unavailable",
            SandboxError::Build(_) | SandboxError::Handler(_) | SandboxError::Install(_) => {
                "seccomp-failed"
            }
        }
    }
}

fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

// ---------------------------------------------------------------------------------------
// 1. At start

/// What [`at_start`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prelude {
    /// PR_SET_NO_NEW_PRIVS is set (execve can never grant privileges again).
    pub no_new_privs: bool,
    /// The descriptors above 2 the process inherited, all closed (empty: none were).
    pub inherited_fds_closed: Vec<i32>,
}

/// The descriptors of this process above 2, from /proc/self/fd, without the one listing it.
fn open_fds_above_stderr() -> Option<Vec<i32>> {
    // SAFETY: opendir on a NUL-terminated path; the stream is closed below.
    let dir = unsafe { libc::opendir(c"/proc/self/fd".as_ptr()) };
    if dir.is_null() {
        return None;
    }
    // SAFETY: `dir` is a valid open stream.
    let own = unsafe { libc::dirfd(dir) };
    let mut fds = Vec::new();
    loop {
        // SAFETY: `dir` is a valid open stream; the entry is read before the next call.
        let e = unsafe { libc::readdir(dir) };
        if e.is_null() {
            break;
        }
        // SAFETY: `d_name` of a returned entry is a NUL-terminated name.
        let name = unsafe { std::ffi::CStr::from_ptr((*e).d_name.as_ptr()) };
        if let Some(fd) = name.to_str().ok().and_then(|n| n.parse::<i32>().ok()) {
            if fd > 2 && fd != own {
                fds.push(fd);
            }
        }
    }
    // SAFETY: `dir` is a valid open stream, closed once.
    unsafe { libc::closedir(dir) };
    fds.sort_unstable();
    Some(fds)
}

/// Sets no-new-privileges and closes every inherited descriptor above 2; call it first, before
/// the process opens anything.
pub fn at_start() -> Result<Prelude, SandboxError> {
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(SandboxError::NoNewPrivs(last_os_error()));
    }
    // Unreadable /proc: close without a list.
    let inherited = open_fds_above_stderr().unwrap_or_default();
    // SAFETY: close_range on [3, ~0] closes this process's descriptors above 2; nothing in
    // this process holds one yet (it is the first thing main does).
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if r != 0 {
        let e = last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(SandboxError::CloseFds {
                fds: inherited,
                source: e,
            });
        }
        // Before Linux 5.9: one by one.
        for &fd in &inherited {
            // SAFETY: `fd` is an inherited descriptor nothing in this process owns.
            if unsafe { libc::close(fd) } != 0 {
                return Err(SandboxError::CloseFds {
                    fds: inherited.clone(),
                    source: last_os_error(),
                });
            }
        }
    }
    Ok(Prelude {
        no_new_privs: true,
        inherited_fds_closed: inherited,
    })
}

// ---------------------------------------------------------------------------------------
// 2. The drop to an unprivileged user

/// The user the VMM dropped to, as the kernel reports it after the drop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserDrop {
    pub uid: u32,
    pub gid: u32,
}

fn ids(f: unsafe extern "C" fn(*mut u32, *mut u32, *mut u32) -> libc::c_int) -> [u32; 3] {
    let (mut r, mut e, mut s) = (u32::MAX, u32::MAX, u32::MAX);
    // SAFETY: getresuid/getresgid write three ids through valid pointers.
    unsafe { f(&mut r, &mut e, &mut s) };
    [r, e, s]
}

/// The effective and permitted capability sets (capget, version 3), or None.
fn capabilities() -> Option<(u64, u64)> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget reads the header and writes two data structs (version 3), both valid.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    (r == 0).then(|| {
        let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
        (
            join(d[0].effective, d[1].effective),
            join(d[0].permitted, d[1].permitted),
        )
    })
}

/// Drops to `uid`/`gid` for good: setgroups([]), setresgid, setresuid (the gid first: after
/// the uid the process could no longer change it), then checks the result: every uid and
/// gid is the new one, no supplementary group, no effective or permitted capability, and
/// setuid(0)/setgid(0) fail. Last, `kvm` (/dev/kvm) must be readable and writable by what is
/// left (the access(2) check with the new ids, which also honours ACLs).
pub fn drop_privileges(uid: u32, gid: u32, kvm: &Path) -> Result<UserDrop, SandboxError> {
    let user = drop_to(uid, gid)?;
    check_kvm_access(uid, gid, kvm)?;
    Ok(user)
}

/// [`drop_privileges`] without the /dev/kvm check: for a process that holds its descriptors
/// already (the jail, [`crate::jail`]).
pub fn drop_to(uid: u32, gid: u32) -> Result<UserDrop, SandboxError> {
    if uid == 0 {
        return Err(SandboxError::RootTarget { what: "uid" });
    }
    if gid == 0 {
        return Err(SandboxError::RootTarget { what: "gid" });
    }
    // SAFETY: setgroups with a count of 0 reads no memory.
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        return Err(SandboxError::SetGroups(last_os_error()));
    }
    // SAFETY: integer arguments only.
    if unsafe { libc::setresgid(gid, gid, gid) } != 0 {
        return Err(SandboxError::SetGid {
            gid,
            source: last_os_error(),
        });
    }
    // SAFETY: integer arguments only.
    if unsafe { libc::setresuid(uid, uid, uid) } != 0 {
        return Err(SandboxError::SetUid {
            uid,
            source: last_os_error(),
        });
    }
    let (u, g) = (ids(libc::getresuid), ids(libc::getresgid));
    if u != [uid; 3] || g != [gid; 3] {
        return Err(SandboxError::NotDropped {
            what: format!("uids {u:?} gids {g:?}"),
        });
    }
    // SAFETY: a zero count asks for the number of groups and writes nothing.
    let groups = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if groups != 0 {
        return Err(SandboxError::NotDropped {
            what: format!("{groups} supplementary group(s)"),
        });
    }
    match capabilities() {
        Some((0, 0)) => {}
        Some((e, p)) => {
            return Err(SandboxError::NotDropped {
                what: format!("capabilities (effective {e:#x}, permitted {p:#x})"),
            })
        }
        None => {
            return Err(SandboxError::NotDropped {
                what: "capabilities it cannot read (capget failed)".into(),
            })
        }
    }
    // SAFETY: integer argument only; the call is expected to fail.
    if unsafe { libc::setuid(0) } == 0 {
        return Err(SandboxError::RegainedRoot {
            uid,
            how: "setuid(0) succeeded",
        });
    }
    // SAFETY: as above.
    if unsafe { libc::setgid(0) } == 0 {
        return Err(SandboxError::RegainedRoot {
            uid,
            how: "setgid(0) succeeded",
        });
    }
    Ok(UserDrop { uid, gid })
}

fn check_kvm_access(uid: u32, gid: u32, kvm: &Path) -> Result<(), SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let path = kvm.display().to_string();
    let meta = std::fs::metadata(kvm).map_err(|source| SandboxError::KvmStat {
        path: path.clone(),
        source,
    })?;
    let mut c = kvm.as_os_str().as_bytes().to_vec();
    c.push(0);
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let ok = unsafe { libc::access(c.as_ptr().cast(), libc::R_OK | libc::W_OK) } == 0;
    if ok {
        return Ok(());
    }
    Err(SandboxError::KvmAccess {
        uid,
        gid,
        path,
        owner: meta.uid(),
        group: meta.gid(),
        mode: meta.mode() & 0o7777,
    })
}

// ---------------------------------------------------------------------------------------
// 3. The seccomp filter

/// A condition on one syscall argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Argument `index` (32 bits) equals `value`.
    Eq { index: u8, value: u32 },
    /// Argument `index` (64 bits) has none of the bits of `mask`.
    Clear { index: u8, mask: u64 },
    /// Argument `index` (64 bits) has every bit of `mask`.
    Set { index: u8, mask: u64 },
}

/// One allowed syscall: allowed when `rules` is empty, else when every condition of one of
/// them holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowed {
    pub name: &'static str,
    pub nr: i64,
    pub rules: Vec<Vec<Arg>>,
    /// Who needs it, once the filter is in place.
    pub why: &'static str,
}

fn any(name: &'static str, nr: i64, why: &'static str) -> Allowed {
    Allowed {
        name,
        nr,
        rules: Vec::new(),
        why,
    }
}

fn only(name: &'static str, nr: i64, rules: Vec<Vec<Arg>>, why: &'static str) -> Allowed {
    Allowed {
        name,
        nr,
        rules,
        why,
    }
}

/// glibc's internal signal for set*id across threads (its handler is installed lazily, at the
/// first pthread_create).
const GLIBC_SIGSETXID: u32 = 33;

const KVMIO: u32 = 0xae;
const IOC_NONE: u32 = 0;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (KVMIO << 8) | nr
}

/// The KVM ioctls the VMM issues once the filter is in place (vCPU creation and set-up, the
/// serial's irqfd, the run loop, the last registers and MP state — also what the RIP
/// sampler reads on each sample, `KVM_GET_SREGS` too with `--sample-stacks`), by name and request number; nothing
/// else may be an ioctl. Everything before (KVM_CREATE_VM, memslots, irqchip, PIT, …) is done.
pub fn kvm_ioctls() -> Vec<(&'static str, u32)> {
    use kvm_bindings::{
        kvm_cpuid2, kvm_fpu, kvm_irqfd, kvm_lapic_state, kvm_mp_state, kvm_msr_list, kvm_msrs,
        kvm_regs, kvm_sregs,
    };
    use std::mem::size_of;
    vec![
        (
            "KVM_GET_MSR_INDEX_LIST",
            ioc(IOC_READ | IOC_WRITE, 0x02, size_of::<kvm_msr_list>()),
        ),
        ("KVM_CHECK_EXTENSION", ioc(IOC_NONE, 0x03, 0)),
        (
            "KVM_GET_SUPPORTED_CPUID",
            ioc(IOC_READ | IOC_WRITE, 0x05, size_of::<kvm_cpuid2>()),
        ),
        ("KVM_CREATE_VCPU", ioc(IOC_NONE, 0x41, 0)),
        ("KVM_IRQFD", ioc(IOC_WRITE, 0x76, size_of::<kvm_irqfd>())),
        ("KVM_RUN", ioc(IOC_NONE, 0x80, 0)),
        ("KVM_GET_REGS", ioc(IOC_READ, 0x81, size_of::<kvm_regs>())),
        ("KVM_SET_REGS", ioc(IOC_WRITE, 0x82, size_of::<kvm_regs>())),
        ("KVM_GET_SREGS", ioc(IOC_READ, 0x83, size_of::<kvm_sregs>())),
        (
            "KVM_SET_SREGS",
            ioc(IOC_WRITE, 0x84, size_of::<kvm_sregs>()),
        ),
        ("KVM_SET_MSRS", ioc(IOC_WRITE, 0x89, size_of::<kvm_msrs>())),
        ("KVM_SET_FPU", ioc(IOC_WRITE, 0x8d, size_of::<kvm_fpu>())),
        (
            "KVM_GET_LAPIC",
            ioc(IOC_READ, 0x8e, size_of::<kvm_lapic_state>()),
        ),
        (
            "KVM_SET_LAPIC",
            ioc(IOC_WRITE, 0x8f, size_of::<kvm_lapic_state>()),
        ),
        (
            "KVM_SET_CPUID2",
            ioc(IOC_WRITE, 0x90, size_of::<kvm_cpuid2>()),
        ),
        (
            "KVM_GET_MP_STATE",
            ioc(IOC_READ, 0x98, size_of::<kvm_mp_state>()),
        ),
    ]
}

/// What the virtio devices' thread needs beyond the base allowlist (nothing without them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceNeeds {
    /// A device thread runs (any virtio device): epoll.
    pub thread: bool,
    /// virtio-blk: pwrite64 and fdatasync on the workspace image.
    pub blk: bool,
    /// virtio-vsock: AF_UNIX socket + connect to `<uds>_<port>`, shutdown.
    pub vsock: bool,
    /// Not a device: `--pin-vcpus`, each vCPU thread pinning itself before its own filter
    /// (`sched_setaffinity(0, …)`, in the process's list only; [`VCPU_DROPS`] has it).
    pub pin: bool,
}

impl DeviceNeeds {
    /// The needs of the devices `cfg` asks for.
    pub fn of(cfg: &crate::config::VirtioConfig) -> Self {
        DeviceNeeds {
            thread: !cfg.is_empty(),
            blk: cfg.workspace.is_some(),
            vsock: cfg.vsock_uds.is_some(),
            pin: false,
        }
    }

    /// Every device (and no pinning, which is not one).
    pub fn all() -> Self {
        DeviceNeeds {
            thread: true,
            blk: true,
            vsock: true,
            pin: false,
        }
    }
}

/// [`allowlist`] plus what the virtio device thread makes at run time (`needs`). The tap,
/// the image and the KVM registrations are all done before the filter; the net device only
/// reads and writes its tap (already allowed).
pub fn allowlist_for(pid: u32, needs: DeviceNeeds) -> Vec<Allowed> {
    use libc::*;
    let mut list = allowlist(pid);
    if needs.thread {
        list.push(any(
            "epoll_wait",
            SYS_epoll_wait,
            "the virtio device thread waiting on its queues and backends",
        ));
        list.push(any(
            "epoll_pwait",
            SYS_epoll_pwait,
            "epoll_wait, where the C library implements it with epoll_pwait",
        ));
        list.push(any(
            "epoll_ctl",
            SYS_epoll_ctl,
            "the vsock device adding and removing a connection's socket",
        ));
    }
    if needs.blk {
        list.push(any(
            "pwrite64",
            SYS_pwrite64,
            "virtio-blk writes to the workspace image",
        ));
        list.push(any("fdatasync", SYS_fdatasync, "virtio-blk FLUSH"));
    }
    if needs.vsock {
        list.push(only(
            "socket",
            SYS_socket,
            vec![vec![Arg::Eq {
                index: 0,
                value: AF_UNIX as u32,
            }]],
            "virtio-vsock connecting a guest connection to <uds>_<port>; AF_UNIX only",
        ));
        list.push(any(
            "connect",
            SYS_connect,
            "virtio-vsock connecting its AF_UNIX socket to <uds>_<port>",
        ));
        list.push(any(
            "shutdown",
            SYS_shutdown,
            "virtio-vsock passing the guest's SHUTDOWN to the Unix socket",
        ));
    }
    if needs.pin {
        list.push(only(
            "sched_setaffinity",
            SYS_sched_setaffinity,
            vec![vec![Arg::Eq { index: 0, value: 0 }]],
            "--pin-vcpus: a vCPU thread pinning itself (pid 0, the calling thread, only), before its own filter",
        ));
    }
    list
}

/// The allowlist: every syscall the VMM makes from the filter's installation (after the
/// kernel is loaded) to its exit, with the arguments it makes it with where they can be
/// checked (docs/security.md has the table). `clone3` is not in it: it fails with ENOSYS
/// ([`Filters::enosys`]) so that the C library falls back to `clone`, whose flags can be
/// checked. `pid` is the process's own id (`tgkill` may signal its own threads only).
pub fn allowlist(pid: u32) -> Vec<Allowed> {
    use libc::*;
    let prot_exec = Arg::Clear {
        index: 2,
        mask: PROT_EXEC as u64,
    };
    vec![
        any("read", SYS_read, "eventfd counters; stdin under the serial transport"),
        any("write", SYS_write, "report, serial output, diagnostics (stdout/stderr, the report file), eventfds"),
        any("pread64", SYS_pread64, "re-reading the /proc and /sys files held open before the filter (RSS, smaps, THP mode, host facts)"),
        any("close", SYS_close, "teardown: vCPU, VM, /dev/kvm and eventfd descriptors"),
        only(
            "ioctl",
            SYS_ioctl,
            kvm_ioctls()
                .into_iter()
                .map(|(_, req)| vec![Arg::Eq { index: 1, value: req }])
                .collect(),
            "the KVM ioctls of vCPU set-up, the serial irqfd and the run loop only (request numbers in kvm_ioctls())",
        ),
        only("mmap", SYS_mmap, vec![vec![prot_exec]], "each vCPU's kvm_run area, thread stacks, the allocator; never executable"),
        only("mprotect", SYS_mprotect, vec![vec![prot_exec]], "thread stack guard pages; never executable"),
        any("munmap", SYS_munmap, "teardown of kvm_run areas, guest memory, thread stacks; the allocator"),
        any("madvise", SYS_madvise, "the allocator and the C library releasing thread stacks"),
        any("mremap", SYS_mremap, "the allocator growing large buffers (the report)"),
        any("brk", SYS_brk, "the allocator's heap"),
        any("futex", SYS_futex, "locks (the device bus), the run loop's channel, thread joins"),
        only(
            "clone",
            SYS_clone,
            vec![vec![Arg::Set { index: 0, mask: CLONE_THREAD as u64 }]],
            "vCPU and serial-input threads; only threads (CLONE_THREAD): no new process",
        ),
        any("set_robust_list", SYS_set_robust_list, "a new thread's start (C library)"),
        any("rseq", SYS_rseq, "a new thread's start (C library)"),
        any("sigaltstack", SYS_sigaltstack, "a Rust thread's stack-overflow guard, at its start and exit"),
        any("rt_sigprocmask", SYS_rt_sigprocmask, "signals blocked around thread creation (C library)"),
        any("rt_sigreturn", SYS_rt_sigreturn, "return from the vCPU kick handler"),
        only(
            "rt_sigaction",
            SYS_rt_sigaction,
            vec![vec![Arg::Eq { index: 0, value: GLIBC_SIGSETXID }]],
            "glibc's first pthread_create installs its internal SIGSETXID (33) handler; that signal only",
        ),
        only(
            "tgkill",
            SYS_tgkill,
            vec![vec![Arg::Eq { index: 0, value: pid }]],
            "the kick that ends KVM_RUN on the other vCPUs (pthread_kill); this process's threads only",
        ),
        any("getpid", SYS_getpid, "pthread_kill's target process"),
        any("gettid", SYS_gettid, "the C library's thread and abort paths"),
        only(
            "prctl",
            SYS_prctl,
            vec![vec![Arg::Eq { index: 0, value: PR_SET_NAME as u32 }]],
            "naming a new thread (vcpuN, serial-in); PR_SET_NAME only",
        ),
        any("clock_gettime", SYS_clock_gettime, "the stamps, when the vDSO falls back to the syscall"),
        any("getrandom", SYS_getrandom, "the liveness nonce"),
        only(
            "getrusage",
            SYS_getrusage,
            vec![vec![Arg::Eq { index: 0, value: RUSAGE_SELF as u32 }]],
            "page-fault counters at each mark (RUSAGE_SELF only)",
        ),
        any("eventfd2", SYS_eventfd2, "the serial's irqfd and the serial-input thread's events"),
        any("poll", SYS_poll, "the serial-input thread waiting on stdin"),
        any("ppoll", SYS_ppoll, "poll, where the C library implements it with ppoll"),
        only(
            "fcntl",
            SYS_fcntl,
            vec![
                vec![Arg::Eq { index: 1, value: F_DUPFD_CLOEXEC as u32 }],
                vec![Arg::Eq { index: 1, value: F_GETFD as u32 }],
            ],
            "duplicating stdin for the serial-input thread (F_DUPFD_CLOEXEC); the standard library's check that a descriptor it closes is open (F_GETFD, debug builds)",
        ),
        any("sched_getaffinity", SYS_sched_getaffinity, "a new Rust thread reading its stack bounds (glibc's pthread_getattr_np fills in the affinity)"),
        any("sched_yield", SYS_sched_yield, "lock and channel back-off"),
        any("restart_syscall", SYS_restart_syscall, "a wait the kick signal interrupted, restarted by the kernel"),
        any("exit", SYS_exit, "a thread's end"),
        any("exit_group", SYS_exit_group, "the process's end"),
        only(
            "seccomp",
            SYS_seccomp,
            vec![vec![
                Arg::Eq { index: 0, value: SECCOMP_SET_MODE_FILTER },
                Arg::Eq { index: 1, value: 0 },
            ]],
            "each vCPU thread adding its own, stricter filter first thing (SECCOMP_SET_MODE_FILTER, no flags: a filter can only narrow, never widen)",
        ),
    ]
}

/// seccomp(2)'s SECCOMP_SET_MODE_FILTER.
const SECCOMP_SET_MODE_FILTER: u32 = 1;

/// What a vCPU thread never needs of [`allowlist_for`]: the device thread's backends
/// (sockets, the image's writes and flushes, its epoll waits), thread creation, the serial
/// input thread's polls, signal handlers, new eventfds, filters
/// (its own is the last) and thread naming (done before its filter, by the thread's start).
/// `epoll_ctl` stays: a guest's device reset, an MMIO write on a vCPU thread, removes the
/// vsock connections' sockets from the device thread's epoll; `fcntl` (`F_GETFD`) too: the
/// standard library's debug check when a vCPU thread closes its descriptor.
pub const VCPU_DROPS: [&str; 15] = [
    "socket",
    "connect",
    "shutdown",
    "pwrite64",
    "fdatasync",
    "epoll_wait",
    "epoll_pwait",
    "clone",
    "poll",
    "ppoll",
    "rt_sigaction",
    "eventfd2",
    "seccomp",
    "prctl",
    "sched_setaffinity",
];

/// The allowlist of a vCPU thread: [`allowlist_for`] without [`VCPU_DROPS`].
pub fn vcpu_allowlist(pid: u32, needs: DeviceNeeds) -> Vec<Allowed> {
    allowlist_for(pid, needs)
        .into_iter()
        .filter(|a| !VCPU_DROPS.contains(&a.name))
        .collect()
}

/// The vCPU threads' filter (on a match: allow; else trap), compiled (pure).
pub fn vcpu_filter(list: &[Allowed]) -> Result<BpfProgram, SandboxError> {
    let rules = rule_map(list)?;
    SeccompFilter::new(
        rules,
        SeccompAction::Trap,
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .and_then(TryInto::try_into)
    .map_err(SandboxError::Build)
}

/// What each vCPU thread installs at its start, set once by the boot ([`arm_vcpu_threads`]).
struct VcpuArm {
    filter: Option<BpfProgram>,
    selftest: bool,
}

static VCPU_ARM: std::sync::OnceLock<VcpuArm> = std::sync::OnceLock::new();

thread_local! {
    /// Set on a vCPU thread once its filter is in (the SIGSYS handler's wording).
    static ON_VCPU: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
/// The longest installation of a vCPU thread's filter, ns.
static VCPU_INSTALL_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Makes every vCPU thread started from now on install `filter` first thing (None: none),
/// and vCPU 0 make the [`SelfTest::VcpuSocket`] call after it when `selftest`. Once per
/// process (the CLI's boot); false when already armed.
pub fn arm_vcpu_threads(filter: Option<BpfProgram>, selftest: bool) -> bool {
    VCPU_ARM.set(VcpuArm { filter, selftest }).is_ok()
}

/// The longest time a vCPU thread took to install its filter, ns (None: none installed).
pub fn vcpu_install_ns() -> Option<u64> {
    match VCPU_INSTALL_NS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Called first by each vCPU thread `i`: installs the armed filter on this thread only
/// (stacked on the process's: the stricter result wins), then vCPU 0 makes the armed
/// self-test call. Nothing when unarmed (the library's boots).
pub fn enter_vcpu_thread(i: usize) -> std::io::Result<()> {
    let Some(arm) = VCPU_ARM.get() else {
        return Ok(());
    };
    if let Some(f) = &arm.filter {
        let t0 = truecold_proto::measure::now_ns();
        let prog = libc::sock_fprog {
            len: u16::try_from(f.len()).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "filter too long")
            })?,
            filter: f.as_ptr().cast::<libc::sock_filter>().cast_mut(),
        };
        // SAFETY: `prog` points at `f`'s instructions (seccompiler's sock_filter has the
        // kernel's layout), alive during the call; no-new-privileges is set (at_start).
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        ON_VCPU.with(|c| c.set(true));
        let dt = truecold_proto::measure::now_ns().saturating_sub(t0).max(1);
        VCPU_INSTALL_NS.fetch_max(dt, std::sync::atomic::Ordering::Relaxed);
    }
    if arm.selftest && i == 0 {
        let (r, errno) = raw_socket();
        eprintln!(
            "truecold-vmm: --sandbox-selftest vcpu-socket: the call returned {r} (errno {errno})"
        );
    }
    Ok(())
}

/// socket(AF_UNIX, SOCK_STREAM) on this thread, closed at once: (result, errno).
fn raw_socket() -> (i64, i32) {
    // SAFETY: a socket made and closed at once.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let errno = *libc::__errno_location();
        if fd >= 0 {
            libc::close(fd);
        }
        (i64::from(fd), if fd >= 0 { 0 } else { errno })
    }
}

/// The compiled filters: [`Filters::allow`] (the allowlist; anything else traps) and
/// [`Filters::enosys`] (clone3 fails with ENOSYS, everything else passes to the allowlist).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filters {
    pub allow: BpfProgram,
    pub enosys: BpfProgram,
    /// Syscalls the allowlist allows (some only with the arguments of their rule).
    pub allowed: usize,
}

fn condition(a: Arg) -> Result<SeccompCondition, seccompiler::BackendError> {
    let (index, len, op, value) = match a {
        Arg::Eq { index, value } => (
            index,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            u64::from(value),
        ),
        Arg::Clear { index, mask } => (
            index,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(mask),
            0,
        ),
        Arg::Set { index, mask } => (
            index,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(mask),
            mask,
        ),
    };
    SeccompCondition::new(index, len, op, value)
}

/// Compiles `list` (pure): the allowlist filter (on a match: allow; else trap) and the
/// clone3 → ENOSYS one.
pub fn filters(list: &[Allowed]) -> Result<Filters, SandboxError> {
    let arch = TargetArch::x86_64;
    let mut rules = rule_map(list)?;
    let allowed = rules.len();
    // clone3 passes the allowlist so that the ENOSYS filter decides it: of two filters the
    // stricter result wins, and a trap here would beat the ENOSYS there.
    rules.entry(libc::SYS_clone3).or_default();
    let allow: BpfProgram =
        SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, arch)
            .and_then(TryInto::try_into)
            .map_err(SandboxError::Build)?;
    let enosys: BpfProgram = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .and_then(TryInto::try_into)
    .map_err(SandboxError::Build)?;
    Ok(Filters {
        allow,
        enosys,
        allowed,
    })
}

/// `list` as seccompiler's rule map.
fn rule_map(list: &[Allowed]) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for a in list {
        let chain = a
            .rules
            .iter()
            .map(|r| {
                SeccompRule::new(
                    r.iter()
                        .map(|&c| condition(c))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(SandboxError::Build)?;
        rules.insert(a.nr, chain);
    }
    Ok(rules)
}

/// The names the SIGSYS handler can give for a syscall in the allowlist (refused for its
/// arguments).
static NAMES: std::sync::OnceLock<Vec<(i64, &'static str)>> = std::sync::OnceLock::new();

/// Names of syscalls outside the allowlist that a subverted VMM would reach for first.
const FORBIDDEN_NAMES: [(i64, &str); 14] = [
    (libc::SYS_open, "open"),
    (libc::SYS_openat, "openat"),
    (libc::SYS_socket, "socket"),
    (libc::SYS_connect, "connect"),
    (libc::SYS_execve, "execve"),
    (libc::SYS_execveat, "execveat"),
    (libc::SYS_fork, "fork"),
    (libc::SYS_vfork, "vfork"),
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_kill, "kill"),
    (libc::SYS_setuid, "setuid"),
    (libc::SYS_newfstatat, "newfstatat"),
    (libc::SYS_statx, "statx"),
];

/// Writes `n` in decimal into `buf`, returns the digits.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    &buf[i..]
}

extern "C" fn on_sigsys(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Async-signal-safe only: no allocation, no lock; write(2) and exit_group(2) are allowed.
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler; for SIGSYS its
    // union holds `_sigsys { void *call_addr; int syscall; unsigned arch; }`, at offset 16,
    // so the syscall number is the i32 at byte offset 24.
    let nr = unsafe { std::ptr::read_unaligned(info.cast::<u8>().add(24).cast::<i32>()) };
    let mut out = [0u8; 256];
    let mut len = 0;
    let mut put = |b: &[u8]| {
        let n = b.len().min(out.len() - len);
        out[len..len + n].copy_from_slice(&b[..n]);
        len += n;
    };
    put(b"truecold-vmm: seccomp refused syscall ");
    let mut digits = [0u8; 20];
    put(decimal(u64::from(nr.unsigned_abs()), &mut digits));
    let on_vcpu = ON_VCPU.with(|c| c.get());
    match NAMES
        .get()
        .and_then(|n| n.iter().find(|(x, _)| *x == i64::from(nr)))
    {
        Some((_, name)) if on_vcpu && VCPU_DROPS.contains(name) => {
            put(b" (");
            put(name.as_bytes());
            put(b", not in a vCPU thread's allowlist)");
        }
        Some((_, name)) => {
            put(b" (");
            put(name.as_bytes());
            put(b", with arguments outside its rule)");
        }
        None => {
            put(b" (");
            if let Some((_, name)) = FORBIDDEN_NAMES.iter().find(|(x, _)| *x == i64::from(nr)) {
                put(name.as_bytes());
                put(b", ");
            }
            put(b"not in the allowlist)");
        }
    }
    put(b"; a VMM bug (vmm/src/sandbox.rs lacks it) or a subverted process; exiting\n");
    // SAFETY: writes `len` initialized bytes of `out` to stderr, then ends the process.
    unsafe {
        libc::write(2, out.as_ptr().cast(), len);
        libc::_exit(i32::from(EXIT_SECCOMP_VIOLATION));
    }
}

/// Installs the SIGSYS handler that names a refused syscall and exits with
/// [`EXIT_SECCOMP_VIOLATION`] (before the filter: rt_sigaction is not in the allowlist).
pub fn install_violation_handler(list: &[Allowed]) -> Result<(), SandboxError> {
    NAMES.get_or_init(|| list.iter().map(|a| (a.nr, a.name)).collect());
    // SAFETY: an all-zero sigaction is a valid value of the plain C struct.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigsys as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO;
    // SAFETY: `sa.sa_mask` is a valid sigset to empty.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: `sa` is a valid sigaction whose handler is an extern "C" fn of the SA_SIGINFO
    // signature; the old action is not asked for.
    if unsafe { libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()) } != 0 {
        return Err(SandboxError::Handler(last_os_error()));
    }
    Ok(())
}

/// Fixes what glibc's allocator would otherwise learn lazily by opening
/// /sys/devices/system/cpu/online (a syscall the filter refuses): the arena limit, which it
/// computes the first time many threads contend (seen from 16 vCPUs on). Sets glibc's default
/// (8 arenas per CPU) explicitly, before the filter. Returns the limit set (None off glibc).
pub fn settle_allocator() -> Option<i32> {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: sysconf and mallopt take integer arguments.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.clamp(1, 1 << 16) as i32;
        let max = n.saturating_mul(8);
        // SAFETY: as above.
        (unsafe { libc::mallopt(libc::M_ARENA_MAX, max) } == 1).then_some(max)
    }
    #[cfg(not(target_env = "gnu"))]
    None
}

/// Installs `f` on every thread of the process (TSYNC; the boot has one thread then, and the
/// vCPU threads it creates afterwards inherit it). Irreversible.
pub fn install(f: &Filters) -> Result<(), SandboxError> {
    // The clone3 filter first: installing one calls prctl(PR_SET_NO_NEW_PRIVS), which the
    // allowlist does not allow.
    seccompiler::apply_filter_all_threads(&f.enosys).map_err(SandboxError::Install)?;
    seccompiler::apply_filter_all_threads(&f.allow).map_err(SandboxError::Install)
}

/// What the report says of the seccomp filter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompReport {
    /// Whether the filter was installed (false: `--no-seccomp`).
    pub installed: bool,
    /// Syscalls the allowlist allows (some only with the arguments of their rule).
    pub allowed_syscalls: usize,
    /// What a refused syscall does: `trap` (SIGSYS: the VMM names it on stderr and exits with
    /// status 159).
    pub on_violation: String,
    /// `Seccomp:` of /proc/self/status right after the installation (2: filter mode), as
    /// the kernel sees it.
    pub mode_observed: Option<u8>,
}

/// What confined the VMM process (the report's `sandbox`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    #[serde(flatten)]
    pub prelude: Prelude,
    /// The user the VMM dropped to (`--uid/--gid`), None when it kept its own.
    pub user: Option<UserDrop>,
    pub seccomp: SeccompReport,
}

/// The `Seccomp:` field of a /proc status text.
pub fn seccomp_mode(status: &str) -> Option<u8> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:")?.trim().parse().ok())
}

/// A forbidden syscall the hidden `--sandbox-selftest` makes right after the installation,
/// from a new thread (as a vCPU thread would): with the filter the process ends with
/// [`EXIT_SECCOMP_VIOLATION`]; with `--no-seccomp` the call is made and the boot goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forbidden {
    Socket,
    Openat,
    Execve,
    Fork,
}

impl Forbidden {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "socket" => Ok(Forbidden::Socket),
            "openat" => Ok(Forbidden::Openat),
            "execve" => Ok(Forbidden::Execve),
            "fork" => Ok(Forbidden::Fork),
            _ => Err(format!("`{s}`: socket, openat, execve or fork")),
        }
    }

    /// Makes the call from a new thread; returns its raw result (when it returns).
    pub fn call(self) -> i64 {
        let t = std::thread::Builder::new()
            .name("selftest".into())
            .spawn(move || self.call_here());
        match t.map(|t| t.join()) {
            Ok(Ok(r)) => r,
            _ => -1,
        }
    }

    /// Makes the call on this thread; returns its raw result (when it returns).
    pub fn call_here(self) -> i64 {
        {
            {
                // SAFETY: each call is made with arguments that cannot harm the process: a
                // socket closed at once, /dev/null opened read-only and closed, execve of a
                // path that does not exist (it returns), a fork whose child exits at once.
                unsafe {
                    match self {
                        Forbidden::Socket => {
                            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                            if fd >= 0 {
                                libc::close(fd);
                            }
                            i64::from(fd)
                        }
                        Forbidden::Openat => {
                            let fd = libc::openat(
                                libc::AT_FDCWD,
                                c"/dev/null".as_ptr(),
                                libc::O_RDONLY | libc::O_CLOEXEC,
                            );
                            if fd >= 0 {
                                libc::close(fd);
                            }
                            i64::from(fd)
                        }
                        Forbidden::Execve => {
                            let argv = [std::ptr::null::<libc::c_char>()];
                            i64::from(libc::execve(
                                c"/nonexistent/truecold-selftest".as_ptr(),
                                argv.as_ptr(),
                                argv.as_ptr(),
                            ))
                        }
                        Forbidden::Fork => {
                            let pid = libc::syscall(libc::SYS_fork);
                            if pid == 0 {
                                libc::_exit(0);
                            }
                            if pid > 0 {
                                libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
                            }
                            pid
                        }
                    }
                }
            }
        }
    }
}

/// The hidden `--sandbox-selftest` hook: a call made once the process is confined (jail,
/// then filters), whose result (or the filter's refusal) the tests read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelfTest {
    /// `socket`, `openat`, `execve`, `fork`: a forbidden syscall from a new thread.
    Call(Forbidden),
    /// `open:PATH`: openat(PATH, O_RDONLY) from a new thread (run it with --no-seccomp to
    /// see the jail's answer rather than the filter's).
    Open(std::path::PathBuf),
    /// `connect:PATH`: a Unix stream connected to PATH from a new thread.
    Connect(std::path::PathBuf),
    /// `connect-bound:PATH`: the same, with PATH's directory bound into the jail as a vsock
    /// socket directory is.
    ConnectBound(std::path::PathBuf),
    /// `connect-abstract:NAME`: a Unix stream connected to the abstract name NAME.
    ConnectAbstract(String),
    /// `device-socket`: socket(AF_UNIX) from a new thread under the filter of every
    /// device's needs (as the vsock device thread makes it).
    DeviceSocket,
    /// `vcpu-socket`: the same filter; vCPU 0 makes the call after its own filter.
    VcpuSocket,
}

impl SelfTest {
    pub fn parse(s: &str) -> Result<Self, String> {
        let path = |p: &str| {
            if p.is_empty() {
                Err(format!("`{s}`: an empty path"))
            } else {
                Ok(std::path::PathBuf::from(p))
            }
        };
        if let Some(p) = s.strip_prefix("open:") {
            return Ok(SelfTest::Open(path(p)?));
        }
        if let Some(p) = s.strip_prefix("connect:") {
            return Ok(SelfTest::Connect(path(p)?));
        }
        if let Some(p) = s.strip_prefix("connect-bound:") {
            return Ok(SelfTest::ConnectBound(path(p)?));
        }
        if let Some(n) = s.strip_prefix("connect-abstract:") {
            return Ok(SelfTest::ConnectAbstract(n.to_string()));
        }
        match s {
            "device-socket" => Ok(SelfTest::DeviceSocket),
            "vcpu-socket" => Ok(SelfTest::VcpuSocket),
            _ => Forbidden::parse(s).map(SelfTest::Call).map_err(|e| {
                format!("{e}, open:PATH, connect:PATH, connect-bound:PATH, connect-abstract:NAME, device-socket or vcpu-socket")
            }),
        }
    }

    /// Whether the filter under test is the one of every device's needs (the socket calls).
    pub fn needs_sockets(&self) -> bool {
        matches!(
            self,
            SelfTest::Connect(_)
                | SelfTest::ConnectBound(_)
                | SelfTest::ConnectAbstract(_)
                | SelfTest::DeviceSocket
                | SelfTest::VcpuSocket
        )
    }

    /// The directory to bind into the jail for the test, if any.
    pub fn bind(&self) -> Option<&std::path::Path> {
        match self {
            SelfTest::ConnectBound(p) => p.parent(),
            _ => None,
        }
    }

    /// Makes the call from a new thread (all but [`SelfTest::VcpuSocket`], which vCPU 0
    /// makes): (result, errno), when it returns.
    pub fn call(&self) -> Option<(i64, i32)> {
        let this = self.clone();
        let t = std::thread::Builder::new()
            .name("selftest".into())
            .spawn(move || match this {
                SelfTest::Call(f) => Some((f.call_here(), errno())),
                SelfTest::Open(p) => Some(open_path(&p)),
                SelfTest::Connect(p) | SelfTest::ConnectBound(p) => Some(connect_to(|a| {
                    fill_path(a, p.as_os_str().as_encoded_bytes())
                })),
                SelfTest::ConnectAbstract(n) => Some(connect_to(|a| {
                    let mut b = vec![0u8];
                    b.extend_from_slice(n.as_bytes());
                    fill_path(a, &b)
                })),
                SelfTest::DeviceSocket => Some(raw_socket()),
                SelfTest::VcpuSocket => None,
            });
        t.ok().and_then(|t| t.join().ok()).flatten()
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn open_path(p: &std::path::Path) -> (i64, i32) {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return (-1, libc::EINVAL);
    };
    // SAFETY: a NUL-terminated path opened read-only and closed at once.
    unsafe {
        let fd = libc::openat(libc::AT_FDCWD, c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        let e = errno();
        if fd >= 0 {
            libc::close(fd);
            return (i64::from(fd), 0);
        }
        (i64::from(fd), e)
    }
}

/// Copies `b` into `a.sun_path`; the address length, or None when it does not fit.
fn fill_path(a: &mut libc::sockaddr_un, b: &[u8]) -> Option<usize> {
    if b.len() >= a.sun_path.len() {
        return None;
    }
    for (d, s) in a.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    let plain = b.first() != Some(&0);
    Some(std::mem::size_of::<libc::sa_family_t>() + b.len() + usize::from(plain))
}

/// socket(AF_UNIX) + connect to the address `fill` writes: (connect's result, errno).
fn connect_to(fill: impl FnOnce(&mut libc::sockaddr_un) -> Option<usize>) -> (i64, i32) {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let Some(len) = fill(&mut a) else {
        return (-1, libc::ENAMETOOLONG);
    };
    // SAFETY: a socket made, connected to a valid address of `len` bytes, and closed.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return (i64::from(fd), errno());
        }
        let r = libc::connect(
            fd,
            (&a as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        );
        let e = if r == 0 { 0 } else { errno() };
        libc::close(fd);
        (i64::from(r), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selftest_names() {
        assert_eq!(
            SelfTest::parse("socket"),
            Ok(SelfTest::Call(Forbidden::Socket))
        );
        assert_eq!(
            SelfTest::parse("connect-bound:/a/b"),
            Ok(SelfTest::ConnectBound("/a/b".into()))
        );
        assert_eq!(
            SelfTest::parse("connect-bound:/a/b").unwrap().bind(),
            Some(Path::new("/a"))
        );
        assert!(SelfTest::parse("open:").is_err());
        assert!(SelfTest::parse("nothing").is_err());
        assert!(SelfTest::VcpuSocket.needs_sockets());
        assert!(!SelfTest::Open("/x".into()).needs_sockets());
    }

    #[test]
    fn vcpu_allowlist_is_the_broad_one_without_the_drops() {
        for needs in [DeviceNeeds::default(), DeviceNeeds::all()] {
            let broad = allowlist_for(0, needs);
            let vcpu = vcpu_allowlist(0, needs);
            for a in &vcpu {
                assert!(broad.contains(a), "{} not in the broad list", a.name);
                assert!(!VCPU_DROPS.contains(&a.name), "{}", a.name);
            }
            // Every drop names a syscall of the broad list with every device.
            assert_eq!(
                broad.len() - vcpu.len(),
                VCPU_DROPS
                    .iter()
                    .filter(|d| broad.iter().any(|a| a.name == **d))
                    .count()
            );
            assert!(!vcpu_filter(&vcpu).unwrap().is_empty());
        }
        let all = allowlist_for(
            0,
            DeviceNeeds {
                pin: true,
                ..DeviceNeeds::all()
            },
        );
        for d in VCPU_DROPS {
            assert!(all.iter().any(|a| a.name == d), "{d} is in no list");
        }
        // 36 − clone, poll, ppoll, rt_sigaction, eventfd2, seccomp, prctl; 44 − the 14 device
        // and thread ones (sched_setaffinity, the 15th, is in neither without pinning).
        assert_eq!(vcpu_allowlist(0, DeviceNeeds::default()).len(), 29);
        assert_eq!(vcpu_allowlist(0, DeviceNeeds::all()).len(), 30);
    }

    #[test]
    fn kvm_request_numbers_are_the_kernel_headers() {
        let want: BTreeMap<&str, u32> = [
            ("KVM_GET_MSR_INDEX_LIST", 0xc004_ae02),
            ("KVM_CHECK_EXTENSION", 0xae03),
            ("KVM_GET_SUPPORTED_CPUID", 0xc008_ae05),
            ("KVM_CREATE_VCPU", 0xae41),
            ("KVM_IRQFD", 0x4020_ae76),
            ("KVM_RUN", 0xae80),
            ("KVM_GET_REGS", 0x8090_ae81),
            ("KVM_SET_REGS", 0x4090_ae82),
            ("KVM_GET_SREGS", 0x8138_ae83),
            ("KVM_SET_SREGS", 0x4138_ae84),
            ("KVM_SET_MSRS", 0x4008_ae89),
            ("KVM_SET_FPU", 0x41a0_ae8d),
            ("KVM_GET_LAPIC", 0x8400_ae8e),
            ("KVM_SET_LAPIC", 0x4400_ae8f),
            ("KVM_SET_CPUID2", 0x4008_ae90),
            ("KVM_GET_MP_STATE", 0x8004_ae98),
        ]
        .into_iter()
        .collect();
        let got: BTreeMap<&str, u32> = kvm_ioctls().into_iter().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn allowlist_is_distinct_and_compiles() {
        let list = allowlist(std::process::id());
        let mut nrs: Vec<i64> = list.iter().map(|a| a.nr).collect();
        nrs.sort_unstable();
        nrs.dedup();
        assert_eq!(nrs.len(), list.len(), "a syscall listed twice");
        for forbidden in [
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_open,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_fork,
            libc::SYS_vfork,
            libc::SYS_clone3,
            libc::SYS_ptrace,
            libc::SYS_mount,
            libc::SYS_setuid,
            libc::SYS_kill,
        ] {
            assert!(!nrs.contains(&forbidden), "{forbidden} allowed");
        }
        // seccomp: only a new filter on this thread (no TSYNC, no listener, no other op).
        let seccomp = list.iter().find(|a| a.name == "seccomp").unwrap();
        assert_eq!(
            seccomp.rules,
            vec![vec![
                Arg::Eq {
                    index: 0,
                    value: SECCOMP_SET_MODE_FILTER
                },
                Arg::Eq { index: 1, value: 0 }
            ]]
        );
        for a in &list {
            assert!(!a.why.is_empty(), "{} has no reason", a.name);
        }
        let f = filters(&list).unwrap();
        assert_eq!(f.allowed, list.len());
        assert_eq!(f.allowed, 36);
        assert!(!f.allow.is_empty() && !f.enosys.is_empty());
        // Deterministic: the same list, the same program.
        assert_eq!(filters(&list).unwrap(), f);
        assert_eq!(allowlist_for(0, DeviceNeeds::default()), allowlist(0));
    }

    #[test]
    fn device_allowlist_grows_by_the_device_thread_only() {
        let list = allowlist_for(std::process::id(), DeviceNeeds::all());
        let mut nrs: Vec<i64> = list.iter().map(|a| a.nr).collect();
        nrs.sort_unstable();
        nrs.dedup();
        assert_eq!(nrs.len(), list.len(), "a syscall listed twice");
        let f = filters(&list).unwrap();
        assert_eq!(f.allowed, 44);
        for forbidden in [
            libc::SYS_open,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_fork,
            libc::SYS_ptrace,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_accept4,
        ] {
            assert!(!nrs.contains(&forbidden), "{forbidden} allowed");
        }
        // socket: AF_UNIX only.
        let socket = list.iter().find(|a| a.name == "socket").unwrap();
        assert_eq!(
            socket.rules,
            vec![vec![Arg::Eq {
                index: 0,
                value: libc::AF_UNIX as u32
            }]]
        );
        // Only blk: 36 + epoll (3) + blk (2).
        let blk = DeviceNeeds {
            thread: true,
            blk: true,
            vsock: false,
            pin: false,
        };
        assert_eq!(allowlist_for(0, blk).len(), 41);
        // --pin-vcpus: one more, for the calling thread only, and none in a vCPU's list.
        let pin = DeviceNeeds {
            pin: true,
            ..DeviceNeeds::default()
        };
        let list = allowlist_for(0, pin);
        assert_eq!(list.len(), 37);
        let set = list.iter().find(|a| a.name == "sched_setaffinity").unwrap();
        assert_eq!(set.rules, vec![vec![Arg::Eq { index: 0, value: 0 }]]);
        assert_eq!(
            vcpu_allowlist(0, pin),
            vcpu_allowlist(0, DeviceNeeds::default())
        );
    }

    #[test]
    fn status_seccomp_field() {
        assert_eq!(
            seccomp_mode("Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t2\n"),
            Some(2)
        );
        assert_eq!(seccomp_mode("Name:\tx\n"), None);
    }

    #[test]
    fn decimal_digits() {
        let mut b = [0u8; 20];
        assert_eq!(decimal(0, &mut b), b"0");
        assert_eq!(decimal(41, &mut b), b"41");
        assert_eq!(decimal(u64::MAX, &mut b), b"18446744073709551615");
    }

    #[test]
    fn error_kinds() {
        assert_eq!(
            SandboxError::RootTarget { what: "uid" }.kind(),
            "privilege-drop-failed"
        );
        let e = SandboxError::KvmAccess {
            uid: 65534,
            gid: 65534,
            path: "/dev/kvm".into(),
            owner: 0,
            group: 0,
            mode: 0o600,
        };
        assert_eq!(e.kind(), "kvm-access-denied");
        let m = e.to_string();
        assert!(
            m.contains("uid 65534 gid 65534") && m.contains("mode 600"),
            "{m}"
        );
    }
}
