//! virtio over MMIO (virtio 1.x, the "version 2" register file): the transport
//! ([`mmio::MmioTransport`]), three devices ([`blk`], [`net`], [`vsock`]) and the one
//! device thread ([`thread`]) that serves their queues and backends.
//!
//! Layout (the parity contract, docs in vmm/README.md): device `i` gets the 4 KiB window
//! [`window_base`]`(i)` = `0xd000_0000 + i * 0x1000` and the ISA IRQ [`DEVICE_IRQS`]`[i]`
//! (5, 6, 7: edge-triggered IOAPIC pins, driven through an irqfd); each queue's notify
//! register (`base + 0x50`) is an ioeventfd with datamatch = the queue index.
//!
//! Everything the guest puts in a queue is untrusted: a descriptor chain is walked at most
//! queue-size descriptors deep (virtio-queue's TTL), and one that would go on (a loop, a
//! `next` outside the queue: virtio-queue ends those chains silently) is refused; every
//! buffer is range-checked against guest memory before use ([`Chain::parse`]), and no length
//! the guest gives sizes an allocation (the devices copy through fixed bounce buffers). A
//! malformed chain is returned to the guest (used length 0 or an error status) and counted in
//! [`Faults`]; an available ring that cannot be used at all (its index more than a queue
//! ahead) stops the device until the driver resets it (NEEDS_RESET, [`Ctx::broken`]). Nothing
//! the guest writes panics the VMM. What a guest can make a device do per second is bounded
//! by token buckets ([`rate`]).
use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};
use virtio_queue::{DescriptorChain, Queue, QueueOwnedT, QueueT};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemory, GuestMemoryMmap, Permissions};
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;

pub mod blk;
#[cfg(test)]
mod hostile;
pub mod mmio;
pub mod net;
pub mod rate;
pub mod setup;
pub mod thread;
pub mod vsock;

/// The windows and IRQs of the devices: one definition, the guest command line's
/// (`truecold_proto::boot_cmdline`).
pub use truecold_proto::boot_cmdline::{
    virtio_window_base as window_base, VIRTIO_DEVICE_IRQS as DEVICE_IRQS,
    VIRTIO_MMIO_BASE as MMIO_BASE, VIRTIO_MMIO_SIZE as MMIO_SIZE,
};
/// Offset of the QueueNotify register in a window.
pub const QUEUE_NOTIFY: u64 = 0x50;

/// Interrupt status bit: a used buffer was added.
pub const INT_VRING: u32 = 1;
/// Interrupt status bit: the configuration changed.
pub const INT_CONFIG: u32 = 2;

/// A device's interrupt line: the InterruptStatus bits and the irqfd that raises the IRQ.
#[derive(Debug)]
pub struct Interrupt {
    status: AtomicU32,
    evt: EventFd,
}

impl Interrupt {
    pub fn new(evt: EventFd) -> Self {
        Interrupt {
            status: AtomicU32::new(0),
            evt,
        }
    }

    /// Sets `bits` in InterruptStatus and raises the line.
    pub fn raise(&self, bits: u32) -> io::Result<()> {
        self.status.fetch_or(bits, Ordering::SeqCst);
        self.evt.write(1)
    }

    /// The InterruptStatus register.
    pub fn status(&self) -> u32 {
        self.status.load(Ordering::SeqCst)
    }

    /// InterruptACK: clears `bits`.
    pub fn ack(&self, bits: u32) {
        self.status.fetch_and(!bits, Ordering::SeqCst);
    }

    /// The eventfd (registered as an irqfd by the boot; read by tests).
    pub fn eventfd(&self) -> &EventFd {
        &self.evt
    }
}

/// What the device thread delivers to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The guest notified queue `n`.
    Queue(u16),
    /// A backend descriptor the device registered under `token` is ready (`events`: epoll bits).
    Backend { token: u32, events: u32 },
    /// The time the device asked for ([`VirtioDevice::wake_at`]) came: a queue stopped by its
    /// rate limit may go on.
    Timer,
}

/// Backend tokens start here (below: queue indexes).
pub const BACKEND_TOKEN_BASE: u32 = 0x100;

/// Registration of a device's backend descriptors in the device thread's epoll.
pub struct Poll<'a> {
    epoll: &'a Epoll,
    dev: u32,
}

impl<'a> Poll<'a> {
    pub fn new(epoll: &'a Epoll, dev: u32) -> Self {
        Poll { epoll, dev }
    }

    /// The epoll data word for (`dev`, `sub`).
    pub fn token(dev: u32, sub: u32) -> u64 {
        (u64::from(dev) << 32) | u64::from(sub)
    }

    /// Splits an epoll data word into (`dev`, `sub`).
    pub fn split(data: u64) -> (u32, u32) {
        ((data >> 32) as u32, data as u32)
    }

    pub fn add(&self, fd: RawFd, sub: u32, events: EventSet) -> io::Result<()> {
        self.epoll.ctl(
            ControlOperation::Add,
            fd,
            EpollEvent::new(events, Self::token(self.dev, sub)),
        )
    }

    pub fn modify(&self, fd: RawFd, sub: u32, events: EventSet) -> io::Result<()> {
        self.epoll.ctl(
            ControlOperation::Modify,
            fd,
            EpollEvent::new(events, Self::token(self.dev, sub)),
        )
    }

    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        self.epoll
            .ctl(ControlOperation::Delete, fd, EpollEvent::default())
    }
}

/// Why a descriptor chain was refused (each counted in [`Faults`] by its kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("a descriptor's buffer is outside guest memory")]
    OutOfRange,
    #[error("the chain's buffers add up to more than the device accepts")]
    TooLong,
    #[error("a device-readable descriptor follows a device-writable one")]
    WrongOrder,
    #[error("the request header is short")]
    ShortHeader,
    #[error("no device-writable byte for the status")]
    NoStatus,
    #[error("a buffer has the wrong direction for the request")]
    WrongDirection,
    #[error("the used ring cannot be written")]
    UsedRing,
    #[error("the chain's head index is out of the queue")]
    BadHead,
    #[error("the request is not understood")]
    Unsupported,
    #[error("a descriptor refers to an indirect table, a feature the device does not offer")]
    Indirect,
    #[error("the frame's virtio-net header asks for an offload that was not negotiated")]
    OffloadHeader,
    #[error("the chain goes on past queue-size descriptors (a loop)")]
    TooManyDescriptors,
    #[error("a descriptor's next index is outside the queue")]
    BadNext,
    #[error("the available ring's index is more than a queue ahead of the device, or unreadable")]
    AvailIndex,
}

impl ChainError {
    /// Stable kebab-case kind (the counters' keys).
    pub fn kind(self) -> &'static str {
        match self {
            ChainError::OutOfRange => "out-of-range",
            ChainError::TooLong => "too-long",
            ChainError::WrongOrder => "wrong-order",
            ChainError::ShortHeader => "short-header",
            ChainError::NoStatus => "no-status",
            ChainError::WrongDirection => "wrong-direction",
            ChainError::UsedRing => "used-ring",
            ChainError::BadHead => "bad-head",
            ChainError::Unsupported => "unsupported",
            ChainError::Indirect => "indirect",
            ChainError::OffloadHeader => "offload-header",
            ChainError::TooManyDescriptors => "too-many-descriptors",
            ChainError::BadNext => "bad-next",
            ChainError::AvailIndex => "avail-index",
        }
    }
}

/// Refused chains and backend errors, by kind (bounded: the keys are a fixed set).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    pub chains_ok: u64,
    pub refused: BTreeMap<String, u64>,
}

impl Faults {
    pub fn refuse(&mut self, e: ChainError) {
        *self.refused.entry(e.kind().to_string()).or_insert(0) += 1;
    }

    pub fn count(&self, kind: &str) -> u64 {
        self.refused.get(kind).copied().unwrap_or(0)
    }

    pub fn total_refused(&self) -> u64 {
        self.refused.values().sum()
    }
}

/// One descriptor, checked against guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    pub addr: GuestAddress,
    pub len: u32,
}

/// A descriptor chain, walked once and checked: its device-readable buffers (first) and
/// its device-writable buffers (after), every one inside guest memory.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    pub head: u16,
    pub readable: Vec<Buf>,
    pub writable: Vec<Buf>,
}

impl Chain {
    /// Walks `chain` of a queue of `size` entries (at most `size` descriptors: virtio-queue's
    /// TTL), checking the head index, each buffer against `mem` and the order (readable before
    /// writable); the readable and writable totals are each at most `max_len` bytes. A chain
    /// virtio-queue ended while its last descriptor still had NEXT is refused: past `size`
    /// descriptors it loops ([`ChainError::TooManyDescriptors`]), a next index outside the
    /// queue is [`ChainError::BadNext`], and otherwise it passed 2^32 bytes, which virtio
    /// forbids ([`ChainError::TooLong`]).
    pub fn parse<M: GuestMemory>(
        chain: DescriptorChain<&M>,
        mem: &M,
        size: u16,
        max_len: u64,
    ) -> Result<Chain, (u16, ChainError)> {
        let head = chain.head_index();
        if head >= size {
            return Err((head, ChainError::BadHead));
        }
        let mut c = Chain {
            head,
            ..Chain::default()
        };
        let (mut rlen, mut wlen) = (0u64, 0u64);
        let mut walked = 0u32;
        // The next index of the last descriptor walked, when it has NEXT.
        let mut dangling = None;
        for d in chain {
            walked += 1;
            dangling = d.has_next().then(|| d.next());
            let buf = Buf {
                addr: d.addr(),
                len: d.len(),
            };
            let perm = if d.is_write_only() {
                Permissions::Write
            } else {
                Permissions::Read
            };
            if buf.len > 0 && !mem.check_range(buf.addr, buf.len as usize, perm) {
                return Err((head, ChainError::OutOfRange));
            }
            if d.is_write_only() {
                wlen += u64::from(buf.len);
                if wlen > max_len {
                    return Err((head, ChainError::TooLong));
                }
                c.writable.push(buf);
            } else {
                if !c.writable.is_empty() {
                    return Err((head, ChainError::WrongOrder));
                }
                rlen += u64::from(buf.len);
                if rlen > max_len {
                    return Err((head, ChainError::TooLong));
                }
                c.readable.push(buf);
            }
        }
        if let Some(next) = dangling {
            let e = if next >= size {
                ChainError::BadNext
            } else if walked >= u32::from(size) {
                ChainError::TooManyDescriptors
            } else {
                ChainError::TooLong
            };
            return Err((head, e));
        }
        Ok(c)
    }

    pub fn readable_len(&self) -> u64 {
        self.readable.iter().map(|b| u64::from(b.len)).sum()
    }

    pub fn writable_len(&self) -> u64 {
        self.writable.iter().map(|b| u64::from(b.len)).sum()
    }
}

/// Whether the chain at `head` of the descriptor table at `table` (`size` entries) has a
/// descriptor with VIRTQ_DESC_F_INDIRECT, walking at most `size` descriptors as virtio-queue
/// does (an unreadable descriptor ends the walk: virtio-queue's chain ends there too).
pub fn names_indirect_table<M: GuestMemory>(mem: &M, table: u64, size: u16, head: u16) -> bool {
    const F_NEXT: u16 = 1;
    const F_INDIRECT: u16 = 4;
    let mut i = head;
    for _ in 0..size {
        if i >= size {
            return false;
        }
        // struct virtq_desc: addr u64, len u32, flags u16, next u16 (16 bytes, little endian).
        let Some(at) = table.checked_add(u64::from(i) * 16 + 12) else {
            return false;
        };
        let mut fl = [0u8; 4];
        if mem.read_slice(&mut fl, GuestAddress(at)).is_err() {
            return false;
        }
        let flags = u16::from_le_bytes([fl[0], fl[1]]);
        if flags & F_INDIRECT != 0 {
            return true;
        }
        if flags & F_NEXT == 0 {
            return false;
        }
        i = u16::from_le_bytes([fl[2], fl[3]]);
    }
    false
}

/// Copies from a list of guest buffers, starting at byte `offset` of their concatenation,
/// into `out`; returns the bytes copied (fewer at the end of the buffers).
pub fn gather<M: GuestMemory>(
    mem: &M,
    bufs: &[Buf],
    mut offset: u64,
    out: &mut [u8],
) -> Result<usize, ChainError> {
    let mut done = 0;
    for b in bufs {
        if done == out.len() {
            break;
        }
        let len = u64::from(b.len);
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = ((len - offset) as usize).min(out.len() - done);
        let addr = b.addr.checked_add(offset).ok_or(ChainError::OutOfRange)?;
        mem.read_slice(&mut out[done..done + n], addr)
            .map_err(|_| ChainError::OutOfRange)?;
        done += n;
        offset = 0;
    }
    Ok(done)
}

/// Copies `data` into a list of guest buffers at byte `offset` of their concatenation;
/// returns the bytes copied (fewer at the end of the buffers).
pub fn scatter<M: GuestMemory>(
    mem: &M,
    bufs: &[Buf],
    mut offset: u64,
    data: &[u8],
) -> Result<usize, ChainError> {
    let mut done = 0;
    for b in bufs {
        if done == data.len() {
            break;
        }
        let len = u64::from(b.len);
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = ((len - offset) as usize).min(data.len() - done);
        let addr = b.addr.checked_add(offset).ok_or(ChainError::OutOfRange)?;
        mem.write_slice(&data[done..done + n], addr)
            .map_err(|_| ChainError::OutOfRange)?;
        done += n;
        offset = 0;
    }
    Ok(done)
}

/// The rate limits' clock: CLOCK_MONOTONIC in ns ([`MONOTONIC`]) in every VMM; a test drives
/// its own ([`thread::VirtioDevices::with_clock`]) so that what a throttled queue does is
/// judged by the time it saw, never by how long the test took.
pub type Clock = fn() -> u64;

/// The VMM's clock: CLOCK_MONOTONIC, ns.
pub const MONOTONIC: Clock = truecold_proto::measure::now_ns;

/// What a device gets for one event: guest memory, its queues, the epoll registration, and
/// whether a used buffer was added (the transport then raises the interrupt).
pub struct Ctx<'a> {
    pub mem: &'a GuestMemoryMmap,
    pub queues: &'a mut [Queue],
    pub poll: &'a Poll<'a>,
    pub faults: &'a mut Faults,
    notify: bool,
    /// CLOCK_MONOTONIC at the event, ns (the rate limits' clock).
    now_ns: u64,
    /// Why the device must stop until a reset (a queue that cannot be used at all).
    broken: Option<ChainError>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        mem: &'a GuestMemoryMmap,
        queues: &'a mut [Queue],
        poll: &'a Poll<'a>,
        faults: &'a mut Faults,
    ) -> Self {
        Ctx {
            mem,
            queues,
            poll,
            faults,
            notify: false,
            now_ns: truecold_proto::measure::now_ns(),
            broken: None,
        }
    }

    /// The same at a given time (tests and fuzzing drive the rate limits' clock).
    pub fn at(mut self, now_ns: u64) -> Self {
        self.now_ns = now_ns;
        self
    }

    /// CLOCK_MONOTONIC at this event, ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Why the device stopped in this event (the transport then sets NEEDS_RESET), if it did.
    pub fn broken(&self) -> Option<ChainError> {
        self.broken
    }

    /// The next available chain of queue `q`, parsed; a malformed one is returned to the
    /// guest (used length 0), counted, and the next one tried. A head index outside the
    /// queue is counted and skipped (the used ring cannot name it). An available ring whose
    /// index is more than a queue ahead (or unreadable) is counted once and stops the device:
    /// nothing more is popped (the transport sets NEEDS_RESET).
    pub fn pop(&mut self, q: usize, max_len: u64) -> Option<Chain> {
        if self.broken.is_some() {
            return None;
        }
        loop {
            let queue = self.queues.get_mut(q)?;
            let (table, size) = (queue.desc_table(), queue.size());
            let chain = match queue.iter(self.mem) {
                Ok(mut avail) => avail.next()?,
                Err(virtio_queue::Error::QueueNotReady) => return None,
                Err(_) => {
                    self.faults.refuse(ChainError::AvailIndex);
                    self.broken = Some(ChainError::AvailIndex);
                    return None;
                }
            };
            // No device offers VIRTIO_RING_F_INDIRECT_DESC: a chain that names an indirect
            // table is refused before virtio-queue would follow it (a table of up to 65,535
            // descriptors, read while the transport's lock is held).
            let parsed = if names_indirect_table(self.mem, table, size, chain.head_index()) {
                Err((chain.head_index(), ChainError::Indirect))
            } else {
                Chain::parse(chain, self.mem, size, max_len)
            };
            match parsed {
                Ok(c) => return Some(c),
                Err((_, ChainError::BadHead)) => self.faults.refuse(ChainError::BadHead),
                Err((head, e)) => {
                    self.faults.refuse(e);
                    self.used(q, head, 0);
                }
            }
        }
    }

    /// Gives back the chain last popped from queue `q` (nothing was written to it).
    pub fn unpop(&mut self, q: usize) {
        if let Some(queue) = self.queues.get_mut(q) {
            queue.go_to_previous_position();
        }
    }

    /// Puts chain `head` of queue `q` in the used ring with `len` bytes written.
    pub fn used(&mut self, q: usize, head: u16, len: u32) {
        let Some(queue) = self.queues.get_mut(q) else {
            return;
        };
        match queue.add_used(self.mem, head, len) {
            Ok(()) => {
                if queue.needs_notification(self.mem).unwrap_or(true) {
                    self.notify = true;
                }
            }
            Err(virtio_queue::Error::InvalidDescriptorIndex) => {
                self.faults.refuse(ChainError::BadHead)
            }
            Err(_) => self.faults.refuse(ChainError::UsedRing),
        }
    }

    /// Whether a used buffer asks for an interrupt.
    pub fn needs_interrupt(&self) -> bool {
        self.notify
    }
}

/// A virtio device behind an [`mmio::MmioTransport`].
pub trait VirtioDevice: Send {
    /// The virtio device ID (net 1, blk 2, vsock 19).
    fn device_type(&self) -> u32;
    /// The features offered (VIRTIO_F_VERSION_1 always among them).
    fn features(&self) -> u64;
    /// Each queue's maximum size.
    fn queue_max_sizes(&self) -> &'static [u16];
    /// Reads device configuration at `offset` (from 0x100); bytes out of the config read 0.
    fn read_config(&self, offset: u64, data: &mut [u8]);
    /// The driver writes device configuration (ignored by default: read-only configs).
    fn write_config(&mut self, _offset: u64, _data: &[u8]) {}
    /// The backend descriptors to watch from the start, as (fd, token ≥ BACKEND_TOKEN_BASE,
    /// events).
    fn backend_fds(&self) -> Vec<(RawFd, u32, EventSet)> {
        Vec::new()
    }
    /// The driver set DRIVER_OK with these acked features.
    fn activate(&mut self, _acked: u64) {}
    /// The driver reset the device: drop every in-flight state (a rate limit's buckets are
    /// kept: a reset must not refill them).
    fn reset(&mut self, _poll: &Poll<'_>) {}
    /// When the device wants an [`Event::Timer`] (CLOCK_MONOTONIC ns): a queue its rate limit
    /// stopped may go on then. None: no timer.
    fn wake_at(&self) -> Option<u64> {
        None
    }
    /// Serves one event (only while activated).
    fn handle(&mut self, cx: &mut Ctx<'_>, ev: Event);
    /// What the device did, for the VMM's report (name, count).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// What one device did in a boot (the VMM report's `devices`): the chains it served, the
/// chains and register misuses it refused by kind, the register accesses its transport
/// ignored, and the device's own counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReport {
    pub name: String,
    pub chains_ok: u64,
    pub refused: BTreeMap<String, u64>,
    pub ignored_accesses: u64,
    pub counters: BTreeMap<String, u64>,
}

/// Features every device offers: VIRTIO_F_VERSION_1 (Linux refuses a version-2 device
/// without it).
pub const F_VERSION_1: u64 = 1 << virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;

/// Reads `data.len()` bytes of a device's configuration space `cfg` from `offset` (the guest
/// chooses both): bytes past its end read 0; never panics.
pub fn read_config_bytes(cfg: &[u8], offset: u64, data: &mut [u8]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(i))
            .and_then(|o| cfg.get(o))
            .copied()
            .unwrap_or(0);
    }
}

#[cfg(test)]
mod config_space_tests {
    #[test]
    fn config_reads_past_the_end_or_at_any_offset_are_zero_never_a_panic() {
        let cfg = [1u8, 2, 3, 4];
        let mut d = [9u8; 6];
        super::read_config_bytes(&cfg, 2, &mut d);
        assert_eq!(d, [3, 4, 0, 0, 0, 0]);
        for off in [4, 4096, u64::MAX - 1, u64::MAX] {
            let mut d = [9u8; 8];
            super::read_config_bytes(&cfg, off, &mut d);
            assert_eq!(d, [0; 8], "{off}");
        }
    }
}

#[cfg(test)]
mod chain_tests {
    use super::testutil::{mem, F_NEXT};
    use super::*;

    fn chain_of(
        m: &GuestMemoryMmap,
        size: u16,
        n: u16,
        last_next: Option<u16>,
    ) -> (u16, Result<Chain, (u16, ChainError)>) {
        // Table at 0x1000, avail at 0x2000, used at 0x3000: n descriptors 0 → 1 → … → n-1.
        let mut q = Queue::new(size).unwrap();
        q.set_size(size);
        q.set_desc_table_address(Some(0x1000), Some(0));
        q.set_avail_ring_address(Some(0x2000), Some(0));
        q.set_used_ring_address(Some(0x3000), Some(0));
        q.set_ready(true);
        for i in 0..n {
            let a = 0x1000 + 16 * u64::from(i);
            let (flags, next) = match (i + 1 == n, last_next) {
                (false, _) => (F_NEXT, i + 1),
                (true, Some(nx)) => (F_NEXT, nx),
                (true, None) => (0, 0),
            };
            m.write_obj(0x10_0000u64 + 64 * u64::from(i), GuestAddress(a))
                .unwrap();
            m.write_obj(64u32, GuestAddress(a + 8)).unwrap();
            m.write_obj(flags, GuestAddress(a + 12)).unwrap();
            m.write_obj(next, GuestAddress(a + 14)).unwrap();
        }
        m.write_obj(0u16, GuestAddress(0x2004)).unwrap();
        m.write_obj(1u16, GuestAddress(0x2002)).unwrap();
        let chain = q.pop_descriptor_chain(m).unwrap();
        (n, Chain::parse(chain, m, size, u64::MAX))
    }

    /// virtio-queue walks at most queue-size descriptors and ends a longer chain silently,
    /// as if it ended there; `Chain::parse` refuses it (a chain longer than the queue is a
    /// loop). A chain of exactly queue-size descriptors is a chain.
    #[test]
    fn a_chain_longer_than_the_queue_or_with_a_next_outside_it_is_refused() {
        let m = mem();
        for size in [1u16, 2, 16, 256] {
            let (n, r) = chain_of(&m, size, size, None);
            let c = r.unwrap_or_else(|e| panic!("{size}: {e:?}"));
            assert_eq!(c.readable.len(), usize::from(n), "{size}");
            // The last one points back at the first: a loop, one past the queue.
            let (_, r) = chain_of(&m, size, size, Some(0));
            assert_eq!(
                r.unwrap_err(),
                (0, ChainError::TooManyDescriptors),
                "{size}"
            );
            let (_, r) = chain_of(&m, size, size, Some(size));
            assert_eq!(r.unwrap_err(), (0, ChainError::BadNext), "{size}");
            if size > 2 {
                let (_, r) = chain_of(&m, size, 2, Some(1));
                assert_eq!(r.unwrap_err(), (0, ChainError::TooManyDescriptors));
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
    use virtio_queue::mock::MockSplitQueue;

    pub const F_NEXT: u16 = virtio_bindings::virtio_ring::VRING_DESC_F_NEXT as u16;
    pub const F_WRITE: u16 = virtio_bindings::virtio_ring::VRING_DESC_F_WRITE as u16;

    pub fn mem() -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x40_0000)]).unwrap()
    }

    pub fn desc(addr: u64, len: u32, flags: u16) -> RawDescriptor {
        RawDescriptor::from(SplitDescriptor::new(addr, len, flags, 0))
    }

    /// A driver-side queue kept across rounds: chains are appended to the descriptor
    /// table and the available ring; the device side is [`Q::queue`], made once.
    pub struct Q<'a> {
        mq: MockSplitQueue<'a, GuestMemoryMmap>,
        next_desc: u16,
        pub used_addr: GuestAddress,
    }

    impl<'a> Q<'a> {
        pub fn new(mem: &'a GuestMemoryMmap, start: u64, size: u16) -> Self {
            let mq = MockSplitQueue::create(mem, GuestAddress(start), size);
            let used_addr = mq.used_addr();
            Q {
                mq,
                next_desc: 0,
                used_addr,
            }
        }

        pub fn queue(&self) -> Queue {
            self.mq.create_queue().unwrap()
        }

        /// Appends one chain (NEXT set by position).
        pub fn push(&mut self, c: &[RawDescriptor]) {
            let base = self.next_desc;
            let mut all = Vec::new();
            for (i, d) in c.iter().enumerate() {
                let d = SplitDescriptor::from(*d);
                let last = i + 1 == c.len();
                let flags = if last {
                    d.flags() & !F_NEXT
                } else {
                    d.flags() | F_NEXT
                };
                let next = if last { 0 } else { base + i as u16 + 1 };
                all.push(RawDescriptor::from(SplitDescriptor::new(
                    d.addr().0,
                    d.len(),
                    flags,
                    next,
                )));
            }
            self.mq.add_desc_chains(&all, base).unwrap();
            self.next_desc += c.len() as u16;
        }
    }

    /// A mock queue at `start` with `chains`, and its used ring's address.
    pub fn queue_with(
        mem: &GuestMemoryMmap,
        start: u64,
        size: u16,
        chains: &[Vec<RawDescriptor>],
    ) -> (Queue, GuestAddress) {
        let mut q = Q::new(mem, start, size);
        for c in chains {
            q.push(c);
        }
        (q.queue(), q.used_addr)
    }

    /// The used ring's (idx, [(id, len)]).
    pub fn used(mem: &GuestMemoryMmap, used: GuestAddress, n: usize) -> (u16, Vec<(u32, u32)>) {
        let idx: u16 = mem.read_obj(used.unchecked_add(2)).unwrap();
        let elems = (0..n)
            .map(|i| {
                let a = used.unchecked_add(4 + 8 * i as u64);
                (
                    mem.read_obj::<u32>(a).unwrap(),
                    mem.read_obj::<u32>(a.unchecked_add(4)).unwrap(),
                )
            })
            .collect();
        (idx, elems)
    }
}
