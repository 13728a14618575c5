//! virtio-vsock packets and its connection state machine: a fuzzed sequence of guest
//! packets (REQUEST, RW, CREDIT_UPDATE, CREDIT_REQUEST, SHUTDOWN, RST, unknown ops; right and
//! wrong CIDs and types; lengths that lie; honest and lying credit), rx buffers of any size
//! and direction, host-side actions on the Unix sockets the device connects to (accept,
//! write, read, close; two ports listen, one does not), socket readiness events, raw ring
//! and memory writes, and a tx rate limit with a fuzzed clock and its timer events.
//! Checks, beyond never a panic or a hang: every packet to the guest is well formed (host CID
//! to guest CID, stream type, our buffer size, a known op, its length inside the buffer and
//! zero but for RW); and while the input only did what a driver can do (no raw write), the
//! guest's view of each (guest port, host port) connection holds: a RESPONSE only answers an
//! outstanding REQUEST; RW, CREDIT_UPDATE and SHUTDOWN only on a connection that exists; no
//! RW after the device's SHUTDOWN or the guest's SHUTDOWN(receive); never more RW bytes than
//! the credit the guest last gave; never more bytes to the guest than the host wrote; and,
//! once the clock has run on, every tx packet was taken (the limit delays, never drops).
#![no_main]
use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use truecold_fuzz::{rate_limit, raw_write, Buf, Input, Ring};
use truecold_proto::parity::{GUEST_CID, HOST_CID};
use truecold_vmm::virtio::rate::RateLimit;
use truecold_vmm::virtio::vsock::*;
use truecold_vmm::virtio::{Ctx, Event, Faults, Poll, VirtioDevice};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::epoll::{Epoll, EpollEvent};

const MEM: u64 = 1 << 20;
const DATA_START: u64 = 0x1_0000;
const PORTS: [u32; 3] = [1024, 1025, 1026];

/// The socket path and the listeners of ports 1024 and 1025 (1026: nothing listens).
fn host() -> &'static (PathBuf, Vec<UnixListener>) {
    static H: OnceLock<(PathBuf, Vec<UnixListener>)> = OnceLock::new();
    H.get_or_init(|| {
        // libFuzzer's C main does not ignore SIGPIPE as a Rust main (the VMM's) does: a write
        // to a socket whose peer closed must be EPIPE here too, not the end of the process.
        // SAFETY: installs SIG_IGN for SIGPIPE, no handler code runs.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let dir = std::env::temp_dir().join(format!("tcfz-vsock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let uds = dir.join("v.sock");
        let ls = PORTS[..2]
            .iter()
            .map(|p| {
                let l = UnixListener::bind(dir.join(format!("v.sock_{p}"))).expect("bind");
                l.set_nonblocking(true).expect("non-blocking");
                l
            })
            .collect();
        (uds, ls)
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Requested,
    Established,
    /// The device may or may not have reset it (a duplicate REQUEST after a reset the guest
    /// has not seen yet): anything goes until its next RST or RESPONSE.
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Conn {
    state: State,
    buf_alloc: u32,
    fwd_cnt: u32,
    rx_cnt: u32,
    host_shut: bool,
    guest_shut_rcv: bool,
    guest_shut_send: bool,
    /// RSTs the device owes on these ports for packets it refused (answered in rx order,
    /// possibly after a new REQUEST: such an RST does not end the new connection).
    owed: u32,
    /// The device may owe RSTs the model cannot count: a packet reached a connection in
    /// `Unknown` state, which the device answers with an RST only if it no longer holds the
    /// connection. Until every queued RST has reached the guest (the device's
    /// `pending_resets()` is 0), an RST or a RESPONSE on these ports may come at any time.
    uncertain: bool,
}

impl Conn {
    /// The device closed it (an RST is owed for it).
    fn reset(&mut self) {
        let (owed, uncertain) = (self.owed + 1, self.uncertain);
        *self = Conn::idle();
        self.owed = owed;
        self.uncertain = uncertain;
    }

    fn idle() -> Self {
        Conn {
            state: State::Idle,
            buf_alloc: 0,
            fwd_cnt: 0,
            rx_cnt: 0,
            host_shut: false,
            guest_shut_rcv: false,
            guest_shut_send: false,
            owed: 0,
            uncertain: false,
        }
    }
}

type Key = (u32, u32);

/// A guest packet in flight: its descriptors and what the device makes of it (None: a
/// chain the device refuses whole).
struct Sent {
    descs: usize,
    hdr: Option<Hdr>,
    /// Its length lies (more than the data, or more than a packet holds).
    too_long: bool,
}

struct Model {
    conns: BTreeMap<Key, Conn>,
    to_guest: u64,
    host_wrote: u64,
}

impl Model {
    fn conn(&mut self, k: Key) -> &mut Conn {
        self.conns.entry(k).or_insert_with(Conn::idle)
    }

    /// The device took guest packet `s` (in tx order).
    fn apply(&mut self, s: &Sent) {
        let Some(h) = s.hdr else { return };
        let k = (h.src_port, h.dst_port);
        let c = self.conn(k);
        if s.too_long {
            if h.op != OP_RST {
                c.reset();
            }
            return;
        }
        let right =
            h.src_cid == GUEST_CID && h.dst_cid == u64::from(HOST_CID) && h.type_ == TYPE_STREAM;
        if h.op == OP_RST {
            let (owed, uncertain) = (c.owed, c.uncertain);
            *c = Conn::idle();
            c.owed = owed;
            c.uncertain = uncertain;
            return;
        }
        if !right {
            c.reset();
            return;
        }
        if h.op == OP_REQUEST {
            *c = match c.state {
                State::Idle => Conn {
                    state: State::Requested,
                    buf_alloc: h.buf_alloc,
                    fwd_cnt: h.fwd_cnt,
                    owed: c.owed,
                    uncertain: c.uncertain,
                    ..Conn::idle()
                },
                // A duplicate resets a live connection; after an unseen reset it is a new one.
                _ => Conn {
                    state: State::Unknown,
                    buf_alloc: h.buf_alloc,
                    fwd_cnt: h.fwd_cnt,
                    owed: c.owed + 1,
                    uncertain: c.uncertain,
                    ..Conn::idle()
                },
            };
            return;
        }
        if c.state == State::Idle {
            c.owed += 1; // answered by an RST, no connection
            return;
        }
        if c.state == State::Requested {
            // The connect may have failed (its RST not seen yet): then this one gets an RST.
            c.owed += 1;
        }
        if c.state == State::Unknown {
            // Answered by an RST only if the device no longer holds the connection.
            c.uncertain = true;
        }
        c.buf_alloc = h.buf_alloc;
        c.fwd_cnt = h.fwd_cnt;
        match h.op {
            OP_RW if c.guest_shut_send => c.reset(),
            OP_SHUTDOWN => {
                c.guest_shut_rcv |= h.flags & SHUTDOWN_RCV != 0;
                c.guest_shut_send |= h.flags & SHUTDOWN_SEND != 0;
                if c.guest_shut_rcv && c.guest_shut_send {
                    // Both ways: the device closes it once drained (here at once: the host
                    // never holds 64 KiB back) and answers RST.
                    c.reset();
                }
            }
            OP_RW | OP_CREDIT_UPDATE | OP_CREDIT_REQUEST => {}
            _ => c.reset(),
        }
    }

    /// The guest got packet `h` (whose bytes fill `len` of a `room`-byte buffer).
    fn got(&mut self, h: &Hdr, len: u32, room: u32, model: bool) {
        assert_eq!(h.src_cid, u64::from(HOST_CID), "{h:?}");
        assert_eq!(h.dst_cid, GUEST_CID, "{h:?}");
        assert_eq!(h.type_, TYPE_STREAM, "{h:?}");
        assert_eq!(h.buf_alloc, BUF_ALLOC, "{h:?}");
        assert_eq!(
            len as usize,
            HDR_LEN + h.len as usize,
            "used length vs header: {h:?}"
        );
        assert!(len <= room, "{len} bytes into a {room}-byte buffer");
        assert!(
            matches!(
                h.op,
                OP_RESPONSE | OP_RST | OP_RW | OP_CREDIT_UPDATE | OP_SHUTDOWN
            ),
            "op {h:?}"
        );
        assert_eq!(h.len == 0, h.op != OP_RW, "data only in RW: {h:?}");
        self.to_guest += u64::from(h.len);
        assert!(
            self.to_guest <= self.host_wrote,
            "more bytes to the guest than the host wrote"
        );
        if !model {
            return;
        }
        let c = self.conn((h.dst_port, h.src_port));
        if c.uncertain && matches!(c.state, State::Idle | State::Requested) {
            // An uncounted RST may still come, and the connection may be live or not.
            c.state = State::Unknown;
        }
        let ctx = format!("{h:?} on {c:?}");
        match h.op {
            // An owed RST may answer an older packet: then the connection may still be live.
            OP_RST if c.uncertain => {
                c.owed = c.owed.saturating_sub(1);
                c.state = State::Unknown;
            }
            OP_RST if c.state == State::Unknown => c.owed = c.owed.saturating_sub(1),
            OP_RST if c.owed > 0 => {
                c.owed -= 1;
                if c.state != State::Idle {
                    c.state = State::Unknown;
                }
            }
            OP_RST => *c = Conn::idle(),
            OP_RESPONSE => {
                assert!(
                    matches!(c.state, State::Requested | State::Unknown),
                    "{ctx}"
                );
                c.state = State::Established;
                c.rx_cnt = 0;
            }
            OP_RW => {
                assert!(
                    matches!(c.state, State::Established | State::Unknown),
                    "{ctx}"
                );
                if c.state == State::Established {
                    assert!(
                        !c.host_shut && !c.guest_shut_rcv,
                        "RW after a shutdown: {ctx}"
                    );
                    let credit = c.buf_alloc.saturating_sub(c.rx_cnt.wrapping_sub(c.fwd_cnt));
                    assert!(h.len <= credit, "past the guest's credit: {ctx}");
                }
                c.rx_cnt = c.rx_cnt.wrapping_add(h.len);
            }
            _ => {
                assert!(
                    matches!(c.state, State::Established | State::Unknown),
                    "{ctx}"
                );
                if h.op == OP_SHUTDOWN {
                    c.host_shut = true;
                }
            }
        }
    }
}

struct RxBuf {
    head: u16,
    at: u64,
    size: u32,
    writable: bool,
}

fuzz_target!(|data: &[u8]| {
    let (uds, listeners) = host();
    // What earlier inputs left in the backlogs is theirs.
    for l in listeners {
        while l.accept().is_ok() {}
    }
    let mut input = Input::new(data);
    let limit = rate_limit(&mut input, RateLimit::VSOCK_TX);
    let mut dev = Vsock::with_limit(uds.clone(), limit);
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM as usize)]).expect("memory");
    let mut rx = Ring::new(0, u16::from(input.u8()).max(1));
    let mut tx = Ring::new(Ring::SPAN, u16::from(input.u8()).max(1));
    let ev_ring = Ring::new(2 * Ring::SPAN, 16);
    let mut queues = vec![rx.queue(), tx.queue(), ev_ring.queue()];
    let ep = Epoll::new().expect("an epoll");
    let poll = Poll::new(&ep, 0);
    let mut faults = Faults::default();
    let mut now: u64 = 1 << 40;
    let mut next_data = DATA_START;
    let mut model_ok = true;
    let mut m = Model {
        conns: BTreeMap::new(),
        to_guest: 0,
        host_wrote: 0,
    };
    let mut tx_flight: VecDeque<Sent> = VecDeque::new();
    let mut rx_flight: VecDeque<RxBuf> = VecDeque::new();
    let mut streams: Vec<UnixStream> = Vec::new();
    let mut steps = 0;
    // Checked after each event: one event takes tx packets, then fills rx buffers; the next
    // may take more (the model applies them in that order).
    macro_rules! handle {
        ($ev:expr) => {{
            let mut cx = Ctx::new(&mem, &mut queues, &poll, &mut faults).at(now);
            dev.handle(&mut cx, $ev);
            check(
                &mem,
                &mut tx,
                &mut rx,
                &mut m,
                &mut tx_flight,
                &mut rx_flight,
                model_ok,
                dev.pending_resets(),
            );
        }};
    }
    while input.rest_len() > 0 && steps < 96 {
        steps += 1;
        match input.u8() % 10 {
            0..=2 => {
                let gport = 1000 + u32::from(input.u8() % 3);
                let hport = if input.u8().is_multiple_of(16) {
                    input.u32()
                } else {
                    PORTS[usize::from(input.u8() % 3)]
                };
                let op = match input.u8() % 16 {
                    0..=3 => OP_REQUEST,
                    4..=8 => OP_RW,
                    9 => OP_CREDIT_UPDATE,
                    10 => OP_CREDIT_REQUEST,
                    11 | 12 => OP_SHUTDOWN,
                    13 | 14 => OP_RST,
                    _ => input.u16(),
                };
                let dlen = if op == OP_RW {
                    usize::from(input.u16() % 300)
                } else {
                    0
                };
                let key = (gport, hport);
                let honest = m.conns.get(&key).map_or(0, |c| c.rx_cnt);
                let odd = input.u8().is_multiple_of(16);
                let h = Hdr {
                    src_cid: if odd { input.u64() } else { GUEST_CID },
                    dst_cid: if input.u8().is_multiple_of(16) {
                        input.u64()
                    } else {
                        u64::from(HOST_CID)
                    },
                    src_port: gport,
                    dst_port: hport,
                    len: if input.u8().is_multiple_of(16) {
                        input.u32()
                    } else {
                        dlen as u32
                    },
                    type_: if input.u8().is_multiple_of(16) {
                        input.u16()
                    } else {
                        TYPE_STREAM
                    },
                    op,
                    flags: u32::from(input.u8() % 4),
                    buf_alloc: if input.bool() { 65536 } else { input.u32() },
                    fwd_cnt: if input.bool() { honest } else { input.u32() },
                };
                let need = (HDR_LEN + dlen) as u64 + 64;
                if next_data + need > MEM {
                    next_data = DATA_START;
                    model_ok = false;
                }
                let at = next_data;
                next_data += need;
                mem.write_slice(&h.bytes(), GuestAddress(at))
                    .expect("header");
                let payload = input.bytes(dlen).to_vec();
                let _ = mem.write_slice(&payload, GuestAddress(at + HDR_LEN as u64));
                let mut bufs: Vec<Buf> = vec![(at, HDR_LEN as u32, false)];
                if dlen > 0 {
                    bufs.push((at + HDR_LEN as u64, dlen as u32, false));
                }
                let wrong = input.u8().is_multiple_of(32);
                if wrong {
                    bufs.push((at + need - 32, 16, true));
                }
                let in_flight = tx_flight.iter().map(|s| s.descs).sum();
                if tx.push(&mem, &bufs, in_flight).is_none() {
                    continue;
                }
                let too_long = h.len as usize > MAX_PKT_DATA || h.len as usize > dlen;
                tx_flight.push_back(Sent {
                    descs: bufs.len(),
                    hdr: (!wrong).then_some(h),
                    too_long,
                });
            }
            3 => {
                let size = u32::from(input.u16() % 1200);
                let writable = !input.u8().is_multiple_of(16);
                let at = next_data;
                if next_data + u64::from(size) + 64 > MEM {
                    next_data = DATA_START;
                    model_ok = false;
                    continue;
                }
                next_data += u64::from(size) + 64;
                let in_flight = rx_flight.len();
                let Some(head) = rx.push(&mem, &[(at, size, writable)], in_flight) else {
                    continue;
                };
                rx_flight.push_back(RxBuf {
                    head,
                    at,
                    size,
                    writable,
                });
            }
            4 => {
                for l in listeners {
                    while let Ok((s, _)) = l.accept() {
                        let _ = s.set_nonblocking(true);
                        streams.push(s);
                    }
                }
            }
            5 => {
                if streams.is_empty() {
                    continue;
                }
                let i = usize::from(input.u8()) % streams.len();
                let bytes = input.short().to_vec();
                if let Ok(n) = streams[i].write(&bytes) {
                    m.host_wrote += n as u64;
                }
            }
            6 => {
                if streams.is_empty() {
                    continue;
                }
                let i = usize::from(input.u8()) % streams.len();
                if input.bool() {
                    let mut b = [0u8; 4096];
                    while matches!(streams[i].read(&mut b), Ok(n) if n > 0) {}
                } else {
                    streams.swap_remove(i);
                }
            }
            7 => {
                let mut evs = [EpollEvent::default(); 16];
                let n = ep.wait(0, &mut evs).unwrap_or(0);
                for e in &evs[..n] {
                    let (_, token) = Poll::split(e.data());
                    handle!(Event::Backend {
                        token,
                        events: e.events()
                    });
                }
                if input.bool() {
                    handle!(Event::Queue(input.u16() % 4));
                }
            }
            8 => {
                now = now.saturating_add(u64::from(input.u32()) * 1000);
                if dev.wake_at().is_some_and(|t| t <= now) {
                    handle!(Event::Timer);
                }
                handle!(Event::Queue(1));
            }
            _ => {
                if input.bool() {
                    let r = if input.bool() { &mut rx } else { &mut tx };
                    r.hostile_offer(&mem, &mut input, MEM);
                } else {
                    raw_write(&mem, &mut input, MEM);
                }
                model_ok = false;
            }
        }
        check(
            &mem,
            &mut tx,
            &mut rx,
            &mut m,
            &mut tx_flight,
            &mut rx_flight,
            model_ok,
            dev.pending_resets(),
        );
    }
    handle!(Event::Queue(1));
    for _ in 0..=tx.size {
        let Some(t) = dev.wake_at() else { break };
        now = now.max(t);
        handle!(Event::Timer);
    }
    check(
        &mem,
        &mut tx,
        &mut rx,
        &mut m,
        &mut tx_flight,
        &mut rx_flight,
        model_ok,
        dev.pending_resets(),
    );
    assert!(dev.connections() <= MAX_CONNS);
    if model_ok {
        assert!(
            tx_flight.is_empty(),
            "{} tx packets never taken",
            tx_flight.len()
        );
        assert_eq!(dev.wake_at(), None, "a timer with an empty tx queue");
    }
});

fn check(
    mem: &GuestMemoryMmap,
    tx: &mut Ring,
    rx: &mut Ring,
    m: &mut Model,
    tx_flight: &mut VecDeque<Sent>,
    rx_flight: &mut VecDeque<RxBuf>,
    model: bool,
    resets_pending: usize,
) {
    for (id, len) in tx.take_used(mem) {
        // The guest can write its own used ring (a raw memory write): ids bound only then.
        assert!(!model || id < u32::from(tx.size));
        assert!(!model || len == 0, "a tx used length {len}");
        if model {
            let s = tx_flight
                .pop_front()
                .expect("a tx used entry for no packet");
            m.apply(&s);
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
        if !b.writable || (b.size as usize) < HDR_LEN {
            assert_eq!(len, 0, "a packet into a buffer that cannot hold one");
            continue;
        }
        let mut hb = [0u8; HDR_LEN];
        mem.read_slice(&mut hb, GuestAddress(b.at))
            .expect("rx header");
        m.got(&Hdr::parse(&hb), len, b.size, model);
    }
    if resets_pending == 0 {
        // Every RST the device queued has reached the guest: none is owed any more.
        for c in m.conns.values_mut() {
            c.owed = 0;
            c.uncertain = false;
        }
    }
}
