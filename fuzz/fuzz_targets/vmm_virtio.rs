//! The virtio devices as a hostile guest driver programs and drives them: a fuzzed sequence
//! of MMIO register writes and reads on a real `MmioTransport` (features, status, queue
//! selection, sizes and ring addresses, notifications, interrupt acks, config space),
//! writes into guest memory (descriptor tables, rings, request headers, frames) and device
//! events (queue notifications, backend readiness), against virtio-blk over an in-memory
//! disk, virtio-net over a datagram socket pair and virtio-vsock over a Unix socket path.
//! Checks: never a panic, never a hang or an allocation sized by the guest (libFuzzer's
//! -timeout and -rss_limit_mb), the magic and vendor registers always read as themselves,
//! and the status register never reads DRIVER_OK without FEATURES_OK.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_vmm::virtio::blk::{Blk, MemDisk};
use truecold_vmm::virtio::mmio::{self, MmioTransport};
use truecold_vmm::virtio::net::Net;
use truecold_vmm::virtio::vsock::Vsock;
use truecold_vmm::virtio::{Event, Interrupt, VirtioDevice, BACKEND_TOKEN_BASE};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::epoll::Epoll;
use vmm_sys_util::eventfd::EventFd;

/// Guest memory of every input: 1 MiB (rings and buffers the fuzzer places anywhere in it;
/// addresses beyond it are the device's to refuse).
const MEM: usize = 1 << 20;

/// The registers a driver touches, so most writes land on one.
const REGS: [u64; 24] = [
    mmio::MAGIC_VALUE,
    mmio::VERSION,
    mmio::DEVICE_ID,
    mmio::VENDOR_ID,
    mmio::DEVICE_FEATURES,
    mmio::DEVICE_FEATURES_SEL,
    mmio::DRIVER_FEATURES,
    mmio::DRIVER_FEATURES_SEL,
    mmio::QUEUE_SEL,
    mmio::QUEUE_NUM_MAX,
    mmio::QUEUE_NUM,
    mmio::QUEUE_READY,
    mmio::QUEUE_NOTIFY,
    mmio::INTERRUPT_STATUS,
    mmio::INTERRUPT_ACK,
    mmio::STATUS,
    mmio::QUEUE_DESC_LOW,
    mmio::QUEUE_DESC_HIGH,
    mmio::QUEUE_DRIVER_LOW,
    mmio::QUEUE_DRIVER_HIGH,
    mmio::QUEUE_DEVICE_LOW,
    mmio::QUEUE_DEVICE_HIGH,
    mmio::CONFIG_GENERATION,
    mmio::CONFIG,
];

fn device(kind: u8, keep: &mut Vec<std::os::unix::net::UnixDatagram>) -> Box<dyn VirtioDevice> {
    match kind % 3 {
        0 => Box::new(Blk::new(Box::new(MemDisk::new(vec![0; 1 << 16])))),
        1 => {
            let (a, b) = std::os::unix::net::UnixDatagram::pair().expect("a socket pair");
            a.set_nonblocking(true).expect("non-blocking");
            b.set_nonblocking(true).expect("non-blocking");
            // A frame from the host waits for the guest's rx buffers.
            let _ = b.send(&[0u8; 60]);
            keep.push(b);
            Box::new(Net::new(Box::new(a), [2, 0, 0, 0, 0, 1]))
        }
        _ => Box::new(Vsock::new(
            std::env::temp_dir().join(format!("truecold-fuzz-vsock-{}.sock", std::process::id())),
        )),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mut keep = Vec::new();
    let dev = device(input.u8(), &mut keep);
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).expect("guest memory");
    let irq = Arc::new(Interrupt::new(
        EventFd::new(libc::EFD_NONBLOCK).expect("an eventfd"),
    ));
    let epoll = Arc::new(Epoll::new().expect("an epoll"));
    let mut t = MmioTransport::new(dev, mem.clone(), irq, epoll, 0).expect("a transport");
    let mut steps = 0;
    while input.rest_len() > 0 && steps < 256 {
        steps += 1;
        match input.u8() % 6 {
            0 => {
                let reg = REGS[usize::from(input.u8()) % REGS.len()];
                let off = reg + u64::from(input.u8() % 4) * u64::from(input.bool());
                let v = input.u32();
                t.write(off, &v.to_le_bytes()[..usize::from(input.u8() % 5)]);
            }
            1 => {
                let mut b = [0u8; 8];
                let off = u64::from(input.u16()) % 0x200;
                let n = usize::from(input.u8()) % 9;
                t.read(off, &mut b[..n]);
            }
            2 => {
                // Guest memory: a write of up to 255 bytes anywhere in it.
                let at = u64::from(input.u32()) % MEM as u64;
                let bytes = input.short();
                let _ = mem.write_slice(bytes, GuestAddress(at));
            }
            3 => t.handle(Event::Queue(u16::from(input.u8() % 4))),
            4 => t.handle(Event::Backend {
                token: BACKEND_TOKEN_BASE + u32::from(input.u8() % 4),
                events: input.u32(),
            }),
            _ => {
                // A driver's usual programming of queue `q`, so deep paths are reached.
                let q = u32::from(input.u8() % 3);
                let size = u32::from(input.u16() % 300);
                for (reg, v) in [
                    (mmio::STATUS, mmio::S_ACKNOWLEDGE | mmio::S_DRIVER),
                    (mmio::DRIVER_FEATURES_SEL, 1),
                    (mmio::DRIVER_FEATURES, 1),
                    (
                        mmio::STATUS,
                        mmio::S_ACKNOWLEDGE | mmio::S_DRIVER | mmio::S_FEATURES_OK,
                    ),
                    (mmio::QUEUE_SEL, q),
                    (mmio::QUEUE_NUM, size),
                    (mmio::QUEUE_DESC_LOW, input.u32() % MEM as u32),
                    (mmio::QUEUE_DRIVER_LOW, input.u32() % MEM as u32),
                    (mmio::QUEUE_DEVICE_LOW, input.u32() % MEM as u32),
                    (mmio::QUEUE_READY, 1),
                    (
                        mmio::STATUS,
                        mmio::S_ACKNOWLEDGE
                            | mmio::S_DRIVER
                            | mmio::S_FEATURES_OK
                            | mmio::S_DRIVER_OK,
                    ),
                ] {
                    t.write(reg, &v.to_le_bytes());
                }
            }
        }
        let mut b = [0u8; 4];
        t.read(mmio::MAGIC_VALUE, &mut b);
        assert_eq!(
            u32::from_le_bytes(b),
            mmio::MAGIC,
            "the magic register changed"
        );
        t.read(mmio::VENDOR_ID, &mut b);
        assert_eq!(
            u32::from_le_bytes(b),
            mmio::VENDOR,
            "the vendor register changed"
        );
        let status = t.status();
        assert!(
            status & mmio::S_DRIVER_OK == 0
                || status & mmio::S_FEATURES_OK != 0
                || status & mmio::S_FAILED != 0,
            "DRIVER_OK without FEATURES_OK: {status:#x}"
        );
    }
});
