//! The networking step: loopback up, and the optional `truecold.net` device.

use crate::error::InitError;
use std::io;
use std::net::Ipv4Addr;
use truecold_init::NetSpec;

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    r
}

struct Sock(libc::c_int);
impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: closing the socket this guard owns.
        unsafe { libc::close(self.0) };
    }
}

fn socket() -> io::Result<Sock> {
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Sock(fd))
}

fn ioctl(s: &Sock, req: libc::c_ulong, r: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: `r` is a valid ifreq for the SIOC* requests used here.
    if unsafe { libc::ioctl(s.0, req as _, r as *mut libc::ifreq) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_up(s: &Sock, dev: &str) -> io::Result<()> {
    let mut r = ifreq(dev);
    ioctl(s, libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe { r.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    ioctl(s, libc::SIOCSIFFLAGS, &mut r)
}

fn sockaddr(a: [u8; 4]) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size (16 bytes) on Linux.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn configure(s: &Sock, n: &NetSpec) -> io::Result<()> {
    let mut r = ifreq(&n.dev);
    r.ifr_ifru.ifru_addr = sockaddr(n.addr);
    ioctl(s, libc::SIOCSIFADDR, &mut r)?;
    let mut r = ifreq(&n.dev);
    r.ifr_ifru.ifru_netmask = sockaddr(n.netmask());
    ioctl(s, libc::SIOCSIFNETMASK, &mut r)?;
    set_up(s, &n.dev)
}

/// Brings `lo` up and configures `net` (`<dev>,<ip>/<prefix>`) when given; returns that
/// address (where the TCP proof listens).
pub fn bring_up(net: Option<&str>) -> Result<Option<Ipv4Addr>, InitError> {
    let s = socket().map_err(InitError::Loopback)?;
    set_up(&s, "lo").map_err(InitError::Loopback)?;
    if let Some(spec) = net {
        let n = NetSpec::parse(spec).map_err(|e| InitError::Network {
            spec: spec.into(),
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        configure(&s, &n).map_err(|source| InitError::Network {
            spec: spec.into(),
            source,
        })?;
        return Ok(Some(Ipv4Addr::from(n.addr)));
    }
    Ok(None)
}
