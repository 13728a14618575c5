//! virtio-net (device ID 1) over a [`Frames`] backend: a [`Tap`] in the VMM (created with
//! IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, vnet header 12 bytes, no offloads, the host address /30
//! and IFF_UP; it disappears when its descriptor closes), a socketpair in tests. Features:
//! VIRTIO_F_VERSION_1 and VIRTIO_NET_F_MAC only (no offloads, no mergeable buffers): each
//! frame is one 12-byte `virtio_net_hdr_v1` + one Ethernet frame, passed through unchanged.
//! Queues: 0 rx, 1 tx. Frames are bounded by [`MAX_FRAME`] in two fixed buffers. The
//! guest's frames (tx) are rate limited ([`RateLimit::NET_TX`] by default: bytes and frames
//! per second); rx carries the host's traffic and is not.
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};

use vmm_sys_util::epoll::EventSet;

use super::rate::{Limiter, RateLimit};
use super::{
    gather, scatter, ChainError, Ctx, Event, Poll, VirtioDevice, BACKEND_TOKEN_BASE, F_VERSION_1,
};

pub const DEVICE_ID: u32 = virtio_bindings::virtio_ids::VIRTIO_ID_NET;
pub const QUEUE_SIZE: u16 = 256;
pub const RX: usize = 0;
pub const TX: usize = 1;
// The tap itself (created, addressed, up; persistent for an engine that opens one by name)
// lives in its own crate, which the bench uses for Firecracker's tap without this one.
pub use truecold_host::{Tap, TapError, VNET_HDR_LEN};
/// Largest frame (header included) carried either way.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 65550;
const TAP_TOKEN: u32 = BACKEND_TOKEN_BASE;

/// A frame backend: one frame per call (a tap, a SOCK_SEQPACKET/DGRAM socket).
pub trait Frames: Send {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    fn send(&mut self, buf: &[u8]) -> io::Result<usize>;
    fn fd(&self) -> RawFd;
}

impl Frames for std::os::unix::net::UnixDatagram {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::os::unix::net::UnixDatagram::recv(self, buf)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        std::os::unix::net::UnixDatagram::send(self, buf)
    }
    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }
}

impl Frames for Tap {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file().read(buf)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }
    fn fd(&self) -> RawFd {
        self.file().as_raw_fd()
    }
}

/// The virtio-net device.
pub struct Net {
    frames: Box<dyn Frames>,
    mac: [u8; 6],
    rx_buf: Vec<u8>,
    tx_buf: Vec<u8>,
    /// A frame read from the backend that waits for an rx buffer (its length).
    pending: Option<usize>,
    /// The backend may have frames (edge-triggered: cleared on EAGAIN).
    readable: bool,
    tx_limiter: Limiter,
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// Frames dropped: tx the backend refused, rx larger than the guest's buffer.
    pub dropped: u64,
}

impl Net {
    /// The device over `frames` with the default tx limit ([`RateLimit::NET_TX`]).
    pub fn new(frames: Box<dyn Frames>, mac: [u8; 6]) -> Self {
        Self::with_limit(frames, mac, RateLimit::NET_TX)
    }

    /// The device over `frames`, its transmitted frames limited by `tx`.
    pub fn with_limit(frames: Box<dyn Frames>, mac: [u8; 6], tx: RateLimit) -> Self {
        Net {
            frames,
            mac,
            rx_buf: vec![0; MAX_FRAME],
            tx_buf: vec![0; MAX_FRAME],
            pending: None,
            readable: true,
            tx_limiter: Limiter::new(tx),
            tx_frames: 0,
            rx_frames: 0,
            dropped: 0,
        }
    }

    /// Times the tx queue stopped for its rate limit.
    pub fn tx_throttled(&self) -> u64 {
        self.tx_limiter.throttled
    }

    fn tx(&mut self, cx: &mut Ctx<'_>) {
        if !self.tx_limiter.go(cx.now_ns()) {
            return;
        }
        while let Some(c) = cx.pop(TX, MAX_FRAME as u64) {
            if !self.tx_limiter.admit(cx.now_ns(), c.readable_len()) {
                // Left in the queue: the timer at wake_at() sends it.
                cx.unpop(TX);
                return;
            }
            if !c.writable.is_empty() {
                cx.faults.refuse(ChainError::WrongDirection);
                cx.used(TX, c.head, 0);
                continue;
            }
            let n = c.readable_len() as usize;
            match gather(cx.mem, &c.readable, 0, &mut self.tx_buf[..n]) {
                Ok(got) if got == n && n > VNET_HDR_LEN => {
                    // No offload was negotiated: a header with flags or a GSO type is refused,
                    // and the tap gets a header this VMM wrote (all zero), never the guest's
                    // hdr_len, gso_size or checksum offsets for the host kernel to parse.
                    if self.tx_buf[0] != 0 || self.tx_buf[1] != 0 {
                        cx.faults.refuse(ChainError::OffloadHeader);
                        self.dropped += 1;
                        cx.used(TX, c.head, 0);
                        continue;
                    }
                    self.tx_buf[..VNET_HDR_LEN].fill(0);
                    cx.faults.chains_ok += 1;
                    match self.frames.send(&self.tx_buf[..n]) {
                        Ok(_) => self.tx_frames += 1,
                        Err(_) => self.dropped += 1,
                    }
                }
                Ok(_) => cx.faults.refuse(ChainError::ShortHeader),
                Err(e) => cx.faults.refuse(e),
            }
            cx.used(TX, c.head, 0);
        }
    }

    fn rx(&mut self, cx: &mut Ctx<'_>) {
        loop {
            let n = match self.pending {
                Some(n) => n,
                None => {
                    if !self.readable {
                        return;
                    }
                    match self.frames.recv(&mut self.rx_buf) {
                        Ok(0) => {
                            self.readable = false;
                            return;
                        }
                        Ok(n) => {
                            self.pending = Some(n);
                            n
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => {
                            // EAGAIN (drained) or a backend error: wait for the next edge.
                            self.readable = false;
                            return;
                        }
                    }
                }
            };
            let Some(c) = cx.pop(RX, MAX_FRAME as u64) else {
                return; // no rx buffer: the frame waits for the guest's next rx notify
            };
            self.pending = None;
            if !c.readable.is_empty() {
                cx.faults.refuse(ChainError::WrongDirection);
                cx.used(RX, c.head, 0);
                self.dropped += 1;
                continue;
            }
            if (c.writable_len() as usize) < n {
                self.dropped += 1;
                cx.faults.refuse(ChainError::TooLong);
                cx.used(RX, c.head, 0);
                continue;
            }
            if n >= VNET_HDR_LEN {
                // num_buffers = 1 (no mergeable buffers).
                self.rx_buf[10..12].copy_from_slice(&1u16.to_le_bytes());
            }
            match scatter(cx.mem, &c.writable, 0, &self.rx_buf[..n]) {
                Ok(_) => {
                    cx.faults.chains_ok += 1;
                    self.rx_frames += 1;
                    cx.used(RX, c.head, n as u32);
                }
                Err(e) => {
                    cx.faults.refuse(e);
                    cx.used(RX, c.head, 0);
                }
            }
        }
    }
}

impl VirtioDevice for Net {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("tx_frames", self.tx_frames),
            ("rx_frames", self.rx_frames),
            ("dropped_frames", self.dropped),
            ("tx_throttled", self.tx_limiter.throttled),
        ]
    }

    fn wake_at(&self) -> Option<u64> {
        self.tx_limiter.wake_at()
    }

    fn device_type(&self) -> u32 {
        DEVICE_ID
    }

    fn features(&self) -> u64 {
        F_VERSION_1 | (1 << virtio_bindings::virtio_net::VIRTIO_NET_F_MAC)
    }

    fn queue_max_sizes(&self) -> &'static [u16] {
        &[QUEUE_SIZE, QUEUE_SIZE]
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        // struct virtio_net_config: the MAC first; the rest reads 0 (not offered).
        super::read_config_bytes(&self.mac, offset, data);
    }

    fn backend_fds(&self) -> Vec<(RawFd, u32, EventSet)> {
        vec![(
            self.frames.fd(),
            TAP_TOKEN,
            EventSet::IN | EventSet::EDGE_TRIGGERED,
        )]
    }

    fn reset(&mut self, _poll: &Poll<'_>) {
        self.pending = None;
        self.readable = true;
        self.tx_limiter.reset();
    }

    fn handle(&mut self, cx: &mut Ctx<'_>, ev: Event) {
        match ev {
            Event::Queue(1) | Event::Timer => self.tx(cx),
            Event::Queue(0) => self.rx(cx),
            Event::Backend {
                token: TAP_TOKEN, ..
            } => {
                self.readable = true;
                self.rx(cx);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testutil::{desc, mem, queue_with, used, F_WRITE};
    use crate::virtio::Faults;
    use std::os::unix::net::UnixDatagram;
    use vm_memory::{Bytes, GuestAddress};
    use vmm_sys_util::epoll::Epoll;

    #[test]
    fn tx_and_rx_through_a_socketpair() {
        let m = mem();
        let (a, host) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        host.set_nonblocking(true).unwrap();
        let mut net = Net::new(
            Box::new(a),
            truecold_proto::parity::NetPair::for_slot(0)
                .unwrap()
                .guest_mac(),
        );
        let mut mac = [0u8; 6];
        net.read_config(0, &mut mac);
        assert_eq!(mac, [2, 0x74, 10, 200, 0, 2]);
        // TX: header + 60-byte frame in two descriptors. The header asks for no offload
        // (flags 0, GSO none) but carries guest-chosen hdr_len, gso_size and checksum
        // offsets: the tap gets the frame behind a header of zeros.
        let mut frame: Vec<u8> = (0..72u8).collect();
        frame[1] = 0;
        m.write_slice(&frame, GuestAddress(0x10_0000)).unwrap();
        let (txq, tx_used) = queue_with(
            &m,
            0x8000,
            16,
            &[vec![desc(0x10_0000, 12, 0), desc(0x10_000c, 60, 0)]],
        );
        // RX: two 2 KiB buffers.
        let (rxq, rx_used) = queue_with(
            &m,
            0,
            16,
            &[
                vec![desc(0x20_0000, 2048, F_WRITE)],
                vec![desc(0x21_0000, 2048, F_WRITE)],
            ],
        );
        let mut queues = vec![rxq, txq];
        let ep = Epoll::new().unwrap();
        let poll = Poll::new(&ep, 0);
        let mut faults = Faults::default();
        let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
        net.handle(&mut cx, Event::Queue(1));
        let mut got = [0u8; 200];
        let n = host.recv(&mut got).unwrap();
        assert_eq!(n, frame.len());
        assert_eq!(&got[..VNET_HDR_LEN], &[0u8; VNET_HDR_LEN]);
        assert_eq!(&got[VNET_HDR_LEN..n], &frame[VNET_HDR_LEN..]);
        assert_eq!(used(&m, tx_used, 1), (1, vec![(0, 0)]));
        // RX: the host sends one frame; the backend event delivers it.
        let mut inbound = vec![0u8; 12];
        inbound.extend_from_slice(b"hello guest, this is an ethernet frame");
        host.send(&inbound).unwrap();
        net.handle(
            &mut cx,
            Event::Backend {
                token: TAP_TOKEN,
                events: 1,
            },
        );
        assert!(cx.needs_interrupt());
        assert_eq!(used(&m, rx_used, 1), (1, vec![(0, inbound.len() as u32)]));
        let mut back = vec![0u8; inbound.len()];
        m.read_slice(&mut back, GuestAddress(0x20_0000)).unwrap();
        assert_eq!(&back[12..], &inbound[12..]);
        assert_eq!(&back[10..12], &[1, 0], "num_buffers");
        // No buffer left after the second frame: it waits, then lands when one is posted.
        host.send(&inbound).unwrap();
        host.send(&inbound).unwrap();
        net.handle(
            &mut cx,
            Event::Backend {
                token: TAP_TOKEN,
                events: 1,
            },
        );
        assert_eq!(used(&m, rx_used, 2).0, 2);
        assert!(net.pending.is_some());
        assert_eq!(net.rx_frames, 2);
        assert_eq!(faults.chains_ok, 3);
    }

    #[test]
    fn oversized_rx_frame_is_dropped_and_wrong_direction_refused() {
        let m = mem();
        let (a, host) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut net = Net::new(Box::new(a), [0; 6]);
        let (rxq, rx_used) = queue_with(&m, 0, 16, &[vec![desc(0x20_0000, 16, F_WRITE)]]);
        let (txq, tx_used) = queue_with(
            &m,
            0x8000,
            16,
            &[vec![desc(0x10_0000, 40, 0), desc(0x11_0000, 40, F_WRITE)]],
        );
        let mut queues = vec![rxq, txq];
        let ep = Epoll::new().unwrap();
        let poll = Poll::new(&ep, 0);
        let mut faults = Faults::default();
        let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
        host.send(&[0u8; 100]).unwrap();
        net.handle(&mut cx, Event::Queue(0));
        assert_eq!(used(&m, rx_used, 1), (1, vec![(0, 0)]));
        net.handle(&mut cx, Event::Queue(1));
        assert_eq!(used(&m, tx_used, 1), (1, vec![(0, 0)]));
        assert_eq!(net.dropped, 1);
        assert_eq!(faults.count("too-long"), 1);
        assert_eq!(faults.count("wrong-direction"), 1);
    }

    /// A frame whose header asks for a checksum or GSO offload (none was negotiated) is
    /// refused, counted and dropped: nothing reaches the tap.
    #[test]
    fn an_offload_header_never_reaches_the_tap() {
        for (flags, gso_type) in [(1u8, 0u8), (0, 1), (0, 4), (0x80, 0x80)] {
            let m = mem();
            let (a, host) = UnixDatagram::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            host.set_nonblocking(true).unwrap();
            let mut net = Net::new(Box::new(a), [0; 6]);
            let mut frame = vec![0u8; 72];
            frame[0] = flags;
            frame[1] = gso_type;
            m.write_slice(&frame, GuestAddress(0x10_0000)).unwrap();
            let (txq, tx_used) = queue_with(&m, 0x8000, 16, &[vec![desc(0x10_0000, 72, 0)]]);
            let (rxq, _) = queue_with(&m, 0, 16, &[]);
            let mut queues = vec![rxq, txq];
            let ep = Epoll::new().unwrap();
            let poll = Poll::new(&ep, 0);
            let mut faults = Faults::default();
            let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
            net.handle(&mut cx, Event::Queue(1));
            assert_eq!(used(&m, tx_used, 1), (1, vec![(0, 0)]));
            assert_eq!(faults.count("offload-header"), 1, "{flags} {gso_type}");
            assert_eq!(net.dropped, 1);
            assert_eq!(net.tx_frames, 0);
            let mut got = [0u8; 100];
            assert!(host.recv(&mut got).is_err(), "a frame reached the tap");
        }
    }

    /// A guest flooding tx is held to its limit: frames past the burst wait in the queue
    /// (rx goes on meanwhile), the timer sends them in order; nothing is dropped.
    #[test]
    fn a_tx_flood_is_throttled_rx_is_not_and_tx_resumes() {
        use crate::virtio::rate::Bucket;
        const MS: u64 = 1_000_000;
        let m = mem();
        let (a, host) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        host.set_nonblocking(true).unwrap();
        let limit = RateLimit {
            bytes: Some(Bucket {
                capacity: 200,
                per_sec: 1000,
            }),
            ops: None,
        };
        let mut net = Net::with_limit(Box::new(a), [0; 6], limit);
        // Eight 72-byte frames (header + 60), each marked with its number.
        let chains: Vec<_> = (0..8u64)
            .map(|i| {
                let mut f = vec![0u8; 72];
                f[12] = i as u8;
                m.write_slice(&f, GuestAddress(0x10_0000 + i * 0x100))
                    .unwrap();
                vec![desc(0x10_0000 + i * 0x100, 72, 0)]
            })
            .collect();
        let (txq, tx_used) = queue_with(&m, 0x8000, 16, &chains);
        let (rxq, rx_used) = queue_with(&m, 0, 16, &[vec![desc(0x20_0000, 2048, F_WRITE)]]);
        let mut queues = vec![rxq, txq];
        let ep = Epoll::new().unwrap();
        let poll = Poll::new(&ep, 0);
        let mut faults = Faults::default();
        let t0 = 7_000 * MS;
        let mut at = |net: &mut Net, t: u64, ev: Event| {
            let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults).at(t);
            net.handle(&mut cx, ev);
        };
        at(&mut net, t0, Event::Queue(1));
        assert_eq!(used(&m, tx_used, 0).0, 2, "200 bytes: two frames at once");
        assert_eq!(net.tx_throttled(), 1);
        assert_eq!(net.wake_at(), Some(t0 + 72 * MS - 56 * MS));
        // rx is not limited.
        host.send(&[0u8; 60]).unwrap();
        at(
            &mut net,
            t0 + MS,
            Event::Backend {
                token: TAP_TOKEN,
                events: 1,
            },
        );
        assert_eq!(used(&m, rx_used, 0).0, 1);
        at(&mut net, t0 + MS, Event::Queue(1));
        assert_eq!(
            used(&m, tx_used, 0).0,
            2,
            "a notify while stopped does nothing"
        );
        let mut t = t0;
        while used(&m, tx_used, 0).0 < 8 {
            t = net.wake_at().expect("a timer while frames wait");
            at(&mut net, t, Event::Timer);
        }
        assert_eq!(net.wake_at(), None);
        // 6 × 72 bytes after the first 200 − 144: at 1000 bytes/s, 0.376 s.
        assert_eq!(t - t0, (6 * 72 - 56) * MS);
        assert_eq!(net.tx_frames, 8);
        assert_eq!(net.dropped, 0);
        let mut got = [0u8; 100];
        for i in 0..8u8 {
            let n = host.recv(&mut got).unwrap();
            assert_eq!((n, got[12]), (72, i), "in order, each once");
        }
        assert!(host.recv(&mut got).is_err());
    }
}
