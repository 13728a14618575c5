//! The virtio-MMIO transport's register file as a driver (or a hostile guest) programs it: a
//! fuzzed sequence of 4-byte (and odd-width) reads and writes over feature negotiation,
//! queue selection and set-up, status transitions, notifications, interrupt acks and resets,
//! on a real `MmioTransport` over virtio-blk (one queue; the device thread's side is not
//! run: `vmm_virtio` and the per-device targets drive that).
//! Checks, against the spec's rules rather than the code's: the identification registers
//! never change; a status bit is never lost but by a write of 0, which clears everything
//! (status, interrupt status, queue readiness); FEATURES_OK only with a subset of the offered
//! features that has VIRTIO_F_VERSION_1, and the acked features never change while it is set;
//! DRIVER_OK only after ACKNOWLEDGE, DRIVER and FEATURES_OK, and the device is activated
//! exactly when DRIVER_OK holds without NEEDS_RESET; a queue's readiness never changes while
//! DRIVER_OK is set; a notification of an existing queue reaches its eventfd, of any other
//! none.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_vmm::virtio::blk::{Blk, MemDisk};
use truecold_vmm::virtio::mmio::*;
use truecold_vmm::virtio::{Interrupt, VirtioDevice, F_VERSION_1};
use vm_memory::{GuestAddress, GuestMemoryMmap};
use vmm_sys_util::epoll::Epoll;
use vmm_sys_util::eventfd::EventFd;

const REGS: [u64; 22] = [
    DEVICE_FEATURES,
    DEVICE_FEATURES_SEL,
    DRIVER_FEATURES,
    DRIVER_FEATURES_SEL,
    QUEUE_SEL,
    QUEUE_NUM_MAX,
    QUEUE_NUM,
    QUEUE_READY,
    QUEUE_NOTIFY,
    INTERRUPT_STATUS,
    INTERRUPT_ACK,
    STATUS,
    STATUS,
    STATUS,
    QUEUE_DESC_LOW,
    QUEUE_DESC_HIGH,
    QUEUE_DRIVER_LOW,
    QUEUE_DRIVER_HIGH,
    QUEUE_DEVICE_LOW,
    QUEUE_DEVICE_HIGH,
    CONFIG_GENERATION,
    CONFIG,
];

fn r(t: &mut MmioTransport, off: u64) -> u32 {
    let mut b = [0u8; 4];
    t.read(off, &mut b);
    u32::from_le_bytes(b)
}

fn w(t: &mut MmioTransport, off: u64, v: u32) {
    t.write(off, &v.to_le_bytes());
}

fn ready(t: &mut MmioTransport) -> u32 {
    // QUEUE_SEL is the driver's; read queue 0's readiness and put the selector back.
    let sel = t.queue_sel();
    w(t, QUEUE_SEL, 0);
    let v = r(t, QUEUE_READY);
    w(t, QUEUE_SEL, sel);
    v
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 1 << 20)]).expect("memory");
    let dev = Blk::new(Box::new(MemDisk::new(vec![0; 4096])));
    let offered = dev.features();
    let irq = Arc::new(Interrupt::new(
        EventFd::new(libc::EFD_NONBLOCK).expect("an eventfd"),
    ));
    let epoll = Arc::new(Epoll::new().expect("an epoll"));
    let mut t = MmioTransport::new(Box::new(dev), mem, irq, epoll, 0).expect("a transport");
    let mut steps = 0;
    while input.rest_len() > 0 && steps < 256 {
        steps += 1;
        let before = t.status();
        let acked_before = t.acked_features();
        let ready_before = ready(&mut t);
        // Drain the notification eventfd: what this step adds is this step's.
        let _ = t.queue_evts()[0].read();
        let mut wrote_status = None;
        let mut notified = None;
        match input.u8() % 5 {
            0..=2 => {
                let reg = REGS[usize::from(input.u8()) % REGS.len()];
                let v = match input.u8() % 4 {
                    // Status values a driver writes: its bits in order, or 0.
                    0 if reg == STATUS => [0, 1, 3, 11, 15, 128][usize::from(input.u8() % 6)],
                    1 => u32::from(input.u8() % 4),
                    _ => input.u32(),
                };
                if reg == STATUS {
                    wrote_status = Some(v);
                }
                if reg == QUEUE_NOTIFY {
                    notified = Some(v);
                }
                w(&mut t, reg, v);
            }
            3 => {
                // An odd width or offset: ignored, never a panic.
                let off = u64::from(input.u16()) % 0x200;
                let mut b = [0u8; 8];
                let n = usize::from(input.u8()) % 9;
                if input.bool() {
                    t.read(off, &mut b[..n]);
                } else {
                    t.write(off, &b[..n]);
                    if n == 4 && off == STATUS {
                        wrote_status = Some(0);
                    }
                    if n == 4 && off == QUEUE_NOTIFY {
                        notified = Some(0);
                    }
                }
            }
            _ => {
                let off = REGS[usize::from(input.u8()) % REGS.len()];
                let _ = r(&mut t, off);
            }
        }
        let after = t.status();
        assert_eq!(r(&mut t, MAGIC_VALUE), MAGIC);
        assert_eq!(r(&mut t, VERSION), 2);
        assert_eq!(r(&mut t, DEVICE_ID), 2);
        assert_eq!(r(&mut t, VENDOR_ID), VENDOR);
        assert_eq!(
            r(&mut t, STATUS),
            after,
            "the status register is the status"
        );
        if wrote_status == Some(0) {
            assert_eq!(after, 0, "a reset clears the status");
            assert_eq!(
                r(&mut t, INTERRUPT_STATUS),
                0,
                "a reset clears the interrupt status"
            );
            assert_eq!(ready(&mut t), 0, "a reset clears the queues");
            assert_eq!(t.acked_features(), 0);
        } else {
            assert_eq!(
                after & before,
                before,
                "a status bit lost: {before:#x} → {after:#x}"
            );
        }
        if after & S_FEATURES_OK != 0 {
            let acked = t.acked_features();
            assert_eq!(acked & !offered, 0, "FEATURES_OK with unoffered features");
            assert_ne!(acked & F_VERSION_1, 0, "FEATURES_OK without VERSION_1");
            if before & S_FEATURES_OK != 0 {
                assert_eq!(acked, acked_before, "features changed after FEATURES_OK");
            }
        }
        if after & S_DRIVER_OK != 0 {
            let need = S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK;
            assert_eq!(after & need, need, "DRIVER_OK out of order: {after:#x}");
        }
        let running = after & S_DRIVER_OK != 0 && after & S_NEEDS_RESET == 0;
        assert_eq!(t.is_activated(), running, "activated vs {after:#x}");
        if before & S_DRIVER_OK != 0 && after & S_DRIVER_OK != 0 {
            assert_eq!(
                ready(&mut t),
                ready_before,
                "a queue changed after DRIVER_OK"
            );
        }
        let fired = t.queue_evts()[0].read().is_ok();
        let activated_now = before & S_DRIVER_OK == 0 && running;
        match notified {
            Some(0) => assert!(fired, "a notification of queue 0 lost"),
            _ if activated_now => assert!(fired, "DRIVER_OK looks at the queue"),
            _ => assert!(!fired, "queue 0's eventfd written by {notified:?}"),
        }
    }
});
