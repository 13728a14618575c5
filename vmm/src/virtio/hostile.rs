//! Hostile queues: descriptor tables a broken or malicious guest driver could write, fed
//! to every device. Each must end in a typed refusal (or nothing at all), never a panic,
//! a hang or an allocation sized by the guest.
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::epoll::Epoll;

use super::blk::{Blk, MemDisk};
use super::net::Net;
use super::testutil::mem;
use super::vsock::Vsock;
use super::{Ctx, Event, Faults, Poll, VirtioDevice};

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;
const SIZE: u16 = 16;

/// One queue at `base`: descriptor table, avail ring (+0x400), used ring (+0x800).
fn raw_queue(base: u64) -> Queue {
    let mut q = Queue::new(SIZE).unwrap();
    q.set_size(SIZE);
    q.set_desc_table_address(Some(base as u32), Some(0));
    q.set_avail_ring_address(Some((base + 0x400) as u32), Some(0));
    q.set_used_ring_address(Some((base + 0x800) as u32), Some(0));
    q.set_ready(true);
    q
}

fn put_desc(m: &GuestMemoryMmap, base: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
    let a = GuestAddress(base + 16 * u64::from(i));
    m.write_obj(addr, a).unwrap();
    m.write_obj(len, GuestAddress(a.0 + 8)).unwrap();
    m.write_obj(flags, GuestAddress(a.0 + 12)).unwrap();
    m.write_obj(next, GuestAddress(a.0 + 14)).unwrap();
}

fn put_avail(m: &GuestMemoryMmap, base: u64, ring: &[u16], idx: u16) {
    let a = base + 0x400;
    for (i, h) in ring.iter().enumerate() {
        m.write_obj(*h, GuestAddress(a + 4 + 2 * i as u64)).unwrap();
    }
    m.write_obj(idx, GuestAddress(a + 2)).unwrap();
}

fn used_idx(m: &GuestMemoryMmap, base: u64) -> u16 {
    m.read_obj(GuestAddress(base + 0x802)).unwrap()
}

type Desc = (u64, u32, u16, u16);

/// The devices under attack, in [`devices`]' order: blk, net tx, net rx, vsock tx, vsock rx.
const DEVICES: usize = 5;

/// What every device must make of a scenario's chain: the refusal counted (by kind, per
/// device in [`devices`]' order), and whether the chain goes back in the used ring (it
/// cannot when its head index is outside the queue; and nothing is popped from a ring
/// whose index is more than a queue ahead: that stops the device).
struct Expect {
    kinds: [&'static str; DEVICES],
    returned: bool,
}

fn all(kind: &'static str) -> Expect {
    Expect {
        kinds: [kind; DEVICES],
        returned: true,
    }
}

/// (name, descriptors, avail ring, avail idx, what each device does with it).
type Scenario = (&'static str, Vec<Desc>, Vec<u16>, u16, Expect);

/// The scenarios. Each ends in a refusal on every device: none of them is a chain a driver
/// may make, and accepting one would have the device act on a chain the guest did not mean
/// (virtio-queue ends a loop or a bad next index silently, as if the chain ended there).
fn scenarios() -> Vec<Scenario> {
    vec![
        (
            "address outside guest memory",
            vec![(0xffff_ffff_0000, 64, 0, 0)],
            vec![0],
            1,
            all("out-of-range"),
        ),
        (
            "buffer crossing the end of memory",
            vec![(0x3f_fff0, 64, 0, 0)],
            vec![0],
            1,
            all("out-of-range"),
        ),
        (
            "huge length",
            vec![(0x10_0000, u32::MAX, 0, 0)],
            vec![0],
            1,
            all("out-of-range"),
        ),
        (
            // The devices' caps (blk 4 MiB, net one frame, vsock tx 64 KiB) end it first;
            // vsock rx takes up to 4 GiB: there the walk ends it, at queue-size descriptors.
            "a loop of large buffers",
            vec![(0x10_0000, 1 << 20, NEXT, 1), (0x20_0000, 1 << 20, NEXT, 0)],
            vec![0],
            1,
            Expect {
                kinds: [
                    "too-long",
                    "too-long",
                    "too-long",
                    "too-long",
                    "too-many-descriptors",
                ],
                returned: true,
            },
        ),
        (
            // A chain longer than the queue: virtio-queue stops at queue-size descriptors.
            "a loop of small buffers",
            vec![(0x10_0000, 64, NEXT, 1), (0x10_0100, 64, NEXT, 0)],
            vec![0],
            1,
            all("too-many-descriptors"),
        ),
        (
            // A well-formed chain of empty buffers: each device refuses it for what it
            // lacks (blk: no status byte; the others: a buffer of the wrong direction).
            "zero lengths",
            vec![(0x10_0000, 0, NEXT, 1), (0x11_0000, 0, WRITE, 0)],
            vec![0],
            1,
            Expect {
                kinds: [
                    "no-status",
                    "wrong-direction",
                    "wrong-direction",
                    "wrong-direction",
                    "wrong-direction",
                ],
                returned: true,
            },
        ),
        (
            "readable after writable",
            vec![(0x10_0000, 64, WRITE | NEXT, 1), (0x11_0000, 64, 0, 0)],
            vec![0],
            1,
            all("wrong-order"),
        ),
        (
            "head index out of the queue",
            vec![],
            vec![200],
            1,
            Expect {
                returned: false,
                ..all("bad-head")
            },
        ),
        (
            "avail index far ahead",
            vec![(0x10_0000, 64, 0, 0)],
            vec![0],
            0x8000,
            Expect {
                returned: false,
                ..all("avail-index")
            },
        ),
        (
            "next index out of the queue",
            vec![(0x10_0000, 64, NEXT, 999)],
            vec![0],
            1,
            all("bad-next"),
        ),
        (
            "indirect without the feature, bogus table",
            vec![(0xffff_0000_0000, 17, INDIRECT, 0)],
            vec![0],
            1,
            all("indirect"),
        ),
        (
            // A well-formed table of 4,096 descriptors inside memory: never followed.
            "indirect without the feature, a large valid table",
            vec![(0x20_0000, 16 * 4096, INDIRECT, 0)],
            vec![0],
            1,
            all("indirect"),
        ),
        (
            "indirect second in the chain",
            vec![(0x10_0000, 64, NEXT, 1), (0x20_0000, 64, INDIRECT, 0)],
            vec![0],
            1,
            all("indirect"),
        ),
    ]
}

/// Each device with the queue under attack and the queue whose notification starts it: the
/// queue itself, except for vsock's rx queue, which is read only when the device has a
/// packet for the guest; it gets one (an RST for a stray packet on tx, put in by
/// [`stray_vsock_packet`]) and the tx notification. The sockets are kept alive for the test.
#[allow(clippy::type_complexity)]
fn devices(
    dir: &std::path::Path,
) -> (
    Vec<(Box<dyn VirtioDevice>, u16, u16)>,
    Vec<std::os::unix::net::UnixDatagram>,
) {
    // The tap is O_NONBLOCK; so are the fake ones (a blocking one would wait forever).
    let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let (c, d) = std::os::unix::net::UnixDatagram::pair().unwrap();
    c.set_nonblocking(true).unwrap();
    // A frame waits for the rx queue.
    d.send(&[0u8; 60]).unwrap();
    let devs: Vec<(Box<dyn VirtioDevice>, u16, u16)> = vec![
        (
            Box::new(Blk::new(Box::new(MemDisk::new(vec![0; 1 << 16])))),
            0,
            0,
        ),
        (Box::new(Net::new(Box::new(a), [2, 0, 0, 0, 0, 1])), 1, 1),
        (Box::new(Net::new(Box::new(c), [0; 6])), 0, 0),
        (Box::new(Vsock::new(dir.join("v.sock"))), 1, 1),
        (Box::new(Vsock::new(dir.join("v.sock"))), 0, 1),
    ];
    (devs, vec![b, d])
}

/// A well-formed vsock RW packet on no connection, as the only chain of the tx queue at
/// `base` (the device answers it with an RST on rx).
fn stray_vsock_packet(m: &GuestMemoryMmap, base: u64) {
    use super::vsock::{Hdr, HDR_LEN, OP_RW, TYPE_STREAM};
    let h = Hdr {
        src_cid: truecold_proto::parity::GUEST_CID,
        dst_cid: u64::from(truecold_proto::parity::HOST_CID),
        src_port: 5,
        dst_port: 6,
        type_: TYPE_STREAM,
        op: OP_RW,
        ..Hdr::default()
    };
    m.write_slice(&h.bytes(), GuestAddress(0x30_0000)).unwrap();
    put_desc(m, base, 0, 0x30_0000, HDR_LEN as u32, 0, 0);
    put_avail(m, base, &[0], 1);
}

#[test]
fn hostile_queues_end_in_typed_refusals() {
    let dir = tempfile::tempdir().unwrap();
    for (name, descs, ring, idx, want) in scenarios() {
        let (devs, _keep) = devices(dir.path());
        for (d, (mut dev, target, notify)) in devs.into_iter().enumerate() {
            let m = mem();
            let n = dev.queue_max_sizes().len();
            let bases: Vec<u64> = (0..n as u64).map(|i| 0x1000 * (i + 1) * 4).collect();
            let mut queues: Vec<Queue> = bases.iter().map(|b| raw_queue(*b)).collect();
            let base = bases[target as usize];
            for (i, d) in descs.iter().enumerate() {
                put_desc(&m, base, i as u16, d.0, d.1, d.2, d.3);
            }
            put_avail(&m, base, &ring, idx);
            if notify != target {
                stray_vsock_packet(&m, bases[notify as usize]);
            }
            let ep = Epoll::new().unwrap();
            let poll = Poll::new(&ep, 0);
            let mut faults = Faults::default();
            let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
            dev.handle(&mut cx, Event::Queue(notify));
            // Twice: a refused chain is not offered again, nothing hangs.
            dev.handle(&mut cx, Event::Queue(notify));
            let broken = cx.broken();
            let used = used_idx(&m, base);
            let ctx = format!("{name} on device {} queue {target}", dev.device_type());
            assert_eq!(faults.count(want.kinds[d]), 1, "{ctx}: {faults:?}");
            assert_eq!(faults.total_refused(), 1, "{ctx}: one refusal: {faults:?}");
            assert_eq!(used, u16::from(want.returned), "{ctx}: used entries");
            assert_eq!(
                broken.is_some(),
                want.kinds[d] == "avail-index",
                "{ctx}: only an unusable ring stops the device"
            );
        }
    }
}

#[test]
fn hostile_blk_chains_get_a_status_when_they_can() {
    let m = mem();
    let mut blk = Blk::new(Box::new(MemDisk::new(vec![0; 4096])));
    let mut queues = vec![raw_queue(0x1000)];
    // A readable header alone: no writable byte → no status, used length 0.
    put_desc(&m, 0x1000, 0, 0x10_0000, 16, 0, 0);
    // Zero-length header + 1 status byte: IOERR.
    put_desc(&m, 0x1000, 2, 0x10_0000, 0, NEXT, 3);
    put_desc(&m, 0x1000, 3, 0x12_0000, 1, WRITE, 0);
    // A loop of readable headers: refused before the device looks at it (no status).
    put_desc(&m, 0x1000, 4, 0x10_0000, 16, NEXT, 5);
    put_desc(&m, 0x1000, 5, 0x10_0000, 16, NEXT, 4);
    put_avail(&m, 0x1000, &[0, 2, 4], 3);
    let ep = Epoll::new().unwrap();
    let poll = Poll::new(&ep, 0);
    let mut faults = Faults::default();
    let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
    blk.handle(&mut cx, Event::Queue(0));
    assert_eq!(used_idx(&m, 0x1000), 3);
    assert_eq!(faults.count("no-status"), 1);
    assert_eq!(faults.count("short-header"), 1);
    assert_eq!(faults.count("too-many-descriptors"), 1);
    let status: u8 = m.read_obj(GuestAddress(0x12_0000)).unwrap();
    assert_eq!(status, 1, "IOERR");
}
