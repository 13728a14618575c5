//! The virtio device thread under the CLI's seccomp filter (with every device's needs): a
//! child process (this test binary re-run) sets up blk + vsock, installs the filter, starts
//! the device thread and drives it through the MMIO windows like a driver: blk OUT + FLUSH
//! (pwrite64, fdatasync), vsock REQUEST → connect to the parent's listener, RW both ways,
//! SHUTDOWN → RST. A syscall missing from the allowlist kills the child with SIGSYS.
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use truecold_vmm::sandbox::{self, DeviceNeeds};
use truecold_vmm::virtio::blk::{Blk, FileDisk};
use truecold_vmm::virtio::mmio::*;
use truecold_vmm::virtio::thread::{MmioWindows, VirtioDevices};
use truecold_vmm::virtio::vsock::{self, Hdr, Vsock, HDR_LEN};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

const CHILD: &str = "TRUECOLD_VIRTIO_SECCOMP_CHILD";
const NEXT: u16 = 1;
const WRITE: u16 = 2;

struct Raw<'a> {
    m: &'a GuestMemoryMmap,
    base: u64,
    next: u16,
    avail: u16,
}

impl<'a> Raw<'a> {
    fn desc(&self) -> u64 {
        self.base
    }
    fn driver(&self) -> u64 {
        self.base + 0x400
    }
    fn device(&self) -> u64 {
        self.base + 0x800
    }
    fn push(&mut self, c: &[(u64, u32, u16)]) {
        let head = self.next;
        for (i, (addr, len, flags)) in c.iter().enumerate() {
            let d = self.desc() + 16 * u64::from(self.next);
            let last = i + 1 == c.len();
            let f = if last { *flags } else { *flags | NEXT };
            self.m.write_obj(*addr, GuestAddress(d)).unwrap();
            self.m.write_obj(*len, GuestAddress(d + 8)).unwrap();
            self.m.write_obj(f, GuestAddress(d + 12)).unwrap();
            self.m
                .write_obj(self.next + 1, GuestAddress(d + 14))
                .unwrap();
            self.next += 1;
        }
        let slot = self.driver() + 4 + 2 * u64::from(self.avail % 64);
        self.m.write_obj(head, GuestAddress(slot)).unwrap();
        self.avail += 1;
        self.m
            .write_obj(self.avail, GuestAddress(self.driver() + 2))
            .unwrap();
    }
    fn used(&self) -> u16 {
        self.m.read_obj(GuestAddress(self.device() + 2)).unwrap()
    }
    fn used_len(&self, i: u16) -> u32 {
        self.m
            .read_obj(GuestAddress(self.device() + 4 + 8 * u64::from(i) + 4))
            .unwrap()
    }
}

fn w(win: &MmioWindows, base: u64, off: u64, v: u32) {
    assert!(win.write(base + off, &v.to_le_bytes()));
}

fn probe(win: &MmioWindows, base: u64, queues: &[&Raw<'_>]) {
    w(win, base, STATUS, S_ACKNOWLEDGE);
    w(win, base, STATUS, S_ACKNOWLEDGE | S_DRIVER);
    w(win, base, DRIVER_FEATURES_SEL, 1);
    w(win, base, DRIVER_FEATURES, 1);
    w(win, base, DRIVER_FEATURES_SEL, 0);
    w(win, base, DRIVER_FEATURES, 0);
    w(win, base, STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK);
    for (i, q) in queues.iter().enumerate() {
        w(win, base, QUEUE_SEL, i as u32);
        w(win, base, QUEUE_NUM, 64);
        w(win, base, QUEUE_DESC_LOW, q.desc() as u32);
        w(win, base, QUEUE_DRIVER_LOW, q.driver() as u32);
        w(win, base, QUEUE_DEVICE_LOW, q.device() as u32);
        w(win, base, QUEUE_READY, 1);
    }
    w(win, base, STATUS, 0xf);
    let mut b = [0u8; 4];
    assert!(win.read(base + STATUS, &mut b));
    assert_eq!(u32::from_le_bytes(b), 0xf);
}

fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::hint::spin_loop();
    }
}

fn child(dir: &Path) {
    let m = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x40_0000)]).unwrap();
    let disk = FileDisk::open(&dir.join("w.img")).unwrap();
    let devs = VirtioDevices::new(
        &m,
        vec![
            (
                "blk",
                Box::new(Blk::new(Box::new(disk))),
                EventFd::new(libc::EFD_NONBLOCK).unwrap(),
            ),
            (
                "vsock",
                Box::new(Vsock::new(dir.join("v.sock"))),
                EventFd::new(libc::EFD_NONBLOCK).unwrap(),
            ),
        ],
    )
    .unwrap();
    let win = devs.windows();
    let mut blkq = Raw {
        m: &m,
        base: 0x1000,
        next: 0,
        avail: 0,
    };
    let mut rx = Raw {
        m: &m,
        base: 0x2000,
        next: 0,
        avail: 0,
    };
    let mut tx = Raw {
        m: &m,
        base: 0x3000,
        next: 0,
        avail: 0,
    };
    let ev = Raw {
        m: &m,
        base: 0x4000,
        next: 0,
        avail: 0,
    };
    sandbox::settle_allocator();
    let list = sandbox::allowlist_for(std::process::id(), DeviceNeeds::all());
    sandbox::install_violation_handler(&list).unwrap();
    sandbox::install(&sandbox::filters(&list).unwrap()).unwrap();
    // From here on only the allowlist.
    let thread = devs.start().unwrap();
    let (b0, b1) = (0xd000_0000u64, 0xd000_1000u64);
    probe(&win, b0, &[&blkq]);
    probe(&win, b1, &[&rx, &tx, &ev]);
    // blk: OUT sector 1 (512 × 0xab), FLUSH.
    let mut hdr = [0u8; 16];
    hdr[0] = 1;
    hdr[8] = 1;
    m.write_slice(&hdr, GuestAddress(0x10_0000)).unwrap();
    m.write_slice(&[0xab; 512], GuestAddress(0x10_1000))
        .unwrap();
    blkq.push(&[
        (0x10_0000, 16, 0),
        (0x10_1000, 512, 0),
        (0x10_2000, 1, WRITE),
    ]);
    m.write_slice(&[4, 0, 0, 0], GuestAddress(0x10_3000))
        .unwrap();
    m.write_slice(&[0u8; 12], GuestAddress(0x10_3004)).unwrap();
    blkq.push(&[(0x10_3000, 16, 0), (0x10_4000, 1, WRITE)]);
    w(&win, b0, QUEUE_NOTIFY, 0);
    wait("blk", || blkq.used() == 2);
    assert_eq!(m.read_obj::<u8>(GuestAddress(0x10_2000)).unwrap(), 0);
    assert_eq!(m.read_obj::<u8>(GuestAddress(0x10_4000)).unwrap(), 0);
    // vsock.
    for i in 0..8u64 {
        rx.push(&[(0x20_0000 + i * 0x1000, 4096, WRITE)]);
    }
    w(&win, b1, QUEUE_NOTIFY, 0);
    let mut at = 0x30_0000u64;
    let mut send = |tx: &mut Raw<'_>, op: u16, flags: u32, data: &[u8]| {
        let h = Hdr {
            src_cid: 3,
            dst_cid: 2,
            src_port: 49152,
            dst_port: 1024,
            len: data.len() as u32,
            type_: vsock::TYPE_STREAM,
            op,
            flags,
            buf_alloc: 65536,
            fwd_cnt: 0,
        };
        m.write_slice(&h.bytes(), GuestAddress(at)).unwrap();
        m.write_slice(data, GuestAddress(at + 0x100)).unwrap();
        let mut c = vec![(at, HDR_LEN as u32, 0)];
        if !data.is_empty() {
            c.push((at + 0x100, data.len() as u32, 0));
        }
        tx.push(&c);
        at += 0x1000;
        w(&win, b1, QUEUE_NOTIFY, 1);
    };
    let op_at = |i: u64| -> Hdr {
        let mut b = [0u8; HDR_LEN];
        m.read_slice(&mut b, GuestAddress(0x20_0000 + i * 0x1000))
            .unwrap();
        Hdr::parse(&b)
    };
    send(&mut tx, vsock::OP_REQUEST, 0, &[]);
    wait("the RESPONSE", || rx.used() >= 1);
    assert_eq!(op_at(0).op, vsock::OP_RESPONSE);
    send(&mut tx, vsock::OP_RW, 0, b"ping\n");
    wait("the host's RW", || rx.used() >= 2);
    let h = op_at(1);
    assert_eq!((h.op, h.len), (vsock::OP_RW, 5));
    assert_eq!(rx.used_len(1), HDR_LEN as u32 + 5);
    let mut d = [0u8; 5];
    m.read_slice(&mut d, GuestAddress(0x20_1000 + HDR_LEN as u64))
        .unwrap();
    assert_eq!(&d, b"pong\n");
    send(
        &mut tx,
        vsock::OP_SHUTDOWN,
        vsock::SHUTDOWN_RCV | vsock::SHUTDOWN_SEND,
        &[],
    );
    wait("the RST", || rx.used() >= 3);
    assert_eq!(op_at(2).op, vsock::OP_RST);
    assert!(thread.stop());
}

#[test]
fn device_thread_under_the_seccomp_filter() {
    if let Some(dir) = std::env::var_os(CHILD) {
        child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.img"), vec![0u8; 4096]).unwrap();
    let listener = UnixListener::bind(dir.path().join("v.sock_1024")).unwrap();
    let mut c = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "device_thread_under_the_seccomp_filter",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let mut conn = loop {
        match listener.accept() {
            Ok((s, _)) => break Some(s),
            Err(_) if Instant::now() < end && c.try_wait().unwrap().is_none() => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => break None,
        }
    };
    let mut talk = |s: &mut std::os::unix::net::UnixStream| -> std::io::Result<Vec<u8>> {
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut ping = [0u8; 5];
        s.read_exact(&mut ping)?;
        s.write_all(b"pong\n")?;
        let mut rest = Vec::new();
        s.read_to_end(&mut rest)?;
        Ok([&ping[..], &rest[..]].concat())
    };
    let got = conn.as_mut().map(&mut talk);
    let out = c.wait_with_output().unwrap();
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child: {:?}\n{log}", out.status);
    match got {
        Some(Ok(b)) => assert_eq!(b, b"ping\n", "{log}"),
        other => panic!("{other:?}\n{log}"),
    }
    let img = std::fs::read(dir.path().join("w.img")).unwrap();
    assert_eq!(&img[512..1024], &[0xab; 512][..]);
}
