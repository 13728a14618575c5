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
/// (name, descriptors, avail ring, avail idx, the refusal kind expected).
type Scenario = (&'static str, Vec<Desc>, Vec<u16>, u16, Option<&'static str>);

/// The scenarios: (name, descriptors, avail ring, avail idx, refusal kind expected from
/// every device when the chain is popped, or None when it need not be).
fn scenarios() -> Vec<Scenario> {
    vec![
        (
            "address outside guest memory",
            vec![(0xffff_ffff_0000, 64, 0, 0)],
            vec![0],
            1,
            Some("out-of-range"),
        ),
        (
            "buffer crossing the end of memory",
            vec![(0x3f_fff0, 64, 0, 0)],
            vec![0],
            1,
            Some("out-of-range"),
        ),
        (
            "huge length",
            vec![(0x10_0000, u32::MAX, 0, 0)],
            vec![0],
            1,
            Some("out-of-range"),
        ),
        (
            "a loop of large buffers",
            vec![(0x10_0000, 1 << 20, NEXT, 1), (0x20_0000, 1 << 20, NEXT, 0)],
            vec![0],
            1,
            Some("too-long"),
        ),
        (
            "a loop of small buffers",
            vec![(0x10_0000, 64, NEXT, 1), (0x10_0100, 64, NEXT, 0)],
            vec![0],
            1,
            None,
        ),
        (
            "zero lengths",
            vec![(0x10_0000, 0, NEXT, 1), (0x11_0000, 0, WRITE, 0)],
            vec![0],
            1,
            None,
        ),
        (
            "readable after writable",
            vec![(0x10_0000, 64, WRITE | NEXT, 1), (0x11_0000, 64, 0, 0)],
            vec![0],
            1,
            Some("wrong-order"),
        ),
        ("head index out of the queue", vec![], vec![200], 1, None),
        (
            "avail index far ahead",
            vec![(0x10_0000, 64, 0, 0)],
            vec![0],
            0x8000,
            None,
        ),
        (
            "next index out of the queue",
            vec![(0x10_0000, 64, NEXT, 999)],
            vec![0],
            1,
            None,
        ),
        (
            "indirect without the feature, bogus table",
            vec![(0xffff_0000_0000, 17, INDIRECT, 0)],
            vec![0],
            1,
            Some("indirect"),
        ),
        (
            // A well-formed table of 4,096 descriptors inside memory: never followed.
            "indirect without the feature, a large valid table",
            vec![(0x20_0000, 16 * 4096, INDIRECT, 0)],
            vec![0],
            1,
            Some("indirect"),
        ),
        (
            "indirect second in the chain",
            vec![(0x10_0000, 64, NEXT, 1), (0x20_0000, 64, INDIRECT, 0)],
            vec![0],
            1,
            Some("indirect"),
        ),
    ]
}

/// Each device with the queue under attack and whether it takes chains from that queue
/// now (vsock's rx queue is only read when there is something to send); the sockets kept
/// alive for the test.
#[allow(clippy::type_complexity)]
fn devices(
    dir: &std::path::Path,
) -> (
    Vec<(Box<dyn VirtioDevice>, u16, bool)>,
    Vec<std::os::unix::net::UnixDatagram>,
) {
    // The tap is O_NONBLOCK; so are the fake ones (a blocking one would wait forever).
    let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let (c, d) = std::os::unix::net::UnixDatagram::pair().unwrap();
    c.set_nonblocking(true).unwrap();
    // A frame waits for the rx queue.
    d.send(&[0u8; 60]).unwrap();
    let devs: Vec<(Box<dyn VirtioDevice>, u16, bool)> = vec![
        (
            Box::new(Blk::new(Box::new(MemDisk::new(vec![0; 1 << 16])))),
            0,
            true,
        ),
        (Box::new(Net::new(Box::new(a), [2, 0, 0, 0, 0, 1])), 1, true),
        (Box::new(Net::new(Box::new(c), [0; 6])), 0, true),
        (Box::new(Vsock::new(dir.join("v.sock"))), 1, true),
        (Box::new(Vsock::new(dir.join("v.sock"))), 0, false),
    ];
    (devs, vec![b, d])
}

#[test]
fn hostile_queues_end_in_typed_refusals() {
    let dir = tempfile::tempdir().unwrap();
    for (name, descs, ring, idx, want) in scenarios() {
        let (devs, _keep) = devices(dir.path());
        for (mut dev, target, consumes) in devs {
            let m = mem();
            let n = dev.queue_max_sizes().len();
            let bases: Vec<u64> = (0..n as u64).map(|i| 0x1000 * (i + 1) * 4).collect();
            let mut queues: Vec<Queue> = bases.iter().map(|b| raw_queue(*b)).collect();
            let base = bases[target as usize];
            for (i, d) in descs.iter().enumerate() {
                put_desc(&m, base, i as u16, d.0, d.1, d.2, d.3);
            }
            put_avail(&m, base, &ring, idx);
            let ep = Epoll::new().unwrap();
            let poll = Poll::new(&ep, 0);
            let mut faults = Faults::default();
            let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
            dev.handle(&mut cx, Event::Queue(target));
            // Twice: a refused chain is not offered again, nothing hangs.
            dev.handle(&mut cx, Event::Queue(target));
            let used = used_idx(&m, base);
            assert!(used <= 1, "{name}: {used} used entries");
            if let (Some(kind), true) = (want, consumes) {
                assert_eq!(
                    faults.count(kind),
                    1,
                    "{name} on device {} queue {target}: {faults:?}",
                    dev.device_type()
                );
                assert_eq!(used, 1, "{name}: the refused chain is returned");
            }
        }
    }
}

#[test]
fn hostile_blk_chains_get_a_status_when_they_can() {
    let m = mem();
    let mut blk = Blk::new(Box::new(MemDisk::new(vec![0; 4096])));
    let mut queues = vec![raw_queue(0x1000)];
    // A loop of readable headers: no writable byte → no status, used length 0.
    put_desc(&m, 0x1000, 0, 0x10_0000, 16, NEXT, 1);
    put_desc(&m, 0x1000, 1, 0x10_0000, 16, NEXT, 0);
    // Zero-length header + 1 status byte: IOERR.
    put_desc(&m, 0x1000, 2, 0x10_0000, 0, NEXT, 3);
    put_desc(&m, 0x1000, 3, 0x12_0000, 1, WRITE, 0);
    put_avail(&m, 0x1000, &[0, 2], 2);
    let ep = Epoll::new().unwrap();
    let poll = Poll::new(&ep, 0);
    let mut faults = Faults::default();
    let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults);
    blk.handle(&mut cx, Event::Queue(0));
    assert_eq!(used_idx(&m, 0x1000), 2);
    assert_eq!(faults.count("no-status"), 1);
    assert_eq!(faults.count("short-header"), 1);
    let status: u8 = m.read_obj(GuestAddress(0x12_0000)).unwrap();
    assert_eq!(status, 1, "IOERR");
}
