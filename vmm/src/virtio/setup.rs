//! Setting the devices up for a boot, before the seccomp filter: the backends opened
//! ([`Backends::open`]: the workspace image, the tap; needs privileges for the tap), then
//! the devices attached to the VM ([`attach`]: an irqfd per device, an ioeventfd per queue).
use std::io;
use std::path::PathBuf;

use kvm_ioctls::{IoEventAddress, VmFd};
use truecold_proto::parity::NetPair;
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::EventFd;

use super::blk::{Blk, FileDisk};
use super::net::{Net, Tap, TapError};
use super::rate::DeviceLimits;
use super::thread::VirtioDevices;
use super::vsock::Vsock;
use super::{window_base, VirtioDevice, DEVICE_IRQS, QUEUE_NOTIFY};
use crate::config::VirtioConfig;

/// Why the virtio devices could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum VirtioError {
    #[error("cannot open the workspace image {path} read-write")]
    WorkspaceOpen {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create the tap")]
    Tap(#[source] TapError),
    #[error("--tap needs --net-pair")]
    NoNetPair,
    #[error("cannot set up the virtio devices")]
    Setup(#[source] io::Error),
    #[error("cannot register the irqfd of IRQ {irq}")]
    Irqfd {
        irq: u32,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("{0} virtio devices, more than the {n} IRQs", n = DEVICE_IRQS.len())]
    TooMany(usize),
    #[error("cannot start the virtio device thread")]
    Thread(#[source] io::Error),
}

/// The kind of a VMM that could not create its tap (the bench then knows the interface of
/// that name, if any, is not the launch's).
pub const TAP_CREATE_FAILED: &str = "tap-create-failed";

impl VirtioError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            VirtioError::WorkspaceOpen { .. } => "workspace-open-failed",
            VirtioError::Tap(_) | VirtioError::NoNetPair => TAP_CREATE_FAILED,
            VirtioError::Setup(_)
            | VirtioError::Irqfd { .. }
            | VirtioError::TooMany(_)
            | VirtioError::Thread(_) => "virtio-setup-failed",
        }
    }
}

/// The host side of the devices, opened: what needs a path or a privilege.
#[derive(Default)]
pub struct Backends {
    pub disk: Option<FileDisk>,
    pub tap: Option<(Tap, NetPair)>,
    pub vsock_uds: Option<PathBuf>,
    /// Each device's rate limit.
    pub limits: DeviceLimits,
}

impl Backends {
    /// Opens what `cfg` asks for, in device order (blk, net, vsock).
    pub fn open(cfg: &VirtioConfig) -> Result<Backends, VirtioError> {
        let disk = match &cfg.workspace {
            Some(path) => {
                Some(
                    FileDisk::open(path).map_err(|source| VirtioError::WorkspaceOpen {
                        path: path.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let tap = match &cfg.tap {
            Some(name) => {
                let pair = cfg.net_pair.ok_or(VirtioError::NoNetPair)?;
                let tap =
                    Tap::create(name, pair.host(), NetPair::PREFIX).map_err(VirtioError::Tap)?;
                Some((tap, pair))
            }
            None => None,
        };
        Ok(Backends {
            disk,
            tap,
            vsock_uds: cfg.vsock_uds.clone(),
            limits: cfg.limits,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.disk.is_none() && self.tap.is_none() && self.vsock_uds.is_none()
    }

    /// The devices, in the order of [`VirtioConfig::device_names`].
    pub fn devices(self) -> Vec<(&'static str, Box<dyn VirtioDevice>)> {
        let mut v: Vec<(&'static str, Box<dyn VirtioDevice>)> = Vec::new();
        let l = self.limits;
        if let Some(d) = self.disk {
            v.push(("blk", Box::new(Blk::with_limit(Box::new(d), l.blk))));
        }
        if let Some((tap, pair)) = self.tap {
            let net = Net::with_limit(Box::new(tap), pair.guest_mac(), l.net_tx);
            v.push(("net", Box::new(net)));
        }
        if let Some(uds) = self.vsock_uds {
            v.push(("vsock", Box::new(Vsock::with_limit(uds, l.vsock_tx))));
        }
        v
    }
}

/// Attaches the devices to `vm`: device `i` raises IRQ [`DEVICE_IRQS`]`[i]` through an
/// irqfd; each queue's notify register is an ioeventfd (datamatch = the queue index) where
/// KVM has them (else the MMIO exit path writes the same eventfd). None without devices.
pub fn attach(
    vm: &VmFd,
    mem: &GuestMemoryMmap,
    backends: Backends,
) -> Result<Option<VirtioDevices>, VirtioError> {
    if backends.is_empty() {
        return Ok(None);
    }
    let devices = backends.devices();
    if devices.len() > DEVICE_IRQS.len() {
        return Err(VirtioError::TooMany(devices.len()));
    }
    let mut list = Vec::new();
    for (i, (name, dev)) in devices.into_iter().enumerate() {
        let irq = DEVICE_IRQS[i];
        let evt = EventFd::new(libc::EFD_NONBLOCK).map_err(VirtioError::Setup)?;
        vm.register_irqfd(&evt, irq)
            .map_err(|source| VirtioError::Irqfd { irq, source })?;
        list.push((name, dev, evt));
    }
    let devs = VirtioDevices::new(mem, list).map_err(VirtioError::Setup)?;
    for i in 0..devs.len() {
        let Some(t) = devs.transport(i) else { continue };
        let t = t.lock().unwrap_or_else(|p| p.into_inner());
        for (q, evt) in t.queue_evts().iter().enumerate() {
            let addr = IoEventAddress::Mmio(window_base(i) + QUEUE_NOTIFY);
            // Without it the notify is an MMIO exit that writes the same eventfd.
            let _ = vm.register_ioevent(evt, &addr, q as u32);
        }
    }
    Ok(Some(devs))
}
