//! A Linux tap device for a microVM's virtio-net, created new (never attached to an existing
//! interface), given the host's address and brought up: by truecold-vmm for its own device,
//! and by the bench for an engine that opens an existing tap by name (Firecracker), which it
//! leaves persistent for the launch and removes after the reap. Every call needs
//! CAP_NET_ADMIN.
//!
//! The tap has IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, a [`VNET_HDR_LEN`]-byte vnet header and
//! no offloads.

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

/// The `virtio_net_hdr_v1` length (VERSION_1: num_buffers always present).
pub const VNET_HDR_LEN: usize = 12;

/// Why the tap could not be created (kind `tap-create-failed`).
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    #[error("the interface {0} already exists (a tap must be new: it disappears with the VMM)")]
    Exists(String),
    #[error("cannot open /dev/net/tun")]
    Open(#[source] io::Error),
    #[error("{op} on tap {name} failed (creating a tap needs CAP_NET_ADMIN)")]
    Ioctl {
        op: &'static str,
        name: String,
        #[source]
        source: io::Error,
    },
}

/// The ifreq layout: name, then a 24-byte union (flags, or a sockaddr_in).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Self {
        let mut r = IfReq {
            name: [0; 16],
            data: [0; 24],
        };
        let n = name.len().min(15);
        r.name[..n].copy_from_slice(&name.as_bytes()[..n]);
        r
    }

    fn set_flags(&mut self, flags: i16) {
        self.data[..2].copy_from_slice(&flags.to_ne_bytes());
    }

    fn flags(&self) -> i16 {
        i16::from_ne_bytes([self.data[0], self.data[1]])
    }

    fn set_inet(&mut self, a: Ipv4Addr) {
        self.data = [0; 24];
        self.data[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        self.data[4..8].copy_from_slice(&a.octets());
    }
}

/// A tap device, gone when dropped (no TUNSETPERSIST).
pub struct Tap {
    file: File,
    name: String,
}

fn ioctl_ptr(fd: RawFd, req: libc::Ioctl, arg: *mut libc::c_void) -> io::Result<()> {
    // SAFETY: `arg` points at a live structure of the size the request expects (an ifreq
    // or an int), owned by the caller for the duration of the call.
    let r = unsafe { libc::ioctl(fd, req, arg) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Tap {
    /// Creates tap `name` with address `host`/`prefix`, up. Needs CAP_NET_ADMIN (before
    /// the privilege drop and the seccomp filter).
    pub fn create(name: &str, host: Ipv4Addr, prefix: u8) -> Result<Tap, TapError> {
        if std::path::Path::new("/sys/class/net").join(name).exists() {
            return Err(TapError::Exists(name.into()));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(TapError::Open)?;
        let err = |op: &'static str| {
            let name = name.to_string();
            move |source| TapError::Ioctl { op, name, source }
        };
        let fd = file.as_raw_fd();
        let mut req = IfReq::new(name);
        // IFF_TUN_EXCL: a tap of that name made since the check above is refused (EBUSY),
        // never attached to: a tap this returns is always new.
        req.set_flags(
            (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_TUN_EXCL) as i16,
        );
        ioctl_ptr(fd, libc::TUNSETIFF, (&mut req as *mut IfReq).cast()).map_err(|e| {
            if e.raw_os_error() == Some(libc::EBUSY) {
                TapError::Exists(name.into())
            } else {
                err("TUNSETIFF")(e)
            }
        })?;
        let mut hdr: libc::c_int = VNET_HDR_LEN as libc::c_int;
        ioctl_ptr(
            fd,
            libc::TUNSETVNETHDRSZ,
            (&mut hdr as *mut libc::c_int).cast(),
        )
        .map_err(err("TUNSETVNETHDRSZ"))?;
        // SAFETY: TUNSETOFFLOAD takes its argument by value (0: no offloads).
        if unsafe { libc::ioctl(fd, libc::TUNSETOFFLOAD as _, 0 as libc::c_ulong) } < 0 {
            return Err(err("TUNSETOFFLOAD")(io::Error::last_os_error()));
        }
        let tap = Tap {
            file,
            name: name.to_string(),
        };
        // SAFETY: socket(2) with constant arguments; the descriptor is owned below.
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if s < 0 {
            return Err(err("socket(AF_INET)")(io::Error::last_os_error()));
        }
        // SAFETY: `s` is a new descriptor nothing else owns.
        let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(s) };
        let sfd = sock.as_raw_fd();
        let mut r = IfReq::new(name);
        r.set_inet(host);
        ioctl_ptr(sfd, libc::SIOCSIFADDR, (&mut r as *mut IfReq).cast())
            .map_err(err("SIOCSIFADDR"))?;
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix.min(32)))
        };
        let mut r = IfReq::new(name);
        r.set_inet(Ipv4Addr::from(mask));
        ioctl_ptr(sfd, libc::SIOCSIFNETMASK, (&mut r as *mut IfReq).cast())
            .map_err(err("SIOCSIFNETMASK"))?;
        let mut r = IfReq::new(name);
        ioctl_ptr(sfd, libc::SIOCGIFFLAGS, (&mut r as *mut IfReq).cast())
            .map_err(err("SIOCGIFFLAGS"))?;
        let f = r.flags() | libc::IFF_UP as i16;
        r.set_flags(f);
        ioctl_ptr(sfd, libc::SIOCSIFFLAGS, (&mut r as *mut IfReq).cast())
            .map_err(err("SIOCSIFFLAGS"))?;
        Ok(tap)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates tap `name` as [`Tap::create`] does and leaves it behind this process's
    /// descriptor (`TUNSETPERSIST`), addressed and up: for an engine that opens an existing
    /// tap by name (Firecracker). [`Tap::remove_persistent`] removes it.
    pub fn create_persistent(name: &str, host: Ipv4Addr, prefix: u8) -> Result<(), TapError> {
        let tap = Tap::create(name, host, prefix)?;
        set_persist(&tap, true)
    }

    /// Removes the persistent tap `name` ([`Tap::create_persistent`]): attaches to it,
    /// clears `TUNSETPERSIST` and closes, so the kernel deletes it.
    pub fn remove_persistent(name: &str) -> Result<(), TapError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(TapError::Open)?;
        let mut req = IfReq::new(name);
        req.set_flags((libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as i16);
        ioctl_ptr(
            file.as_raw_fd(),
            libc::TUNSETIFF,
            (&mut req as *mut IfReq).cast(),
        )
        .map_err(|source| TapError::Ioctl {
            op: "TUNSETIFF",
            name: name.to_string(),
            source,
        })?;
        let tap = Tap {
            file,
            name: name.to_string(),
        };
        set_persist(&tap, false)
    }
}

/// `TUNSETPERSIST` on `tap`'s descriptor.
fn set_persist(tap: &Tap, on: bool) -> Result<(), TapError> {
    // SAFETY: TUNSETPERSIST takes its argument by value (0 or 1) on a tun descriptor.
    let r = unsafe {
        libc::ioctl(
            tap.file.as_raw_fd(),
            libc::TUNSETPERSIST as _,
            libc::c_ulong::from(on),
        )
    };
    if r < 0 {
        return Err(TapError::Ioctl {
            op: "TUNSETPERSIST",
            name: tap.name.clone(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

impl Tap {
    /// The tap's descriptor (one frame per read or write).
    pub fn file(&self) -> &File {
        &self.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Creating a tap needs root (CAP_NET_ADMIN) and /dev/net/tun: without them these tests
    /// fail, naming what provides them (never a silent pass).
    fn require_tun() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root && std::path::Path::new("/dev/net/tun").exists(),
            "the tap tests need root and /dev/net/tun: run them as root (`sudo -E cargo test \
             -p truecold-host`) on a kernel with the tun module (`modprobe tun`)"
        );
    }

    /// The tap exists while its descriptor is open and is gone after the drop.
    #[test]
    fn real_tap_lives_with_its_descriptor() {
        require_tun();
        let name = format!("tct{}", std::process::id() % 1_000_000);
        let sys = std::path::Path::new("/sys/class/net").join(&name);
        let tap = Tap::create(&name, Ipv4Addr::new(10, 200, 255, 1), 30).unwrap();
        assert_eq!(tap.name(), name);
        assert!(sys.exists());
        let flags = std::fs::read_to_string(sys.join("flags")).unwrap();
        let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap();
        assert_eq!(flags & 1, 1, "IFF_UP");
        // A second tap of the same name is refused while the first lives.
        assert!(matches!(
            Tap::create(&name, Ipv4Addr::new(10, 200, 255, 1), 30),
            Err(TapError::Exists(_))
        ));
        drop(tap);
        assert!(!sys.exists(), "tap {name} left behind");
    }

    /// A persistent tap outlives its creator's descriptor, addressed and up, and is gone
    /// after its removal.
    #[test]
    fn persistent_tap_outlives_its_descriptor_until_removed() {
        require_tun();
        let name = format!("tcp{}", std::process::id() % 1_000_000);
        let sys = std::path::Path::new("/sys/class/net").join(&name);
        Tap::create_persistent(&name, Ipv4Addr::new(10, 200, 255, 5), 30).unwrap();
        let left = sys.exists();
        let flags = std::fs::read_to_string(sys.join("flags")).unwrap_or_default();
        let removed = Tap::remove_persistent(&name);
        assert!(
            left,
            "the persistent tap {name} did not outlive its descriptor"
        );
        let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap();
        assert_eq!(flags & 1, 1, "IFF_UP");
        removed.unwrap();
        assert!(!sys.exists(), "tap {name} left behind");
        // Removing it again (a cleanup that runs twice) leaves nothing either.
        Tap::remove_persistent(&name).unwrap();
        assert!(!sys.exists(), "tap {name} made by a second removal");
    }
}
