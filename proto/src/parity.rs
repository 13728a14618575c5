//! The parity contract's shared values (one definition for the VMM, guest-init and the
//! bench): the agent channel over virtio-vsock, the network pair on the per-launch tap, and
//! the per-launch workspace disk. See docs/parity.md for the contract itself.
//!
//! The agent channel speaks the serial transport's `TC1` lines (`ready`, the host's `nonce`,
//! `reply`, `record`) on one AF_VSOCK stream the guest opens to the host
//! ([`HOST_CID`]:[`AGENT_PORT`]). The VMM's hybrid vsock (Firecracker's convention) turns that
//! connection into a Unix-socket connection to `<uds>_<AGENT_PORT>`, where the bench listens.
//! Network readiness: guest-init listens on [`TCP_PORT`] at its address before it sends
//! `ready`; the host connects, writes a second `TC1 nonce` line and reads a `TC1 reply`
//! bound to the same boot id.

use core::fmt;
use std::net::Ipv4Addr;

/// The host's vsock context id (`VMADDR_CID_HOST`).
pub const HOST_CID: u32 = 2;
/// The guest's vsock context id (the device's `guest_cid`; 0–2 are reserved).
pub const GUEST_CID: u64 = 3;
/// The vsock port the guest connects to on the host for the agent channel.
pub const AGENT_PORT: u32 = 1024;
/// The TCP port guest-init listens on (on its network-pair address) for the network proof.
pub const TCP_PORT: u16 = 7070;
/// Where the parity kernel (vmlinux, bzImage, config) goes in the guest directory (`xtask guest`).
pub const PARITY_KERNEL_DIR: &str = "parity";
/// The workspace image's file name in the guest directory.
pub const WORKSPACE_IMAGE: &str = "workspace.img";
/// The guest device of the workspace disk (the first virtio-blk device).
pub const WORKSPACE_DEVICE: &str = "/dev/vda";
/// Where guest-init mounts the workspace.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// The workspace's filesystem.
pub const WORKSPACE_FSTYPE: &str = "ext4";
/// The file in the workspace image whose content guest-init checks (its SHA-256 is
/// [`WORKSPACE_SEED_SHA256`]): proof that the guest reads the image the host built.
pub const WORKSPACE_SEED_FILE: &str = "/workspace/truecold/seed";
/// The content of [`WORKSPACE_SEED_FILE`] (what `xtask guest` writes into the image).
pub const WORKSPACE_SEED: &[u8] = b"truecold workspace seed v1\n";
/// The guest's network device.
pub const GUEST_NET_DEV: &str = "eth0";
/// Longest Linux interface name (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;
/// How many network pairs exist (slots of [`NetPair::for_slot`]).
pub const NET_SLOTS: u32 = 1 << 14;

/// A per-launch point-to-point /30: the host's tap address and the guest's eth0 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NetPair {
    host: Ipv4Addr,
    guest: Ipv4Addr,
}

/// Why a network pair or an interface name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParityError {
    #[error("network slot {0} is out of range (0..{NET_SLOTS})")]
    Slot(u32),
    #[error("`{0}` is not a network pair (`<host ipv4>,<guest ipv4>` in one /30)")]
    Pair(String),
    #[error("`{0}` is not an interface name (1 to {IFNAME_MAX} of [a-z0-9_-])")]
    IfName(String),
}

impl NetPair {
    /// Prefix length of every pair.
    pub const PREFIX: u8 = 30;

    /// Slot `s` of 10.200.0.0/16: host `.4s+1`, guest `.4s+2`.
    pub fn for_slot(slot: u32) -> Result<Self, ParityError> {
        if slot >= NET_SLOTS {
            return Err(ParityError::Slot(slot));
        }
        let base = u32::from(Ipv4Addr::new(10, 200, 0, 0)) + slot * 4;
        Ok(NetPair {
            host: Ipv4Addr::from(base + 1),
            guest: Ipv4Addr::from(base + 2),
        })
    }

    /// Parses [`NetPair`]'s Display form `<host>,<guest>`: both in one /30, neither its
    /// network nor its broadcast address, distinct.
    pub fn parse(s: &str) -> Result<Self, ParityError> {
        let bad = || ParityError::Pair(s.into());
        let (h, g) = s.split_once(',').ok_or_else(bad)?;
        let host: Ipv4Addr = h.parse().map_err(|_| bad())?;
        let guest: Ipv4Addr = g.parse().map_err(|_| bad())?;
        let (hu, gu) = (u32::from(host), u32::from(guest));
        let ok = hu & !3 == gu & !3
            && hu != gu
            && [1, 2].contains(&(hu & 3))
            && [1, 2].contains(&(gu & 3));
        if !ok {
            return Err(bad());
        }
        Ok(NetPair { host, guest })
    }

    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    pub fn guest(&self) -> Ipv4Addr {
        self.guest
    }

    /// The guest's MAC: locally administered `02:74:` + the guest's IPv4 address
    /// (deterministic, distinct per pair). Every engine's virtio-net gives it.
    pub fn guest_mac(&self) -> [u8; 6] {
        let o = self.guest.octets();
        [0x02, 0x74, o[0], o[1], o[2], o[3]]
    }

    /// [`NetPair::guest_mac`] as the engines' configurations spell it: `02:74:0a:c8:00:02`.
    pub fn guest_mac_text(&self) -> String {
        self.guest_mac()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    }

    /// The netmask of [`NetPair::PREFIX`]: `255.255.255.252`.
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::MAX << (32 - u32::from(Self::PREFIX)))
    }

    /// The guest's `truecold.net` value: `eth0,<guest>/30`.
    pub fn guest_net_value(&self) -> String {
        format!("{GUEST_NET_DEV},{}/{}", self.guest, Self::PREFIX)
    }
}

impl fmt::Display for NetPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.host, self.guest)
    }
}

/// Checks a tap name: 1..=[`IFNAME_MAX`] bytes of `[a-z0-9_-]`.
pub fn check_ifname(name: &str) -> Result<(), ParityError> {
    let ok = !name.is_empty()
        && name.len() <= IFNAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ParityError::IfName(name.into()))
    }
}

/// The Unix socket path the VMM's hybrid vsock connects to for a guest connection to
/// `port`: `<uds>_<port>` (Firecracker's convention).
pub fn uds_port_path(uds: &std::path::Path, port: u32) -> std::path::PathBuf {
    let mut s = uds.as_os_str().to_owned();
    s.push(format!("_{port}"));
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_30s_and_read_back() {
        let a = NetPair::for_slot(0).unwrap();
        assert_eq!(a.to_string(), "10.200.0.1,10.200.0.2");
        assert_eq!(a.guest_net_value(), "eth0,10.200.0.2/30");
        let last = NetPair::for_slot(NET_SLOTS - 1).unwrap();
        assert_eq!(last.to_string(), "10.200.255.253,10.200.255.254");
        assert_eq!(NetPair::parse(&last.to_string()).unwrap(), last);
        assert_eq!(
            NetPair::for_slot(NET_SLOTS),
            Err(ParityError::Slot(NET_SLOTS))
        );
    }

    #[test]
    fn bad_pairs_and_names_are_refused() {
        for s in [
            "",
            "10.0.0.1",
            "10.0.0.1,10.0.0.1",
            "10.0.0.0,10.0.0.1",
            "10.0.0.1,10.0.0.3",
            "10.0.0.1,10.0.0.6",
            "10.0.0.1,x",
            "10.0.0.1,10.0.0.2/30",
        ] {
            assert!(NetPair::parse(s).is_err(), "{s}");
        }
        assert!(check_ifname("tc1a2b-3").is_ok());
        for s in ["", "Tc0", "a/b", "0123456789abcdef", "tap 0"] {
            assert!(check_ifname(s).is_err(), "{s}");
        }
    }

    #[test]
    fn uds_port_path_appends_the_port() {
        assert_eq!(
            uds_port_path(std::path::Path::new("/run/x/v.sock"), AGENT_PORT),
            std::path::PathBuf::from("/run/x/v.sock_1024")
        );
    }
}
