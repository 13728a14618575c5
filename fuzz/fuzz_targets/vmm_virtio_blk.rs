//! virtio-blk requests as a driver (or a hostile guest) makes them: a fuzzed sequence of
//! requests (IN, OUT, FLUSH, GET_ID, any other type; sectors in and past the disk; lengths
//! of any size, split over descriptors, buffers in either direction), raw descriptor and
//! avail ring writes, guest memory writes, notifications, and a rate limit with a fuzzed
//! clock and its timer events, against a `Blk` over an in-memory disk of 64 KiB.
//! Checks, beyond never a panic or a hang: every used entry names a chain the ring holds;
//! and while the input only made requests a driver can make (no raw write), a shadow disk
//! model holds: each request's status is the one the virtio spec asks for (OK, IOERR for a
//! range past the end, a length not a multiple of 512 or a buffer of the wrong direction,
//! UNSUPP for an unknown type), its used length is the bytes it wrote, an IN reads exactly the
//! shadow's bytes, an OUT writes exactly the guest's bytes, and once the clock has run on
//! every request was answered exactly once, in order (the rate limit delays, never drops).
#![no_main]
use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use truecold_fuzz::{rate_limit, raw_write, Buf, Input, Ring};
use truecold_vmm::virtio::blk::{Blk, MemDisk, SERIAL};
use truecold_vmm::virtio::rate::RateLimit;
use truecold_vmm::virtio::{Ctx, Event, Faults, Poll, VirtioDevice};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::epoll::Epoll;

const MEM: u64 = 1 << 20;
const DISK: usize = 64 << 10;
const DATA_START: u64 = 0x1_0000;
const T_IN: u32 = 0;
const T_OUT: u32 = 1;
const T_FLUSH: u32 = 4;
const T_GET_ID: u32 = 8;
const S_OK: u8 = 0;
const S_IOERR: u8 = 1;
const S_UNSUPP: u8 = 2;

/// A request the model knows: what the device must answer.
struct Req {
    head: u16,
    descs: usize,
    status_at: u64,
    status: u8,
    used_len: u32,
    /// IN: where the data landed and the disk offset; OUT: the disk offset and the bytes.
    read: Option<(Vec<(u64, u32)>, usize)>,
    write: Option<(usize, Vec<u8>)>,
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let limit = rate_limit(&mut input, RateLimit::BLK);
    let ring_size = u16::from(input.u8()).max(1);
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM as usize)]).expect("memory");
    let pattern: Vec<u8> = (0..DISK).map(|i| (i * 7 % 251) as u8).collect();
    let mut shadow = pattern.clone();
    let mut blk = Blk::with_limit(Box::new(MemDisk::new(pattern)), limit);
    let mut ring = Ring::new(0, ring_size);
    let mut queues = vec![ring.queue()];
    let ep = Epoll::new().expect("an epoll");
    let poll = Poll::new(&ep, 0);
    let mut faults = Faults::default();
    let mut now: u64 = 1 << 40;
    let mut next_data = DATA_START;
    let mut pending: VecDeque<Req> = VecDeque::new();
    let mut in_flight = 0usize;
    let mut model = true;
    let mut steps = 0;
    let check = |ring: &mut Ring,
                 pending: &mut VecDeque<Req>,
                 in_flight: &mut usize,
                 shadow: &mut Vec<u8>,
                 model: bool| {
        for (id, len) in ring.take_used(&mem) {
            // The guest can write its own used ring (a raw memory write): ids bound only then.
            assert!(
                !model || id < u32::from(ring.size),
                "used id {id} outside the ring"
            );
            if !model {
                continue;
            }
            let r = pending
                .pop_front()
                .expect("a used entry for a request never made");
            assert_eq!(id, u32::from(r.head), "answered out of order");
            *in_flight -= r.descs;
            let mut st = [0u8];
            mem.read_slice(&mut st, GuestAddress(r.status_at))
                .expect("status");
            assert_eq!(st[0], r.status, "status of request at head {id}");
            assert_eq!(len, r.used_len, "used length of request at head {id}");
            if r.status != S_OK {
                continue;
            }
            if let Some((bufs, off)) = &r.read {
                let mut at = *off;
                for &(a, l) in bufs {
                    let mut got = vec![0u8; l as usize];
                    mem.read_slice(&mut got, GuestAddress(a)).expect("data");
                    assert_eq!(got, shadow[at..at + l as usize], "IN data at {at}");
                    at += l as usize;
                }
            }
            if let Some((off, bytes)) = &r.write {
                shadow[*off..*off + bytes.len()].copy_from_slice(bytes);
            }
        }
    };
    while input.rest_len() > 0 && steps < 64 {
        steps += 1;
        match input.u8() % 6 {
            0 | 1 => {
                // A request a driver could make (or a wrong one).
                let kind = match input.u8() % 6 {
                    0 | 1 => T_IN,
                    2 | 3 => T_OUT,
                    4 => [T_FLUSH, T_GET_ID][usize::from(input.bool())],
                    _ => input.u32(),
                };
                let sector = if input.bool() {
                    input.u64()
                } else {
                    u64::from(input.u8())
                };
                let len = if input.bool() {
                    usize::from(input.u16() % 8192)
                } else {
                    512 * usize::from(input.u8() % 9)
                };
                let flip = input.u8().is_multiple_of(8);
                let pieces = 1 + usize::from(input.u8() % 3);
                // Data into the device for OUT (and for a flipped IN), out of it otherwise.
                let data_writable = (kind != T_OUT) ^ flip;
                let need = 16 + len as u64 + 1 + 16;
                if next_data + need > MEM {
                    // Buffers reused while requests may be pending: no longer a driver's.
                    next_data = DATA_START;
                    model = false;
                }
                let hdr_at = next_data;
                let data_at = hdr_at + 16;
                let status_at = data_at + len as u64;
                next_data += need;
                let mut hdr = [0u8; 16];
                hdr[..4].copy_from_slice(&kind.to_le_bytes());
                hdr[8..].copy_from_slice(&sector.to_le_bytes());
                mem.write_slice(&hdr, GuestAddress(hdr_at)).expect("header");
                let bytes = input.bytes(len).to_vec();
                let mut out = bytes.clone();
                out.resize(len, 0x5a);
                mem.write_slice(&out, GuestAddress(data_at)).expect("data");
                let mut bufs: Vec<Buf> = vec![(hdr_at, 16, false)];
                let mut data_bufs = Vec::new();
                if len > 0 {
                    let cut = len / pieces;
                    let mut at = 0;
                    for p in 0..pieces {
                        let l = if p + 1 == pieces { len - at } else { cut };
                        if l > 0 {
                            bufs.push((data_at + at as u64, l as u32, data_writable));
                            data_bufs.push((data_at + at as u64, l as u32));
                        }
                        at += l;
                    }
                }
                bufs.push((status_at, 1, true));
                let Some(head) = ring.push(&mem, &bufs, in_flight) else {
                    continue;
                };
                in_flight += bufs.len();
                // The model: the spec's answer to this request.
                let sectors = (DISK / 512) as u64;
                let in_range = len % 512 == 0
                    && sector
                        .checked_add(len as u64 / 512)
                        .is_some_and(|e| e <= sectors);
                let (readable_data, writable_data) =
                    if data_writable { (0, len) } else { (len, 0) };
                let mut req = Req {
                    head,
                    descs: bufs.len(),
                    status_at,
                    status: S_IOERR,
                    used_len: 1,
                    read: None,
                    write: None,
                };
                match kind {
                    T_IN if readable_data == 0 && in_range => {
                        req.status = S_OK;
                        req.used_len = len as u32 + 1;
                        req.read = Some((data_bufs, sector as usize * 512));
                    }
                    T_OUT if writable_data == 0 && in_range => {
                        req.status = S_OK;
                        req.write = Some((sector as usize * 512, out));
                    }
                    T_IN | T_OUT => {}
                    T_FLUSH => req.status = S_OK,
                    T_GET_ID => {
                        if readable_data != 0 {
                            // GET_ID ignores readable data; its id goes to the writable bytes.
                            req.status = S_OK;
                        } else {
                            let n = writable_data.min(20).min(SERIAL.len());
                            req.status = S_OK;
                            req.used_len = n as u32 + 1;
                        }
                    }
                    _ => req.status = S_UNSUPP,
                }
                pending.push_back(req);
            }
            2 => {
                let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
                blk.handle(&mut cx, Event::Queue(0));
            }
            3 => {
                now = now.saturating_add(u64::from(input.u32()) * 1000);
                if blk.wake_at().is_some_and(|t| t <= now) {
                    let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
                    blk.handle(&mut cx, Event::Timer);
                }
            }
            4 => {
                // A raw descriptor and avail entry: anything a hostile driver writes.
                ring.hostile_offer(&mem, &mut input, MEM);
                model = false;
            }
            _ => {
                raw_write(&mem, &mut input, MEM);
                model = false;
            }
        }
        check(&mut ring, &mut pending, &mut in_flight, &mut shadow, model);
    }
    // The clock runs on: every request is served (a limit delays, never drops).
    let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
    blk.handle(&mut cx, Event::Queue(0));
    for _ in 0..=ring.size {
        let Some(t) = blk.wake_at() else { break };
        now = now.max(t);
        let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
        blk.handle(&mut cx, Event::Timer);
    }
    check(&mut ring, &mut pending, &mut in_flight, &mut shadow, model);
    if model {
        assert!(
            pending.is_empty(),
            "{} requests never answered",
            pending.len()
        );
        assert_eq!(blk.wake_at(), None, "a timer with an empty queue");
        let mut disk = vec![0u8; DISK];
        blk.disk().read_at(&mut disk, 0).expect("the disk");
        assert!(disk == shadow, "the disk is not what the requests wrote");
    }
});
