//! The device bus against the real guest protocol (a Linux guest's reply and record lines),
//! driven exit by exit. Needs /dev/kvm for the VM the serial irqfd hangs off.
mod common;

use truecold_proto::kinds::Transport;
use truecold_proto::{
    BootId, ErrorCode, GuestRecord, Message, Phase, Reply, Workload, NONCE_LEN, PORT_CHALLENGE,
    PORT_DOORBELL, PORT_EXIT, PORT_RECORD,
};
use truecold_vmm::devices::{Action, Bus, StopReason};

fn bus_with(probe: bool, transport: Transport) -> (kvm_ioctls::Kvm, kvm_ioctls::VmFd, Bus) {
    common::require_kvm();
    let (kvm, _) = truecold_vmm::kvm::open().unwrap();
    let vm = truecold_vmm::vm::create(&kvm).unwrap();
    let bus = Bus::new(&vm, probe, transport, Box::new(std::io::sink())).unwrap();
    (kvm, vm, bus)
}

fn bus(probe: bool) -> (kvm_ioctls::Kvm, kvm_ioctls::VmFd, Bus) {
    bus_with(probe, Transport::Ports)
}

fn boot_id() -> BootId {
    BootId::parse("0123abcd-0000-4000-8000-00000000beef").unwrap()
}

fn record() -> GuestRecord {
    GuestRecord {
        boot_id: Some(boot_id()),
        t_init_ns: 1,
        t_ready_ns: 2,
        t_reply_ns: 3,
        t_record_ns: 4,
        mem_configured: 128 << 20,
        mem_firmware_ram: 128 << 20,
        mem_total: 100 << 20,
        mem_present: (128 << 20) - 4096,
        mem_managed: 100 << 20,
        mem_probe: 4 << 20,
        cpus: 2,
        platform: Default::default(),
        workload: Workload::BenchOk,
        code: ErrorCode::Ok,
    }
}

fn ready_and_read_nonce(b: &mut Bus) -> [u8; NONCE_LEN] {
    let out = |b: &mut Bus, port, data: &[u8], t| b.io_out(0, port, data, t).unwrap();
    assert_eq!(
        out(b, PORT_DOORBELL, &[Phase::InitStart as u8], 10),
        Action::Continue
    );
    assert_eq!(
        out(b, PORT_DOORBELL, &[Phase::Ready as u8], 20),
        Action::Continue
    );
    let mut nonce = [0u8; NONCE_LEN];
    // string I/O may arrive in pieces
    b.io_in(0, PORT_CHALLENGE, &mut nonce[..5]);
    b.io_in(0, PORT_CHALLENGE, &mut nonce[5..]);
    assert_eq!(
        b.liveness.nonce.as_deref(),
        Some(truecold_proto::hex(&nonce).as_str())
    );
    nonce
}

#[test]
fn linux_guest_sequence_reaches_strict_ready() {
    let (_k, _v, mut b) = bus(false);
    let nonce = ready_and_read_nonce(&mut b);
    let reply = Message::Reply(Reply::new(&nonce, boot_id())).encode();
    let (a, z) = reply.as_bytes().split_at(7);
    b.io_out(1, PORT_RECORD, a, 30).unwrap();
    assert_eq!(b.stamps.strict_ready, None, "not before the line completes");
    b.io_out(1, PORT_RECORD, z, 31).unwrap();
    assert_eq!(b.stamps.strict_ready, Some(31));
    assert!(b.liveness.verified);
    let rec = Message::Record(record()).encode();
    b.io_out(0, PORT_RECORD, rec.as_bytes(), 40).unwrap();
    assert_eq!(b.stamps.record, Some(40));
    assert_eq!(b.record, Some(record()));
    assert_eq!(
        b.io_out(0, PORT_EXIT, &[0], 50).unwrap(),
        Action::Stop(StopReason::ExitPort(0))
    );
    assert_eq!(b.stamps.init_doorbell, Some(10));
    assert_eq!(b.stamps.ready_doorbell, Some(20));
    assert!(b.protocol_errors.is_empty(), "{:?}", b.protocol_errors);
}

#[test]
fn only_the_verified_replys_boot_id_is_kept() {
    let (_k, _v, mut b) = bus(false);
    let nonce = ready_and_read_nonce(&mut b);
    // An unverified reply first: neither its boot id nor strict-ready.
    let mut wrong = nonce;
    wrong[0] ^= 1;
    let other = truecold_proto::BootId::parse("11111111-2222-4333-8444-555555555555").unwrap();
    let bad = Message::Reply(Reply::new(&wrong, other)).encode();
    b.io_out(0, PORT_RECORD, bad.as_bytes(), 25).unwrap();
    assert_eq!(b.liveness.reply_boot_id, None);
    // The verified one sets it …
    let good = Message::Reply(Reply::new(&nonce, boot_id())).encode();
    b.io_out(0, PORT_RECORD, good.as_bytes(), 30).unwrap();
    assert_eq!(b.liveness.reply_boot_id, Some(boot_id()));
    assert_eq!(b.stamps.strict_ready, Some(30));
    // … and a later reply, even a verifying one for another boot id, changes nothing.
    let later = Message::Reply(Reply::new(&nonce, other)).encode();
    b.io_out(0, PORT_RECORD, later.as_bytes(), 35).unwrap();
    assert_eq!(b.liveness.reply_boot_id, Some(boot_id()));
    assert_eq!(b.stamps.strict_ready, Some(30));
    assert_eq!(b.protocol_error_count, 2, "{:?}", b.protocol_errors);
}

#[test]
fn wrong_binding_is_not_strict_ready() {
    let (_k, _v, mut b) = bus(false);
    let mut nonce = ready_and_read_nonce(&mut b);
    nonce[0] ^= 1;
    let reply = Message::Reply(Reply::new(&nonce, boot_id())).encode();
    b.io_out(0, PORT_RECORD, reply.as_bytes(), 30).unwrap();
    assert!(!b.liveness.verified);
    assert_eq!(b.stamps.strict_ready, None);
    assert_eq!(b.protocol_errors.len(), 1);
}

#[test]
fn reply_before_ready_and_garbage_are_counted() {
    let (_k, _v, mut b) = bus(false);
    let mut n = [0u8; NONCE_LEN];
    b.io_in(0, PORT_CHALLENGE, &mut n);
    let reply = Message::Reply(Reply::new(&n, boot_id())).encode();
    b.io_out(0, PORT_RECORD, reply.as_bytes(), 1).unwrap();
    b.io_out(0, PORT_RECORD, b"TC1 nonsense\n\xff\xfe\n", 2)
        .unwrap();
    b.io_out(0, PORT_DOORBELL, &[77], 3).unwrap();
    b.io_out(0, PORT_DOORBELL, &[1, 2], 4).unwrap();
    assert!(!b.liveness.verified);
    assert_eq!(b.protocol_errors.len(), 6, "{:?}", b.protocol_errors);
    // an overlong line is bounded
    let long = vec![b'a'; 10_000];
    b.io_out(0, PORT_RECORD, &long, 5).unwrap();
    b.io_out(0, PORT_RECORD, b"\n", 6).unwrap();
    assert_eq!(b.protocol_errors.len(), 7);
}

#[test]
fn reset_unknown_ports_and_mmio() {
    let (_k, _v, mut b) = bus(false);
    assert_eq!(
        b.io_out(0, 0x64, &[0xfe], 1).unwrap(),
        Action::Stop(StopReason::Reset)
    );
    assert_eq!(b.io_out(0, 0x80, &[0], 1).unwrap(), Action::Continue);
    assert_eq!(b.io_out(0, 0x80, &[0], 1).unwrap(), Action::Continue);
    let mut d = [0u8; 2];
    b.io_in(0, 0x1234, &mut d);
    assert_eq!(d, [0xff, 0xff]);
    // probe ports are unknown to a Linux guest's bus
    b.io_out(0, truecold_vmm::probe::PORT_AP, &[1], 1).unwrap();
    b.mmio(0xfed0_0010, Some(&mut d));
    b.mmio(0xfed0_0020, None);
    assert_eq!(b.exits.unknown_ports.get("0x80"), Some(&2));
    assert_eq!(b.exits.unknown_ports.get("0x1234"), Some(&1));
    assert_eq!(b.exits.unknown_ports.get("0xf18"), Some(&1));
    assert_eq!(b.exits.unknown_mmio, 2);
    assert_eq!(b.exits.unknown_mmio_pages.get("0xfed00000"), Some(&2));
    assert_eq!(d, [0xff, 0xff]);
    assert!(b.ap_checkins.is_empty());
    // the serial answers register reads without a console
    let mut lsr = [0u8];
    b.io_in(0, 0x3fd, &mut lsr);
    assert_ne!(lsr[0] & 0x20, 0, "THR empty");
    b.io_out(0, 0x3f8, b"x", 1).unwrap();
    assert_eq!(b.exits.serial, 2);
}

#[test]
fn probe_echo_must_match() {
    let (_k, _v, mut b) = bus(true);
    let mut nonce = ready_and_read_nonce(&mut b);
    nonce[15] ^= 0x80;
    b.io_out(0, truecold_vmm::probe::PORT_ECHO, &nonce, 30)
        .unwrap();
    assert!(!b.liveness.verified);
    assert_eq!(b.stamps.strict_ready, None);
    let (_k, _v, mut b) = bus(true);
    let nonce = ready_and_read_nonce(&mut b);
    b.io_out(0, truecold_vmm::probe::PORT_ECHO, &nonce[..3], 30)
        .unwrap();
    b.io_out(0, truecold_vmm::probe::PORT_ECHO, &nonce[3..], 31)
        .unwrap();
    assert!(b.liveness.verified);
    assert_eq!(b.stamps.strict_ready, Some(31));
}

// ---- the serial transport ----

const COM1: u16 = 0x3f8;
const LSR: u16 = COM1 + 5;
const LSR_DATA_READY: u8 = 1;

/// The guest's polled read of one received byte, if the 8250 says one is there.
fn guest_rx(b: &mut Bus) -> Option<u8> {
    let mut lsr = [0u8];
    b.io_in(0, LSR, &mut lsr);
    if lsr[0] & LSR_DATA_READY == 0 {
        return None;
    }
    let mut d = [0u8];
    b.io_in(0, COM1, &mut d);
    Some(d[0])
}

#[test]
fn serial_input_beyond_the_fifo_waits_and_is_never_dropped() {
    let (_k, _v, mut b) = bus_with(false, Transport::Serial);
    let input: Vec<u8> = (0..200u8).collect();
    let mut got = Vec::new();
    let mut rest = &input[..];
    while !rest.is_empty() {
        let took = b.serial_input(rest);
        assert!(took > 0, "an empty FIFO takes bytes");
        assert_eq!(took, rest.len().min(64));
        rest = &rest[took..];
        if !rest.is_empty() {
            assert_eq!(b.serial_input_room(), 0);
            assert_eq!(b.serial_input(rest), 0, "a full FIFO takes nothing");
        }
        while let Some(x) = guest_rx(&mut b) {
            got.push(x);
        }
    }
    assert_eq!(got, input);
    assert_eq!(b.protocol_error_count, 0, "{:?}", b.protocol_errors);
}

#[test]
fn stdin_pump_delivers_every_byte_through_the_8250() {
    use std::io::Write;
    let (_k, _v, b) = bus_with(false, Transport::Serial);
    let bus = std::sync::Mutex::new(b);
    let drained = truecold_vmm::devices::lock(&bus).input_drained().unwrap();
    let stop = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap();
    let (mut host, mut input) = std::os::unix::net::UnixStream::pair().unwrap();
    // More than the 64-byte FIFO, several times over, with a nonce line in the middle.
    let mut sent: Vec<u8> = (0..=255u8).cycle().take(300).collect();
    sent.extend_from_slice(Message::Nonce([7; NONCE_LEN]).encode().as_bytes());
    sent.extend((0..=255u8).cycle().take(300));
    let mut got = Vec::new();
    let stats = std::thread::scope(|s| {
        let pump = s.spawn(|| truecold_vmm::devices::pump_input(&bus, &mut input, &drained, &stop));
        host.write_all(&sent).unwrap();
        drop(host); // end of file: the pump delivers what it read, then ends
        loop {
            let finished = pump.is_finished();
            let byte = guest_rx(&mut truecold_vmm::devices::lock(&bus));
            match byte {
                Some(x) => got.push(x),
                // Once the pump has ended, an empty FIFO is the end of the input.
                None if finished => break,
                None => std::thread::yield_now(),
            }
        }
        pump.join().unwrap()
    });
    assert_eq!(got.len(), sent.len());
    assert_eq!(got, sent);
    assert_eq!(stats.read, sent.len() as u64);
    assert_eq!(stats.delivered, sent.len() as u64);
    assert_eq!(stats.end, truecold_vmm::devices::InputEnd::Eof);
    let b = bus.into_inner().unwrap();
    assert_eq!(b.protocol_error_count, 0, "{:?}", b.protocol_errors);
}

#[test]
fn stdin_pump_stops_when_told_and_says_what_it_did_not_deliver() {
    use std::io::Write;
    let (_k, _v, b) = bus_with(false, Transport::Serial);
    let bus = std::sync::Mutex::new(b);
    let drained = truecold_vmm::devices::lock(&bus).input_drained().unwrap();
    let stop = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap();
    let (mut host, mut input) = std::os::unix::net::UnixStream::pair().unwrap();
    // Nobody reads the FIFO: 64 bytes go in, the rest wait until the stop.
    host.write_all(&[b'x'; 100]).unwrap();
    let stats = std::thread::scope(|s| {
        let pump = s.spawn(|| truecold_vmm::devices::pump_input(&bus, &mut input, &drained, &stop));
        // Stop once the FIFO is full (the guest never reads): no byte may be lost silently.
        while truecold_vmm::devices::lock(&bus).serial_input_room() > 0 && !pump.is_finished() {
            std::thread::yield_now();
        }
        stop.write(1).unwrap();
        pump.join().unwrap()
    });
    assert_eq!(stats.end, truecold_vmm::devices::InputEnd::Stopped);
    assert_eq!(stats.delivered, 64);
    assert_eq!(
        stats.read, 100,
        "the 36 bytes read and not delivered are counted"
    );
}

#[test]
fn serial_transport_has_no_port_challenge() {
    let (_k, _v, mut b) = bus_with(false, Transport::Serial);
    assert_eq!(b.transport(), Transport::Serial);
    let out = |b: &mut Bus, port, data: &[u8], t| b.io_out(0, port, data, t).unwrap();
    out(&mut b, PORT_DOORBELL, &[Phase::InitStart as u8], 10);
    out(&mut b, PORT_DOORBELL, &[Phase::Ready as u8], 20);
    assert_eq!(b.stamps.init_doorbell, Some(10));
    assert_eq!(
        b.stamps.ready_doorbell,
        Some(20),
        "the doorbell is still stamped"
    );
    assert_eq!(b.liveness.nonce, None, "no nonce is made");
    assert_eq!(b.protocol_error_count, 0);
    // Reading the challenge port is an error and returns nothing.
    let mut n = [0xaau8; NONCE_LEN];
    b.io_in(0, PORT_CHALLENGE, &mut n);
    assert_eq!(n, [0; NONCE_LEN]);
    assert_eq!(b.protocol_error_count, 1, "{:?}", b.protocol_errors);
    // A reply or a record on the record port: one error per line, nothing taken.
    let reply = Message::Reply(Reply::new(&[0; NONCE_LEN], boot_id())).encode();
    let (a, z) = reply.as_bytes().split_at(9);
    out(&mut b, PORT_RECORD, a, 30);
    out(&mut b, PORT_RECORD, z, 31);
    out(
        &mut b,
        PORT_RECORD,
        Message::Record(record()).encode().as_bytes(),
        40,
    );
    assert_eq!(b.protocol_error_count, 3, "{:?}", b.protocol_errors);
    assert!(!b.liveness.verified);
    assert_eq!(b.liveness.answer, None);
    assert_eq!(b.record, None);
    assert_eq!(b.stamps.strict_ready, None);
    assert_eq!(b.stamps.record, None);
    assert_eq!(
        b.liveness.kind,
        truecold_proto::report::LivenessKind::Binding
    );
    // Exit 0 after the Ready doorbell.
    assert_eq!(
        out(&mut b, PORT_EXIT, &[0], 50),
        Action::Stop(StopReason::ExitPort(0))
    );
    assert_eq!(b.exit_after_ready, Some(true));
}

#[test]
fn serial_exit_before_ready_is_recorded() {
    let (_k, _v, mut b) = bus_with(false, Transport::Serial);
    b.io_out(0, PORT_DOORBELL, &[Phase::InitStart as u8], 10)
        .unwrap();
    assert_eq!(
        b.io_out(0, PORT_EXIT, &[0], 20).unwrap(),
        Action::Stop(StopReason::ExitPort(0))
    );
    // A later doorbell (another vCPU before the kick) does not change what the exit saw.
    b.io_out(0, PORT_DOORBELL, &[Phase::Ready as u8], 30)
        .unwrap();
    b.io_out(0, PORT_EXIT, &[0], 40).unwrap();
    assert_eq!(b.exit_after_ready, Some(false));
    assert_eq!(b.protocol_error_count, 0);
}

#[test]
fn line_out_writes_whole_lines() {
    use std::io::Write;
    use truecold_vmm::devices::{LineOut, LINE_OUT_MAX};
    // A writer that records each write it gets.
    struct Writes(std::rc::Rc<std::cell::RefCell<Vec<Vec<u8>>>>);
    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let writes = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut o = LineOut::new(Writes(writes.clone()));
    for &x in b"TC1 ready boot_id=x\nab" {
        // the 8250 model: one byte, then a flush
        o.write_all(&[x]).unwrap();
        o.flush().unwrap();
    }
    assert_eq!(*writes.borrow(), vec![b"TC1 ready boot_id=x\n".to_vec()]);
    o.write_all(&vec![b'y'; LINE_OUT_MAX]).unwrap();
    assert_eq!(
        writes.borrow().len(),
        2,
        "a long run without newline is bounded"
    );
    assert_eq!(writes.borrow()[1].len(), LINE_OUT_MAX + 2);
    o.write_all(b"cd").unwrap();
    drop(o);
    assert_eq!(writes.borrow()[2], b"cd".to_vec(), "the rest at the end");
}
