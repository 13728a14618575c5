//! The jail (docs/security.md, in the spirit of Firecracker's jailer): when `truecold-vmm boot`
//! runs as root it contains itself at the sandbox point — after every descriptor it needs is
//! open (/dev/kvm, the VM, guest memory, the kernel loaded, the tap, the workspace image, the
//! report file, the held /proc and /sys files) and while it has one thread:
//!
//! 1. `unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)`: a mount namespace of its own, an
//!    empty network namespace (no AF_INET route, no host abstract UNIX socket; an open tap
//!    descriptor keeps working) and an IPC namespace;
//! 2. `/` made private recursively, an empty tmpfs mounted on `/tmp`, only [`JailPlan::binds`]
//!    (the vsock socket directory: the VMM connects to `<uds>_<port>` there) bind-mounted
//!    into it read-only at their own paths, the tmpfs made read-only, `pivot_root` into it
//!    and the old root detached: no other host path can be named any more;
//! 3. the drop to the unprivileged user (`truecold-vmm` from /etc/passwd, or `--uid/--gid`),
//!    checked like [`crate::sandbox::drop_privileges`] (the uid needs no access to /dev/kvm:
//!    the descriptors are open);
//!
//! then the boot installs the seccomp filters. Each step's duration is measured
//! ([`JailSteps`]) and carried in the report (`truecold_proto::report::Containment`).
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use truecold_proto::measure::now_ns;

use crate::sandbox::{self, SandboxError, UserDrop};

/// The system user the jail drops to by default (`scripts/deps.sh` creates it:
/// `useradd --system --no-create-home --shell /usr/sbin/nologin truecold-vmm`; the nested
/// harness writes it into L1's /etc/passwd), and where it is looked up.
pub use truecold_proto::report::{JAIL_PASSWD as PASSWD, JAIL_USER};

/// The directory the jail's tmpfs is mounted on (in the VMM's own mount namespace only)
/// before it becomes the root.
const NEW_ROOT: &str = "/tmp";

/// The namespaces the jail enters, as `unshare(2)` flags and by name (the report's).
pub const NAMESPACES: [(libc::c_int, &str); 3] = [
    (libc::CLONE_NEWNS, "mnt"),
    (libc::CLONE_NEWNET, "net"),
    (libc::CLONE_NEWIPC, "ipc"),
];

/// Why the jail could not be made (each a typed step; nothing falls back to an uncontained
/// boot).
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    #[error(
        "the jail's user `{name}` is not in {PASSWD}: scripts/deps.sh creates it (`useradd \
         --system --no-create-home --shell /usr/sbin/nologin {name}`); or pass --uid/--gid, \
         or --no-jail to boot uncontained"
    )]
    NoUser { name: &'static str },
    #[error("cannot read {PASSWD} to find the jail's user `{name}`")]
    Passwd {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{PASSWD}: the entry of `{name}` is malformed ({line})")]
    BadPasswd { name: &'static str, line: String },
    #[error(
        "the jail's user `{name}` is uid {uid} gid {gid}: root is no drop (recreate it with \
         scripts/deps.sh)"
    )]
    RootUser {
        name: &'static str,
        uid: u32,
        gid: u32,
    },
    #[error("the jail needs a single-threaded process; it has {threads} threads")]
    Threads { threads: u64 },
    #[error("cannot count this process's threads (/proc/self/status)")]
    ThreadCount(#[source] std::io::Error),
    #[error("jail path {path}: {why}")]
    Path { path: String, why: &'static str },
    #[error("cannot open {path} to bind it into the jail")]
    OpenBind {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC) failed (needs root, and a kernel \
         with mount, network and IPC namespaces: CONFIG_NET_NS, CONFIG_IPC_NS); --no-jail \
         boots uncontained"
    )]
    Unshare(#[source] std::io::Error),
    #[error("jail mount step `{step}` ({path}) failed")]
    Mount {
        step: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("pivot_root into the jail failed")]
    PivotRoot(#[source] std::io::Error),
    #[error("the drop to the jail's user failed")]
    Drop(#[source] SandboxError),
}

impl JailError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            JailError::NoUser { .. } => "jail-user-missing",
            JailError::Passwd { .. } | JailError::BadPasswd { .. } => "jail-user-unreadable",
            JailError::RootUser { .. } => "privilege-drop-failed",
            JailError::Threads { .. } | JailError::ThreadCount(_) => "jail-threads",
            JailError::Path { .. } | JailError::OpenBind { .. } => "jail-path-invalid",
            JailError::Unshare(_) => "jail-unshare-failed",
            JailError::Mount { .. } | JailError::PivotRoot(_) => "jail-mount-failed",
            JailError::Drop(e) => e.kind(),
        }
    }
}

/// Where the jail's ids come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserSource {
    /// [`JAIL_USER`], found in /etc/passwd.
    Named(&'static str),
    /// `--uid/--gid`.
    Explicit,
}

impl UserSource {
    /// The report's word for it.
    pub fn describe(&self) -> String {
        match self {
            UserSource::Named(n) => (*n).to_string(),
            UserSource::Explicit => "--uid/--gid".into(),
        }
    }
}

/// What the jail will be: the user and the paths bind-mounted into its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JailPlan {
    pub uid: u32,
    pub gid: u32,
    pub source: UserSource,
    /// Absolute directories (canonical) that the launch still needs by path after the
    /// descriptors are open: the vsock socket directory.
    pub binds: Vec<PathBuf>,
}

/// (uid, gid) of `name` in passwd text `text` (pure).
pub fn find_user(text: &str, name: &'static str) -> Result<(u32, u32), JailError> {
    for line in text.lines() {
        let mut f = line.split(':');
        if f.next() != Some(name) {
            continue;
        }
        let bad = || JailError::BadPasswd {
            name,
            line: line.to_string(),
        };
        let _password = f.next().ok_or_else(bad)?;
        let uid = f.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let gid = f.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        if uid == 0 || gid == 0 {
            return Err(JailError::RootUser { name, uid, gid });
        }
        return Ok((uid, gid));
    }
    Err(JailError::NoUser { name })
}

/// [`JAIL_USER`]'s ids, from /etc/passwd.
pub fn lookup_user() -> Result<(u32, u32), JailError> {
    let text = std::fs::read_to_string(PASSWD).map_err(|source| JailError::Passwd {
        name: JAIL_USER,
        source,
    })?;
    find_user(&text, JAIL_USER)
}

/// The directory a vsock socket path `uds` lives in, canonical (the jail binds it).
pub fn socket_dir(uds: &Path) -> Result<PathBuf, JailError> {
    let bad = |why| JailError::Path {
        path: uds.display().to_string(),
        why,
    };
    let parent = match uds.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&parent).map_err(|_| bad("its directory does not exist"))?;
    if dir == Path::new("/") {
        return Err(bad(
            "a socket directory of / would bind the whole host root",
        ));
    }
    Ok(dir)
}

/// How long each step took, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JailSteps {
    pub unshare_ns: u64,
    pub mounts_ns: u64,
    pub drop_ns: u64,
}

/// What [`enter`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entered {
    pub user: UserDrop,
    pub steps: JailSteps,
}

/// The threads of this process (`Threads:` of /proc/self/status).
fn thread_count() -> Result<u64, JailError> {
    let s = std::fs::read_to_string("/proc/self/status").map_err(JailError::ThreadCount)?;
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:")?.trim().parse().ok())
        .ok_or_else(|| {
            JailError::ThreadCount(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "no Threads: line",
            ))
        })
}

fn cstr(p: &Path) -> Result<CString, JailError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| JailError::Path {
        path: p.display().to_string(),
        why: "contains a NUL byte",
    })
}

fn os_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// mount(2) with optional source and type; `step` names it in the error.
fn mount(
    step: &'static str,
    source: Option<&CString>,
    target: &CString,
    fstype: Option<&CString>,
    flags: libc::c_ulong,
    data: Option<&CString>,
) -> Result<(), JailError> {
    let p = |o: Option<&CString>| o.map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    let r = unsafe { libc::mount(p(source), target.as_ptr(), p(fstype), flags, p(data).cast()) };
    if r != 0 {
        return Err(JailError::Mount {
            step,
            path: target.to_string_lossy().into_owned(),
            source: os_err(),
        });
    }
    Ok(())
}

/// Creates `dir` and its parents (mode 0755) inside the jail's tmpfs.
fn mkdirs(dir: &Path) -> Result<(), JailError> {
    let mut at = PathBuf::new();
    for c in dir.components() {
        at.push(c);
        let c = cstr(&at)?;
        // SAFETY: `c` is a NUL-terminated path.
        if unsafe { libc::mkdir(c.as_ptr(), 0o755) } != 0 {
            let e = os_err();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(JailError::Mount {
                    step: "mkdir",
                    path: at.display().to_string(),
                    source: e,
                });
            }
        }
    }
    Ok(())
}

/// Enters the jail of `plan` (see the module's steps 1–3). Call it once, with one thread,
/// after every descriptor the rest of the process needs is open. Irreversible.
pub fn enter(plan: &JailPlan) -> Result<Entered, JailError> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(JailError::Threads { threads });
    }
    for b in &plan.binds {
        if !b.is_absolute() {
            return Err(JailError::Path {
                path: b.display().to_string(),
                why: "not absolute",
            });
        }
    }
    let t0 = now_ns();
    let flags = NAMESPACES.iter().fold(0, |a, (f, _)| a | f);
    // SAFETY: integer argument only; the process has one thread.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(JailError::Unshare(os_err()));
    }
    let t1 = now_ns();

    // The sources, held by descriptor before any mount can hide them (a bind under /tmp);
    // opened in the new namespace (a bind from another namespace's mount is refused).
    let mut sources = Vec::with_capacity(plan.binds.len());
    for b in &plan.binds {
        let f = std::fs::File::open(b).map_err(|source| JailError::OpenBind {
            path: b.display().to_string(),
            source,
        })?;
        sources.push((b, f));
    }
    let root = cstr(Path::new("/"))?;
    mount(
        "make / private",
        None,
        &root,
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let new_root = Path::new(NEW_ROOT);
    let new_root_c = cstr(new_root)?;
    let tmpfs = cstr(Path::new("tmpfs"))?;
    let opts = cstr(Path::new("size=64k,nr_inodes=64,mode=0755"))?;
    let hard = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(
        "tmpfs",
        Some(&tmpfs),
        &new_root_c,
        Some(&tmpfs),
        hard,
        Some(&opts),
    )?;
    for (b, f) in &sources {
        use std::os::fd::AsRawFd;
        let rel = b.strip_prefix("/").unwrap_or(b);
        let target = new_root.join(rel);
        mkdirs(&target)?;
        let target = cstr(&target)?;
        let src = cstr(Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())))?;
        mount("bind", Some(&src), &target, None, libc::MS_BIND, None)?;
        mount(
            "bind read-only",
            None,
            &target,
            None,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | hard,
            None,
        )?;
    }
    mount(
        "tmpfs read-only",
        None,
        &new_root_c,
        None,
        libc::MS_REMOUNT | libc::MS_RDONLY | hard,
        None,
    )?;
    drop(sources);
    let dot = cstr(Path::new("."))?;
    // SAFETY: NUL-terminated paths; chdir, pivot_root (the new root stacked under the old
    // one at "."), then the old root detached from "." and the working directory set to /.
    unsafe {
        if libc::chdir(new_root_c.as_ptr()) != 0 {
            return Err(JailError::PivotRoot(os_err()));
        }
        if libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) != 0 {
            return Err(JailError::PivotRoot(os_err()));
        }
        if libc::umount2(dot.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(JailError::Mount {
                step: "detach the old root",
                path: ".".into(),
                source: os_err(),
            });
        }
        if libc::chdir(root.as_ptr()) != 0 {
            return Err(JailError::PivotRoot(os_err()));
        }
    }
    let t2 = now_ns();

    let user = sandbox::drop_to(plan.uid, plan.gid).map_err(JailError::Drop)?;
    let t3 = now_ns();
    Ok(Entered {
        user,
        steps: JailSteps {
            unshare_ns: t1 - t0,
            mounts_ns: t2 - t1,
            drop_ns: t3 - t2,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_lookup() {
        let text = "root:x:0:0:root:/root:/bin/bash\n\
                    truecold-vmm:x:998:997::/nonexistent:/usr/sbin/nologin\n";
        assert_eq!(find_user(text, JAIL_USER).unwrap(), (998, 997));
        let e = find_user("root:x:0:0::/:/bin/sh\n", JAIL_USER).unwrap_err();
        assert_eq!(e.kind(), "jail-user-missing");
        assert!(e.to_string().contains("scripts/deps.sh"), "{e}");
        let e = find_user("truecold-vmm:x:0:0::/:/bin/sh\n", JAIL_USER).unwrap_err();
        assert_eq!(e.kind(), "privilege-drop-failed");
        let e = find_user("truecold-vmm:x:abc:1::/:/bin/sh\n", JAIL_USER).unwrap_err();
        assert_eq!(e.kind(), "jail-user-unreadable");
        // A longer name with the same prefix is not the user.
        let e = find_user("truecold-vmm2:x:5:5::/:/bin/sh\n", JAIL_USER).unwrap_err();
        assert_eq!(e.kind(), "jail-user-missing");
    }

    #[test]
    fn socket_dir_is_the_parent_canonical() {
        let d = std::env::temp_dir().canonicalize().unwrap();
        assert_eq!(socket_dir(&d.join("v.sock")).unwrap(), d);
        assert!(socket_dir(Path::new("/v.sock")).is_err());
        assert!(socket_dir(Path::new("/nonexistent-truecold/v.sock")).is_err());
    }
}
