//! The virtio-MMIO transport, virtio 1.x ("version 2") register file: identification, the
//! feature pages (VIRTIO_F_VERSION_1 required), the status state machine, the queue
//! registers (into `virtio_queue::Queue`), InterruptStatus/ACK and the device configuration
//! at 0x100, delegated to the device. Register reads and writes come from the vCPU threads
//! (MMIO exits); queue work happens on the device thread ([`MmioTransport::handle`]).
use std::sync::Arc;

use virtio_queue::{Queue, QueueT};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::epoll::Epoll;
use vmm_sys_util::eventfd::EventFd;

use super::{
    Ctx, Event, Faults, Interrupt, Poll, VirtioDevice, F_VERSION_1, INT_CONFIG, INT_VRING,
};

pub const MAGIC_VALUE: u64 = 0x000;
pub const VERSION: u64 = 0x004;
pub const DEVICE_ID: u64 = 0x008;
pub const VENDOR_ID: u64 = 0x00c;
pub const DEVICE_FEATURES: u64 = 0x010;
pub const DEVICE_FEATURES_SEL: u64 = 0x014;
pub const DRIVER_FEATURES: u64 = 0x020;
pub const DRIVER_FEATURES_SEL: u64 = 0x024;
pub const QUEUE_SEL: u64 = 0x030;
pub const QUEUE_NUM_MAX: u64 = 0x034;
pub const QUEUE_NUM: u64 = 0x038;
pub const QUEUE_READY: u64 = 0x044;
pub const QUEUE_NOTIFY: u64 = 0x050;
pub const INTERRUPT_STATUS: u64 = 0x060;
pub const INTERRUPT_ACK: u64 = 0x064;
pub const STATUS: u64 = 0x070;
pub const QUEUE_DESC_LOW: u64 = 0x080;
pub const QUEUE_DESC_HIGH: u64 = 0x084;
pub const QUEUE_DRIVER_LOW: u64 = 0x090;
pub const QUEUE_DRIVER_HIGH: u64 = 0x094;
pub const QUEUE_DEVICE_LOW: u64 = 0x0a0;
pub const QUEUE_DEVICE_HIGH: u64 = 0x0a4;
pub const CONFIG_GENERATION: u64 = 0x0fc;
pub const CONFIG: u64 = 0x100;

/// "virt", little-endian.
pub const MAGIC: u32 = 0x7472_6976;
/// truecold's vendor id ("TCLD").
pub const VENDOR: u32 = 0x444c_4354;

pub const S_ACKNOWLEDGE: u32 = 1;
pub const S_DRIVER: u32 = 2;
pub const S_DRIVER_OK: u32 = 4;
pub const S_FEATURES_OK: u32 = 8;
pub const S_NEEDS_RESET: u32 = 64;
pub const S_FAILED: u32 = 128;

/// One device behind its MMIO window.
pub struct MmioTransport {
    device: Box<dyn VirtioDevice>,
    queues: Vec<Queue>,
    queue_evts: Vec<EventFd>,
    interrupt: Arc<Interrupt>,
    mem: GuestMemoryMmap,
    epoll: Arc<Epoll>,
    index: u32,
    device_features_sel: u32,
    driver_features_sel: u32,
    acked: u64,
    queue_sel: u32,
    status: u32,
    activated: bool,
    /// Refused chains and register misuse.
    pub faults: Faults,
    /// Register accesses the transport ignored (bad width, unknown offset, wrong state).
    pub ignored_accesses: u64,
    /// The clock each event's [`Ctx`] is stamped with ([`super::MONOTONIC`] but in tests).
    clock: super::Clock,
}

impl MmioTransport {
    /// What the device did so far, as `name` ([`super::DeviceReport`]).
    pub fn report(&self, name: &str) -> super::DeviceReport {
        super::DeviceReport {
            name: name.to_string(),
            chains_ok: self.faults.chains_ok,
            refused: self.faults.refused.clone(),
            ignored_accesses: self.ignored_accesses,
            counters: self
                .device
                .counters()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }

    /// `device` as device number `index` of the device thread's `epoll`, its interrupt on
    /// `interrupt`. Creates one eventfd per queue (the boot registers them as ioeventfds).
    pub fn new(
        device: Box<dyn VirtioDevice>,
        mem: GuestMemoryMmap,
        interrupt: Arc<Interrupt>,
        epoll: Arc<Epoll>,
        index: u32,
    ) -> std::io::Result<Self> {
        let mut queues = Vec::new();
        let mut queue_evts = Vec::new();
        for &max in device.queue_max_sizes() {
            queues.push(
                Queue::new(max)
                    .map_err(|e| std::io::Error::other(format!("queue of {max}: {e}")))?,
            );
            queue_evts.push(EventFd::new(libc::EFD_NONBLOCK)?);
        }
        Ok(MmioTransport {
            device,
            queues,
            queue_evts,
            interrupt,
            mem,
            epoll,
            index,
            device_features_sel: 0,
            driver_features_sel: 0,
            acked: 0,
            queue_sel: 0,
            status: 0,
            activated: false,
            faults: Faults::default(),
            ignored_accesses: 0,
            clock: super::MONOTONIC,
        })
    }

    /// The same transport stamping its events with `clock` ([`super::Clock`]).
    pub fn set_clock(&mut self, clock: super::Clock) {
        self.clock = clock;
    }

    /// Each queue's notification eventfd.
    pub fn queue_evts(&self) -> &[EventFd] {
        &self.queue_evts
    }

    pub fn interrupt(&self) -> &Arc<Interrupt> {
        &self.interrupt
    }

    pub fn device(&self) -> &dyn VirtioDevice {
        self.device.as_ref()
    }

    pub fn device_mut(&mut self) -> &mut dyn VirtioDevice {
        self.device.as_mut()
    }

    pub fn status(&self) -> u32 {
        self.status
    }

    pub fn is_activated(&self) -> bool {
        self.activated
    }

    pub fn acked_features(&self) -> u64 {
        self.acked
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    /// The QueueSel register as the driver last wrote it.
    pub fn queue_sel(&self) -> u32 {
        self.queue_sel
    }

    fn selected(&mut self) -> Option<&mut Queue> {
        self.queues.get_mut(self.queue_sel as usize)
    }

    fn queue_setup_allowed(&self) -> bool {
        self.status & S_FEATURES_OK != 0 && self.status & S_DRIVER_OK == 0
    }

    /// A register read of `data.len()` bytes at `offset` in the window.
    pub fn read(&mut self, offset: u64, data: &mut [u8]) {
        if offset >= CONFIG {
            data.fill(0);
            self.device.read_config(offset - CONFIG, data);
            return;
        }
        if data.len() != 4 {
            self.ignored_accesses += 1;
            data.fill(0);
            return;
        }
        let v: u32 = match offset {
            MAGIC_VALUE => MAGIC,
            VERSION => 2,
            DEVICE_ID => self.device.device_type(),
            VENDOR_ID => VENDOR,
            DEVICE_FEATURES => match self.device_features_sel {
                0 => self.device.features() as u32,
                1 => (self.device.features() >> 32) as u32,
                _ => 0,
            },
            QUEUE_NUM_MAX => self
                .queues
                .get(self.queue_sel as usize)
                .map_or(0, |q| u32::from(q.max_size())),
            QUEUE_READY => self
                .queues
                .get(self.queue_sel as usize)
                .map_or(0, |q| u32::from(q.ready())),
            INTERRUPT_STATUS => self.interrupt.status(),
            STATUS => self.status,
            CONFIG_GENERATION => 0,
            _ => {
                self.ignored_accesses += 1;
                0
            }
        };
        data.copy_from_slice(&v.to_le_bytes());
    }

    /// A register write of `data` at `offset` in the window.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if offset >= CONFIG {
            if self.status & S_DRIVER != 0 {
                self.device.write_config(offset - CONFIG, data);
            } else {
                self.ignored_accesses += 1;
            }
            return;
        }
        let Ok(bytes) = <[u8; 4]>::try_from(data) else {
            self.ignored_accesses += 1;
            return;
        };
        let v = u32::from_le_bytes(bytes);
        let setup = self.queue_setup_allowed();
        let ok = match offset {
            DEVICE_FEATURES_SEL => {
                self.device_features_sel = v;
                true
            }
            DRIVER_FEATURES_SEL => {
                self.driver_features_sel = v;
                true
            }
            DRIVER_FEATURES if self.status & S_DRIVER != 0 && self.status & S_FEATURES_OK == 0 => {
                match self.driver_features_sel {
                    0 => self.acked = (self.acked & !0xffff_ffff) | u64::from(v),
                    1 => self.acked = (self.acked & 0xffff_ffff) | (u64::from(v) << 32),
                    _ => {}
                }
                true
            }
            QUEUE_SEL => {
                self.queue_sel = v;
                true
            }
            QUEUE_NUM if setup => match self.selected() {
                Some(q) => {
                    // Refused sizes (0, above the maximum, not a power of two) keep the old
                    // one; Queue::is_valid then decides at DRIVER_OK.
                    let _ = v
                        .try_into()
                        .map_err(|_| ())
                        .and_then(|n: u16| q.try_set_size(n).map_err(|_| ()));
                    true
                }
                None => false,
            },
            QUEUE_READY if setup => match self.selected() {
                Some(q) => {
                    q.set_ready(v == 1);
                    true
                }
                None => false,
            },
            QUEUE_DESC_LOW | QUEUE_DESC_HIGH | QUEUE_DRIVER_LOW | QUEUE_DRIVER_HIGH
            | QUEUE_DEVICE_LOW | QUEUE_DEVICE_HIGH
                if setup =>
            {
                let high = offset & 4 != 0;
                let (lo, hi) = if high {
                    (None, Some(v))
                } else {
                    (Some(v), None)
                };
                match self.selected() {
                    Some(q) => {
                        match offset & !4 {
                            QUEUE_DESC_LOW => q.set_desc_table_address(lo, hi),
                            QUEUE_DRIVER_LOW => q.set_avail_ring_address(lo, hi),
                            _ => q.set_used_ring_address(lo, hi),
                        }
                        true
                    }
                    None => false,
                }
            }
            QUEUE_NOTIFY => {
                // Reaches here only when the ioeventfd is not registered (tests, or a host
                // without KVM_IOEVENTFD): same effect.
                match self.queue_evts.get(v as usize) {
                    Some(e) => e.write(1).is_ok(),
                    None => false,
                }
            }
            INTERRUPT_ACK => {
                self.interrupt.ack(v);
                true
            }
            STATUS => {
                self.set_status(v);
                true
            }
            _ => false,
        };
        if !ok {
            self.ignored_accesses += 1;
        }
    }

    /// The status state machine: 0 resets; otherwise bits are only added, in order
    /// (ACKNOWLEDGE → DRIVER → FEATURES_OK → DRIVER_OK), FAILED any time; anything else is
    /// ignored. FEATURES_OK holds only for a subset of the offered features that includes
    /// VIRTIO_F_VERSION_1; DRIVER_OK activates the device when every queue is valid, else
    /// sets NEEDS_RESET.
    fn set_status(&mut self, v: u32) {
        if v == 0 {
            self.reset();
            return;
        }
        if v & S_FAILED != 0 {
            self.status |= S_FAILED;
            return;
        }
        let old = self.status;
        if v & old != old {
            return; // a bit cleared without a reset
        }
        let added = v & !old;
        let ok = match added {
            S_ACKNOWLEDGE => old == 0,
            S_DRIVER => old == S_ACKNOWLEDGE,
            S_FEATURES_OK => {
                old == S_ACKNOWLEDGE | S_DRIVER
                    && self.acked & !self.device.features() == 0
                    && self.acked & F_VERSION_1 != 0
            }
            S_DRIVER_OK => old == S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK,
            _ => false,
        };
        if !ok {
            self.ignored_accesses += 1;
            return;
        }
        if added == S_DRIVER_OK {
            let mem = &self.mem;
            if !self.queues.iter().all(|q| q.is_valid(mem)) {
                self.status |= S_NEEDS_RESET;
                return;
            }
            self.status = v;
            self.activated = true;
            self.device.activate(self.acked);
            // Chains the driver made available before DRIVER_OK: look at every queue once.
            for e in &self.queue_evts {
                let _ = e.write(1);
            }
            return;
        }
        self.status = v;
    }

    fn reset(&mut self) {
        let poll = Poll::new(&self.epoll, self.index);
        self.device.reset(&poll);
        for q in &mut self.queues {
            q.reset();
        }
        self.status = 0;
        self.acked = 0;
        self.device_features_sel = 0;
        self.driver_features_sel = 0;
        self.queue_sel = 0;
        self.activated = false;
        self.interrupt.ack(u32::MAX);
    }

    /// Serves one event on the device thread (nothing before DRIVER_OK); raises the
    /// interrupt when a used buffer asks for one. A queue that cannot be used at all
    /// ([`Ctx::broken`]) stops the device: NEEDS_RESET is set, the configuration interrupt
    /// raised, and nothing more is served until the driver resets it (status 0).
    pub fn handle(&mut self, ev: Event) {
        if !self.activated {
            return;
        }
        let poll = Poll::new(&self.epoll, self.index);
        let mut cx =
            Ctx::new(&self.mem, &mut self.queues, &poll, &mut self.faults).at((self.clock)());
        self.device.handle(&mut cx, ev);
        let (notify, broken) = (cx.needs_interrupt(), cx.broken());
        // A full eventfd counter is the only failure of a raise, and then the line is raised.
        if notify {
            let _ = self.interrupt.raise(INT_VRING);
        }
        if broken.is_some() {
            self.status |= S_NEEDS_RESET;
            self.activated = false;
            let _ = self.interrupt.raise(INT_CONFIG);
        }
    }

    /// When the device wants an [`Event::Timer`] (on its clock, ns; only while activated).
    pub fn wake_at(&self) -> Option<u64> {
        if self.activated {
            self.device.wake_at()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::blk::{Blk, MemDisk};
    use crate::virtio::testutil::mem;
    use vm_memory::GuestAddress;

    fn transport() -> MmioTransport {
        let disk = MemDisk::new(vec![0u8; 4096]);
        let dev = Blk::new(Box::new(disk));
        let irq = Arc::new(Interrupt::new(EventFd::new(libc::EFD_NONBLOCK).unwrap()));
        MmioTransport::new(
            Box::new(dev),
            mem(),
            irq,
            Arc::new(Epoll::new().unwrap()),
            0,
        )
        .unwrap()
    }

    fn r(t: &mut MmioTransport, off: u64) -> u32 {
        let mut b = [0u8; 4];
        t.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    fn w(t: &mut MmioTransport, off: u64, v: u32) {
        t.write(off, &v.to_le_bytes());
    }

    /// Linux's virtio_mmio probe + virtio core + find_vqs, register by register.
    fn linux_probe(t: &mut MmioTransport, features_hi: u32) -> u32 {
        assert_eq!(r(t, MAGIC_VALUE), MAGIC);
        assert_eq!(r(t, VERSION), 2);
        assert_eq!(r(t, DEVICE_ID), 2);
        let _ = r(t, VENDOR_ID);
        w(t, STATUS, 0);
        w(t, STATUS, S_ACKNOWLEDGE);
        w(t, STATUS, S_ACKNOWLEDGE | S_DRIVER);
        w(t, DEVICE_FEATURES_SEL, 1);
        let hi = r(t, DEVICE_FEATURES);
        assert_eq!(hi & 1, 1, "VIRTIO_F_VERSION_1 offered");
        w(t, DEVICE_FEATURES_SEL, 0);
        let lo = r(t, DEVICE_FEATURES);
        w(t, DRIVER_FEATURES_SEL, 1);
        w(t, DRIVER_FEATURES, features_hi);
        w(t, DRIVER_FEATURES_SEL, 0);
        w(t, DRIVER_FEATURES, lo);
        w(t, STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK);
        let st = r(t, STATUS);
        if st & S_FEATURES_OK == 0 {
            return st;
        }
        // One queue at 0x1000 (desc), 0x2000 (avail), 0x3000 (used).
        w(t, QUEUE_SEL, 0);
        assert_eq!(r(t, QUEUE_READY), 0);
        let max = r(t, QUEUE_NUM_MAX);
        assert!(max >= 16);
        w(t, QUEUE_NUM, 16);
        w(t, QUEUE_DESC_LOW, 0x1000);
        w(t, QUEUE_DESC_HIGH, 0);
        w(t, QUEUE_DRIVER_LOW, 0x2000);
        w(t, QUEUE_DRIVER_HIGH, 0);
        w(t, QUEUE_DEVICE_LOW, 0x3000);
        w(t, QUEUE_DEVICE_HIGH, 0);
        w(t, QUEUE_READY, 1);
        assert_eq!(r(t, QUEUE_READY), 1);
        w(
            t,
            STATUS,
            S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK,
        );
        r(t, STATUS)
    }

    #[test]
    fn linux_probe_sequence_activates() {
        let mut t = transport();
        let st = linux_probe(&mut t, 1);
        assert_eq!(st, 0xf);
        assert!(t.is_activated());
        assert_eq!(t.acked_features() & F_VERSION_1, F_VERSION_1);
        // The activation looks at the queue once.
        assert_eq!(t.queue_evts()[0].read().unwrap(), 1);
        // Config: the capacity (8 sectors of a 4 KiB disk), by byte and by word.
        let mut b = [0u8; 8];
        t.read(CONFIG, &mut b);
        assert_eq!(u64::from_le_bytes(b), 8);
        let mut one = [0u8; 1];
        t.read(CONFIG, &mut one);
        assert_eq!(one[0], 8);
        // A notify write reaches the queue's eventfd (no ioeventfd in a test).
        w(&mut t, QUEUE_NOTIFY, 0);
        assert_eq!(t.queue_evts()[0].read().unwrap(), 1);
        // Queue registers are frozen after DRIVER_OK.
        let before = t.ignored_accesses;
        w(&mut t, QUEUE_NUM, 8);
        assert_eq!(t.ignored_accesses, before + 1);
        // Reset.
        w(&mut t, STATUS, 0);
        assert_eq!(r(&mut t, STATUS), 0);
        assert!(!t.is_activated());
        w(&mut t, QUEUE_SEL, 0);
        assert_eq!(r(&mut t, QUEUE_READY), 0);
    }

    #[test]
    fn features_without_version_1_are_refused() {
        let mut t = transport();
        let st = linux_probe(&mut t, 0);
        assert_eq!(st & S_FEATURES_OK, 0);
        assert!(!t.is_activated());
        // Unoffered features are refused too.
        let mut t = transport();
        let st = linux_probe(&mut t, 1 | 0x8000_0000);
        assert_eq!(st & S_FEATURES_OK, 0);
    }

    #[test]
    fn status_bits_in_order_only_and_invalid_queues_need_reset() {
        let mut t = transport();
        w(&mut t, STATUS, S_DRIVER);
        assert_eq!(r(&mut t, STATUS), 0, "DRIVER before ACKNOWLEDGE");
        w(&mut t, STATUS, S_ACKNOWLEDGE);
        w(&mut t, STATUS, S_ACKNOWLEDGE | S_DRIVER | S_DRIVER_OK);
        assert_eq!(r(&mut t, STATUS), S_ACKNOWLEDGE, "two bits at once");
        w(&mut t, STATUS, S_ACKNOWLEDGE | S_DRIVER);
        w(&mut t, DRIVER_FEATURES_SEL, 1);
        w(&mut t, DRIVER_FEATURES, 1);
        w(&mut t, STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK);
        // A queue outside guest memory.
        w(&mut t, QUEUE_SEL, 0);
        w(&mut t, QUEUE_NUM, 16);
        w(&mut t, QUEUE_DESC_LOW, 0);
        w(&mut t, QUEUE_DESC_HIGH, 0x10);
        w(&mut t, QUEUE_READY, 1);
        // A bogus queue selector reads 0 and ignores writes.
        w(&mut t, QUEUE_SEL, 7);
        assert_eq!(r(&mut t, QUEUE_NUM_MAX), 0);
        w(&mut t, QUEUE_READY, 1);
        w(&mut t, STATUS, 0xf);
        assert_eq!(r(&mut t, STATUS) & S_NEEDS_RESET, S_NEEDS_RESET);
        assert!(!t.is_activated());
        // Odd widths and unknown offsets never panic.
        let mut two = [0u8; 2];
        t.read(STATUS, &mut two);
        t.write(STATUS, &[1, 2, 3]);
        t.read(0x0ff0, &mut [0u8; 8]);
        t.read(0xffc, &mut [0u8; 4]);
        t.write(0x200, &[0xff; 4]);
        assert!(t.ignored_accesses > 0);
    }

    #[test]
    fn interrupt_status_and_ack() {
        let mut t = transport();
        t.interrupt().raise(INT_VRING).unwrap();
        assert_eq!(r(&mut t, INTERRUPT_STATUS), INT_VRING);
        assert_eq!(t.interrupt().eventfd().read().unwrap(), 1);
        w(&mut t, INTERRUPT_ACK, INT_VRING);
        assert_eq!(r(&mut t, INTERRUPT_STATUS), 0);
        let _ = GuestAddress(0);
    }

    /// An available ring index more than a queue ahead cannot be used at all: counted once,
    /// the device stops (NEEDS_RESET, the configuration interrupt) until the driver resets
    /// it; after the reset it probes and runs again.
    #[test]
    fn an_unusable_avail_ring_needs_a_reset() {
        use vm_memory::Bytes;
        let mut t = transport();
        assert_eq!(linux_probe(&mut t, 1), 0xf);
        let m = t.mem.clone();
        m.write_obj(0x8000u16, GuestAddress(0x2002)).unwrap();
        t.handle(Event::Queue(0));
        assert_eq!(r(&mut t, STATUS), 0xf | S_NEEDS_RESET);
        assert!(!t.is_activated());
        assert_eq!(r(&mut t, INTERRUPT_STATUS) & INT_CONFIG, INT_CONFIG);
        t.handle(Event::Queue(0));
        assert_eq!(t.faults.count("avail-index"), 1, "{:?}", t.faults);
        // Status bits cannot be cleared without a reset.
        w(&mut t, STATUS, 0xf);
        assert_eq!(r(&mut t, STATUS), 0xf | S_NEEDS_RESET);
        w(&mut t, STATUS, 0);
        assert_eq!(r(&mut t, STATUS), 0);
        m.write_obj(0u16, GuestAddress(0x2002)).unwrap();
        assert_eq!(linux_probe(&mut t, 1), 0xf);
        assert!(t.is_activated());
    }
}
