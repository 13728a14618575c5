//! virtio-net frames both ways as far as the device goes: the guest's frames on tx (a
//! virtio-net header with or without offload bits, frames of any size split over
//! descriptors, a writable buffer where none belongs), the host's frames through the backend
//! (a datagram socket pair in place of the tap) into rx buffers of any size and direction,
//! raw descriptor and memory writes, backend and queue events, and a tx rate limit with a
//! fuzzed clock and its timer events.
//! Checks, beyond never a panic or a hang: while the input only did what a driver can do
//! (no raw write), the host receives exactly the frames that must pass (no offload asked,
//! longer than the header, readable only), each once and in order, behind a header of zeros;
//! each rx buffer gets the next host frame whole with `num_buffers` 1, or used length 0 when
//! it is too small or of the wrong direction (that frame is dropped); every tx used length is
//! 0; and once the clock has run on, every tx frame was taken (the limit delays, never drops).
#![no_main]
use std::collections::VecDeque;
use std::os::unix::net::UnixDatagram;

use libfuzzer_sys::fuzz_target;
use truecold_fuzz::{rate_limit, raw_write, Buf, Input, Ring};
use truecold_vmm::virtio::net::{Net, RX, TX, VNET_HDR_LEN};
use truecold_vmm::virtio::rate::RateLimit;
use truecold_vmm::virtio::{Ctx, Event, Faults, Poll, VirtioDevice, BACKEND_TOKEN_BASE};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::epoll::Epoll;

const MEM: u64 = 1 << 20;
const DATA_START: u64 = 0x1_0000;

struct RxBuf {
    head: u16,
    descs: usize,
    bufs: Vec<(u64, u32)>,
    writable: bool,
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let limit = rate_limit(&mut input, RateLimit::NET_TX);
    let (dev_end, host) = UnixDatagram::pair().expect("a socket pair");
    dev_end.set_nonblocking(true).expect("non-blocking");
    host.set_nonblocking(true).expect("non-blocking");
    let mut net = Net::with_limit(Box::new(dev_end), [2, 0, 0, 0, 0, 1], limit);
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM as usize)]).expect("memory");
    let mut rx = Ring::new(0, u16::from(input.u8()).max(1));
    let mut tx = Ring::new(Ring::SPAN, u16::from(input.u8()).max(1));
    let mut queues = vec![rx.queue(), tx.queue()];
    let ep = Epoll::new().expect("an epoll");
    let poll = Poll::new(&ep, 0);
    let mut faults = Faults::default();
    let mut now: u64 = 1 << 40;
    let mut next_data = DATA_START;
    let mut model = true;
    // tx: frames that must reach the host, in order; chains in flight (descriptors each).
    let mut to_host: VecDeque<Vec<u8>> = VecDeque::new();
    let mut tx_flight: VecDeque<usize> = VecDeque::new();
    // rx: host frames sent, and the guest's buffers in flight.
    let mut from_host: VecDeque<Vec<u8>> = VecDeque::new();
    let mut rx_flight: VecDeque<RxBuf> = VecDeque::new();
    let mut alloc = |n: u64, model: &mut bool| {
        if next_data + n > MEM {
            next_data = DATA_START;
            *model = false;
        }
        let at = next_data;
        next_data += n;
        at
    };
    let mut steps = 0;
    while input.rest_len() > 0 && steps < 64 {
        steps += 1;
        match input.u8() % 8 {
            0 | 1 => {
                // The guest transmits one frame.
                let offload = input.u8().is_multiple_of(8);
                let len = usize::from(input.u16() % 2100);
                let mut frame = input.bytes(len).to_vec();
                frame.resize(len, 0xab);
                if len >= 2 && !offload {
                    frame[0] = 0;
                    frame[1] = 0;
                }
                let at = alloc(len as u64 + 64, &mut model);
                mem.write_slice(&frame, GuestAddress(at)).expect("frame");
                let pieces = 1 + usize::from(input.u8() % 3);
                let mut bufs: Vec<Buf> = Vec::new();
                let mut off = 0;
                for p in 0..pieces {
                    let l = if p + 1 == pieces {
                        len - off
                    } else {
                        len / pieces
                    };
                    if l > 0 || bufs.is_empty() {
                        bufs.push((at + off as u64, l as u32, false));
                    }
                    off += l;
                }
                let wrong = input.u8().is_multiple_of(16);
                if wrong {
                    bufs.push((at + len as u64, 16, true));
                }
                let in_flight = tx_flight.iter().sum();
                // At most 10 frames wait in the host's socket (net.unix.max_dgram_qlen's
                // default): past that the send fails and the device drops, as with a full tap.
                if to_host.len() >= 10 || tx.push(&mem, &bufs, in_flight).is_none() {
                    continue;
                }
                tx_flight.push_back(bufs.len());
                let passes = !wrong && len > VNET_HDR_LEN && frame[0] == 0 && frame[1] == 0;
                if passes {
                    let mut want = vec![0u8; VNET_HDR_LEN];
                    want.extend_from_slice(&frame[VNET_HDR_LEN..]);
                    to_host.push_back(want);
                }
            }
            2 => {
                // The guest posts an rx buffer (one or two descriptors).
                let size = u32::from(input.u16() % 2200);
                let writable = !input.u8().is_multiple_of(16);
                let at = alloc(u64::from(size) + 64, &mut model);
                let bufs: Vec<(u64, u32)> = if input.bool() && size > 1 {
                    vec![(at, size / 2), (at + u64::from(size / 2), size - size / 2)]
                } else {
                    vec![(at, size)]
                };
                let chain: Vec<Buf> = bufs.iter().map(|&(a, l)| (a, l, writable)).collect();
                let in_flight = rx_flight.iter().map(|b| b.descs).sum();
                let Some(head) = rx.push(&mem, &chain, in_flight) else {
                    continue;
                };
                rx_flight.push_back(RxBuf {
                    head,
                    descs: chain.len(),
                    bufs,
                    writable,
                });
            }
            3 => {
                // The host sends a frame (never empty: a tap has none).
                let len = 1 + usize::from(input.u16() % 2100);
                let mut frame = input.bytes(len).to_vec();
                frame.resize(len, 0xcd);
                if host.send(&frame).is_ok() {
                    from_host.push_back(frame);
                }
            }
            4 => {
                let ev = match input.u8() % 3 {
                    0 => Event::Queue(RX as u16),
                    1 => Event::Queue(TX as u16),
                    _ => Event::Backend {
                        token: BACKEND_TOKEN_BASE,
                        events: 1,
                    },
                };
                let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
                net.handle(&mut cx, ev);
            }
            5 => {
                now = now.saturating_add(u64::from(input.u32()) * 1000);
                if net.wake_at().is_some_and(|t| t <= now) {
                    let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
                    net.handle(&mut cx, Event::Timer);
                }
            }
            6 => {
                let r = if input.bool() { &mut rx } else { &mut tx };
                r.hostile_offer(&mem, &mut input, MEM);
                model = false;
            }
            _ => {
                raw_write(&mem, &mut input, MEM);
                model = false;
            }
        }
        check(
            &mem,
            &host,
            &mut tx,
            &mut rx,
            &mut to_host,
            &mut tx_flight,
            &mut from_host,
            &mut rx_flight,
            model,
        );
    }
    // The clock runs on: every frame the guest queued is taken.
    let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
    net.handle(&mut cx, Event::Queue(TX as u16));
    for _ in 0..=tx.size {
        let Some(t) = net.wake_at() else { break };
        now = now.max(t);
        let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
        net.handle(&mut cx, Event::Timer);
    }
    check(
        &mem,
        &host,
        &mut tx,
        &mut rx,
        &mut to_host,
        &mut tx_flight,
        &mut from_host,
        &mut rx_flight,
        model,
    );
    if model {
        assert!(
            tx_flight.is_empty(),
            "{} tx frames never taken",
            tx_flight.len()
        );
        assert!(
            to_host.is_empty(),
            "{} frames never reached the host",
            to_host.len()
        );
        assert_eq!(net.wake_at(), None, "a timer with an empty tx queue");
    }
});

#[allow(clippy::too_many_arguments)]
fn check(
    mem: &GuestMemoryMmap,
    host: &UnixDatagram,
    tx: &mut Ring,
    rx: &mut Ring,
    to_host: &mut VecDeque<Vec<u8>>,
    tx_flight: &mut VecDeque<usize>,
    from_host: &mut VecDeque<Vec<u8>>,
    rx_flight: &mut VecDeque<RxBuf>,
    model: bool,
) {
    let mut got = vec![0u8; 4096];
    while let Ok(n) = host.recv(&mut got) {
        if model {
            let want = to_host
                .pop_front()
                .expect("a frame the guest never sent (or one refused)");
            assert!(
                got[..n] == want[..],
                "the host got another frame than the guest's"
            );
        }
    }
    for (id, len) in tx.take_used(mem) {
        // The guest can write its own used ring (a raw memory write): ids bound only then.
        assert!(!model || id < u32::from(tx.size));
        assert!(!model || len == 0, "a tx used length {len}");
        if model {
            tx_flight.pop_front().expect("a tx used entry for no frame");
        }
    }
    for (id, len) in rx.take_used(mem) {
        assert!(!model || id < u32::from(rx.size));
        if !model {
            continue;
        }
        let b = rx_flight
            .pop_front()
            .expect("an rx used entry for no buffer");
        assert_eq!(id, u32::from(b.head), "rx buffers used out of order");
        let frame = from_host
            .pop_front()
            .expect("an rx frame the host never sent");
        let room: u32 = b.bufs.iter().map(|x| x.1).sum();
        if !b.writable || (room as usize) < frame.len() {
            assert_eq!(len, 0, "a frame into a buffer that cannot hold it");
            continue;
        }
        assert_eq!(len as usize, frame.len(), "rx used length");
        let mut back = Vec::new();
        for &(a, l) in &b.bufs {
            let mut part = vec![0u8; l as usize];
            mem.read_slice(&mut part, GuestAddress(a)).expect("rx data");
            back.extend_from_slice(&part);
        }
        let mut want = frame.clone();
        if want.len() >= VNET_HDR_LEN {
            want[10..12].copy_from_slice(&1u16.to_le_bytes());
        }
        assert!(
            back[..frame.len()] == want[..],
            "the guest got another frame than the host's"
        );
    }
}
