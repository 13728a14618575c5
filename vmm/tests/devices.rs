//! The device bus against the real guest protocol (a Linux guest's reply and record lines),
//! driven exit by exit. Needs /dev/kvm for the VM the serial irqfd hangs off.
mod common;

use truecold_proto::{
    BootId, ErrorCode, GuestRecord, Message, Phase, Reply, Workload, NONCE_LEN, PORT_CHALLENGE,
    PORT_DOORBELL, PORT_EXIT, PORT_RECORD,
};
use truecold_vmm::devices::{Action, Bus, StopReason};

fn bus(probe: bool) -> (kvm_ioctls::Kvm, kvm_ioctls::VmFd, Bus) {
    common::require_kvm();
    let (kvm, _) = truecold_vmm::kvm::open().unwrap();
    let vm = truecold_vmm::vm::create(&kvm).unwrap();
    let bus = Bus::new(&vm, probe, false).unwrap();
    (kvm, vm, bus)
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
