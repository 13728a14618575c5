//! The devices as a hostile guest drives them: a fuzzed sequence of port writes and reads
//! (doorbell, record, exit, challenge, serial, i8042, the probe's AP/echo/summary ports,
//! unknown ports), MMIO exits and host serial input, against a real `Bus` on a real VM
//! (/dev/kvm: the bus wires the serial's interrupt through an irqfd). Checks: never a panic;
//! the exit counters count every call; the kept protocol errors, AP check-ins and probe
//! bytes stay within their bounds; a stop is only the exit port or the i8042 reset; and no
//! false success: the nonce is fresh per bus and the fuzzer cannot compute a binding over
//! it, so liveness never verifies and strict-ready is never stamped.
#![no_main]
use std::sync::OnceLock;

use kvm_ioctls::{Kvm, VmFd};
use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_proto::kinds::Transport;
use truecold_proto::report::ReportCore;
use truecold_proto::{PORT_CHALLENGE, PORT_DOORBELL, PORT_EXIT, PORT_RECORD};
use truecold_vmm::devices::{Action, Bus, StopReason};
use truecold_vmm::probe::{PORT_AP, PORT_ECHO, PORT_SUMMARY};

/// One VM for the process; each input gets a fresh bus on it.
fn vm() -> &'static VmFd {
    static VM: OnceLock<VmFd> = OnceLock::new();
    VM.get_or_init(|| {
        let kvm = Kvm::new().expect("/dev/kvm opens (the VMM's tests need it too)");
        truecold_vmm::vm::create(&kvm).expect("a VM with an irqchip on /dev/kvm")
    })
}

const PORTS: [u16; 12] = [
    PORT_DOORBELL,
    PORT_RECORD,
    PORT_EXIT,
    PORT_CHALLENGE,
    0x3f8,
    0x3fd,
    0x60,
    0x64,
    PORT_AP,
    PORT_ECHO,
    PORT_SUMMARY,
    0x80,
];

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let probe_guest = mode & 1 == 1;
    let transport = if mode & 2 == 2 {
        Transport::Serial
    } else {
        Transport::Ports
    };
    let mut bus =
        Bus::new(vm(), probe_guest, transport, Box::new(std::io::sink())).expect("a bus on the VM");
    let (mut outs, mut ins, mut mmios) = (0u64, 0u64, 0u64);
    let mut t = 0u64;
    // At most 256 exits per input: a run's worth of protocol, bounded per execution.
    for _ in 0..256 {
        let op = input.u8();
        if input.rest_len() == 0 && op == 0 {
            break;
        }
        t += 1 + u64::from(input.u8());
        let port = match op >> 4 {
            15 => input.u16(),
            n => PORTS[usize::from(n) % PORTS.len()],
        };
        match op % 4 {
            0 | 1 => {
                outs += 1;
                let bytes = input.short();
                match bus
                    .io_out(0, port, bytes, t)
                    .expect("a device error other than the nonce's")
                {
                    Action::Continue => {}
                    Action::Stop(StopReason::ExitPort(_)) => {
                        assert_eq!(port, PORT_EXIT);
                        break;
                    }
                    Action::Stop(StopReason::Reset) => {
                        assert_eq!((port, bytes.first()), (0x64, Some(&0xfe)));
                        break;
                    }
                    Action::Stop(other) => panic!("a port write stopped the VM: {other:?}"),
                }
            }
            2 => {
                ins += 1;
                let mut buf = vec![0u8; usize::from(input.u8() % 32) + 1];
                assert_eq!(bus.io_in(0, port, &mut buf), Action::Continue);
            }
            _ => {
                let addr = input.u64();
                if input.bool() {
                    mmios += 1;
                    let mut buf = [0u8; 8];
                    let n = usize::from(input.u8() % 8) + 1;
                    bus.mmio(addr, Some(&mut buf[..n]));
                    assert!(buf[..n].iter().all(|&b| b == 0xff));
                } else if input.bool() {
                    mmios += 1;
                    bus.mmio(addr, None);
                } else {
                    let bytes = input.short();
                    let took = bus.serial_input(bytes);
                    assert!(took <= bytes.len());
                }
            }
        }
    }
    assert_eq!((bus.exits.io_out, bus.exits.io_in), (outs, ins));
    assert_eq!(bus.exits.unknown_mmio, mmios);
    assert!(bus.exits.unknown_mmio_pages.len() <= 64);
    assert!(bus.protocol_errors.len() <= ReportCore::PROTOCOL_ERRORS_KEPT);
    assert_eq!(
        bus.protocol_errors.len() as u64,
        bus.protocol_error_count
            .min(ReportCore::PROTOCOL_ERRORS_KEPT as u64)
    );
    assert!(bus.ap_checkins.len() <= 256);
    assert!(bus.probe_summary_bytes().len() <= 4096);
    // No false success.
    assert!(!bus.liveness.verified, "{:?}", bus.liveness);
    assert!(bus.stamps.strict_ready.is_none());
    assert!(bus.liveness.reply_boot_id.is_none());
});
