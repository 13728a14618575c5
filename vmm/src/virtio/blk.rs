//! virtio-blk (device ID 2) over a [`Disk`]: the workspace image opened read-write
//! ([`FileDisk`], `pread`/`pwrite`/`fdatasync`). Requests: IN, OUT, FLUSH, GET_ID;
//! anything else → UNSUPP; a range past the end, a length not a multiple of 512 or a buffer
//! of the wrong direction → IOERR. One queue of [`QUEUE_SIZE`]; data moves through a fixed
//! bounce buffer of [`BOUNCE`] bytes, so a request's length never sizes an allocation.
//! Requests are rate limited ([`RateLimit::BLK`] by default: bytes of the whole chain and
//! requests per second); a request past the limit waits in the queue for its tokens.
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_F_FLUSH, VIRTIO_BLK_ID_BYTES, VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK,
    VIRTIO_BLK_S_UNSUPP, VIRTIO_BLK_T_FLUSH, VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_IN,
    VIRTIO_BLK_T_OUT,
};
use vm_memory::GuestMemory;

use super::rate::{Limiter, RateLimit};
use super::{gather, scatter, Chain, ChainError, Ctx, Event, Poll, VirtioDevice, F_VERSION_1};

pub const DEVICE_ID: u32 = virtio_bindings::virtio_ids::VIRTIO_ID_BLOCK;
pub const QUEUE_SIZE: u16 = 256;
pub const SECTOR: u64 = 512;
/// Largest request (header + data + status) the device accepts, bytes.
pub const MAX_REQUEST: u64 = 4 << 20;
/// Bounce buffer size.
pub const BOUNCE: usize = 64 << 10;
/// The serial GET_ID answers (at most 20 bytes).
pub const SERIAL: &[u8] = b"truecold-workspace";
const HEADER: u64 = 16;

/// The blk device's storage.
pub trait Disk: Send {
    /// Size in bytes.
    fn size(&self) -> u64;
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()>;
    fn flush(&mut self) -> io::Result<()>;
}

/// A file opened read-write (the per-launch workspace image).
pub struct FileDisk {
    file: File,
    size: u64,
}

impl FileDisk {
    /// Opens `path` read-write (before the seccomp filter: no open afterwards).
    pub fn open(path: &std::path::Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(FileDisk {
            file,
            size: meta.len(),
        })
    }
}

impl Disk for FileDisk {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, off)
    }
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()> {
        self.file.write_all_at(buf, off)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// A disk in memory (tests, and callers without a file).
pub struct MemDisk {
    pub bytes: Vec<u8>,
    pub flushes: u64,
}

impl MemDisk {
    pub fn new(bytes: Vec<u8>) -> Self {
        MemDisk { bytes, flushes: 0 }
    }
}

impl Disk for MemDisk {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let s = usize::try_from(off).map_err(io::Error::other)?;
        let src = self
            .bytes
            .get(s..s.saturating_add(buf.len()))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()> {
        let s = usize::try_from(off).map_err(io::Error::other)?;
        let dst = self
            .bytes
            .get_mut(s..s.saturating_add(buf.len()))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        dst.copy_from_slice(buf);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushes += 1;
        Ok(())
    }
}

/// The virtio-blk device.
pub struct Blk {
    disk: Box<dyn Disk>,
    /// Capacity in 512-byte sectors (the file's size rounded down).
    sectors: u64,
    bounce: Vec<u8>,
    limiter: Limiter,
    /// Requests by outcome.
    pub ok: u64,
    pub ioerr: u64,
    pub unsupp: u64,
}

impl Blk {
    /// The device over `disk` with the default rate limit ([`RateLimit::BLK`]).
    pub fn new(disk: Box<dyn Disk>) -> Self {
        Self::with_limit(disk, RateLimit::BLK)
    }

    /// The device over `disk`, its requests limited by `limit`.
    pub fn with_limit(disk: Box<dyn Disk>, limit: RateLimit) -> Self {
        let sectors = disk.size() / SECTOR;
        Blk {
            disk,
            sectors,
            bounce: vec![0; BOUNCE],
            limiter: Limiter::new(limit),
            ok: 0,
            ioerr: 0,
            unsupp: 0,
        }
    }

    /// Times the queue stopped for its rate limit.
    pub fn throttled(&self) -> u64 {
        self.limiter.throttled
    }

    /// The disk (tests read back what the guest wrote).
    pub fn disk(&self) -> &dyn Disk {
        self.disk.as_ref()
    }

    fn in_range(&self, sector: u64, len: u64) -> bool {
        len % SECTOR == 0
            && sector
                .checked_add(len / SECTOR)
                .is_some_and(|end| end <= self.sectors)
    }

    /// Serves one request; returns (status, data bytes written into the chain) or why no
    /// status can be written.
    fn request<M: GuestMemory>(
        &mut self,
        mem: &M,
        c: &Chain,
    ) -> Result<(u8, u32, Option<ChainError>), ChainError> {
        let wlen = c.writable_len();
        if wlen == 0 {
            return Err(ChainError::NoStatus);
        }
        let mut hdr = [0u8; HEADER as usize];
        if gather(mem, &c.readable, 0, &mut hdr)? < hdr.len() {
            return Ok((VIRTIO_BLK_S_IOERR as u8, 0, Some(ChainError::ShortHeader)));
        }
        let kind = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let mut s = [0u8; 8];
        s.copy_from_slice(&hdr[8..16]);
        let sector = u64::from_le_bytes(s);
        let rdata = c.readable_len() - HEADER;
        let wdata = wlen - 1;
        let ioerr = |e: Option<ChainError>| Ok((VIRTIO_BLK_S_IOERR as u8, 0, e));
        match kind {
            VIRTIO_BLK_T_IN => {
                if rdata != 0 {
                    return ioerr(Some(ChainError::WrongDirection));
                }
                if !self.in_range(sector, wdata) {
                    return ioerr(None);
                }
                let mut done = 0u64;
                while done < wdata {
                    let n = (wdata - done).min(BOUNCE as u64) as usize;
                    let off = sector * SECTOR + done;
                    if self.disk.read_at(&mut self.bounce[..n], off).is_err() {
                        return ioerr(None);
                    }
                    scatter(mem, &c.writable, done, &self.bounce[..n])?;
                    done += n as u64;
                }
                Ok((VIRTIO_BLK_S_OK as u8, wdata as u32, None))
            }
            VIRTIO_BLK_T_OUT => {
                if wdata != 0 {
                    return ioerr(Some(ChainError::WrongDirection));
                }
                if !self.in_range(sector, rdata) {
                    return ioerr(None);
                }
                let mut done = 0u64;
                while done < rdata {
                    let n = (rdata - done).min(BOUNCE as u64) as usize;
                    gather(mem, &c.readable, HEADER + done, &mut self.bounce[..n])?;
                    let off = sector * SECTOR + done;
                    if self.disk.write_at(&self.bounce[..n], off).is_err() {
                        return ioerr(None);
                    }
                    done += n as u64;
                }
                Ok((VIRTIO_BLK_S_OK as u8, 0, None))
            }
            VIRTIO_BLK_T_FLUSH => match self.disk.flush() {
                Ok(()) => Ok((VIRTIO_BLK_S_OK as u8, 0, None)),
                Err(_) => ioerr(None),
            },
            VIRTIO_BLK_T_GET_ID => {
                let n = (wdata as usize)
                    .min(VIRTIO_BLK_ID_BYTES as usize)
                    .min(SERIAL.len());
                scatter(mem, &c.writable, 0, &SERIAL[..n])?;
                Ok((VIRTIO_BLK_S_OK as u8, n as u32, None))
            }
            _ => Ok((VIRTIO_BLK_S_UNSUPP as u8, 0, Some(ChainError::Unsupported))),
        }
    }
}

impl VirtioDevice for Blk {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("requests_ok", self.ok),
            ("requests_ioerr", self.ioerr),
            ("requests_unsupported", self.unsupp),
            ("throttled", self.limiter.throttled),
        ]
    }

    fn wake_at(&self) -> Option<u64> {
        self.limiter.wake_at()
    }

    fn reset(&mut self, _poll: &Poll<'_>) {
        self.limiter.reset();
    }

    fn device_type(&self) -> u32 {
        DEVICE_ID
    }

    fn features(&self) -> u64 {
        F_VERSION_1 | (1 << VIRTIO_BLK_F_FLUSH)
    }

    fn queue_max_sizes(&self) -> &'static [u16] {
        &[QUEUE_SIZE]
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        // struct virtio_blk_config: le64 capacity first; the rest reads 0 (not offered).
        super::read_config_bytes(&self.sectors.to_le_bytes(), offset, data);
    }

    fn handle(&mut self, cx: &mut Ctx<'_>, ev: Event) {
        if !matches!(ev, Event::Queue(0) | Event::Timer) || !self.limiter.go(cx.now_ns()) {
            return;
        }
        while let Some(c) = cx.pop(0, MAX_REQUEST) {
            if !self
                .limiter
                .admit(cx.now_ns(), c.readable_len() + c.writable_len())
            {
                // Left in the queue: the timer at wake_at() serves it.
                cx.unpop(0);
                return;
            }
            match self.request(cx.mem, &c) {
                Ok((status, data, fault)) => {
                    match status as u32 {
                        VIRTIO_BLK_S_OK => self.ok += 1,
                        VIRTIO_BLK_S_UNSUPP => self.unsupp += 1,
                        _ => self.ioerr += 1,
                    }
                    if let Some(f) = fault {
                        cx.faults.refuse(f);
                    } else {
                        cx.faults.chains_ok += 1;
                    }
                    let wlen = c.writable_len();
                    match scatter(cx.mem, &c.writable, wlen - 1, &[status]) {
                        Ok(1) => cx.used(0, c.head, data + 1),
                        _ => {
                            cx.faults.refuse(ChainError::OutOfRange);
                            cx.used(0, c.head, 0);
                        }
                    }
                }
                Err(e) => {
                    cx.faults.refuse(e);
                    cx.used(0, c.head, 0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testutil::{desc, mem, queue_with, used, F_WRITE};
    use crate::virtio::{Faults, Poll};
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
    use vmm_sys_util::epoll::Epoll;

    const HDR: u64 = 0x10_0000;
    const DATA: u64 = 0x11_0000;
    const STATUS: u64 = 0x12_0000;

    fn header(m: &GuestMemoryMmap, at: u64, kind: u32, sector: u64) {
        let mut h = [0u8; 16];
        h[..4].copy_from_slice(&kind.to_le_bytes());
        h[8..].copy_from_slice(&sector.to_le_bytes());
        m.write_slice(&h, GuestAddress(at)).unwrap();
    }

    fn run(
        blk: &mut Blk,
        m: &GuestMemoryMmap,
        chains: &[Vec<virtio_queue::desc::RawDescriptor>],
    ) -> (Faults, Vec<(u32, u32)>) {
        let (q, used_addr) = queue_with(m, 0, 16, chains);
        let mut queues = vec![q];
        let ep = Epoll::new().unwrap();
        let poll = Poll::new(&ep, 0);
        let mut faults = Faults::default();
        let mut cx = Ctx::new(m, &mut queues, &poll, &mut faults);
        blk.handle(&mut cx, Event::Queue(0));
        assert!(cx.needs_interrupt());
        let (idx, elems) = used(m, used_addr, chains.len());
        assert_eq!(idx as usize, chains.len());
        (faults, elems)
    }

    fn status(m: &GuestMemoryMmap) -> u8 {
        m.read_obj(GuestAddress(STATUS)).unwrap()
    }

    fn disk(n: usize) -> Blk {
        Blk::new(Box::new(MemDisk::new(
            (0..n).map(|i| (i % 251) as u8).collect(),
        )))
    }

    #[test]
    fn read_write_flush_get_id() {
        let m = mem();
        let mut blk = disk(8192);
        // IN sector 1, 1024 bytes.
        header(&m, HDR, VIRTIO_BLK_T_IN, 1);
        let (f, u) = run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 1024, F_WRITE),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(u, vec![(0, 1025)]);
        assert_eq!(status(&m), VIRTIO_BLK_S_OK as u8);
        assert_eq!(f.chains_ok, 1);
        let mut got = vec![0u8; 1024];
        m.read_slice(&mut got, GuestAddress(DATA)).unwrap();
        let want: Vec<u8> = (512..1536).map(|i| (i % 251) as u8).collect();
        assert_eq!(got, want);
        // OUT sector 2, 512 bytes of 0xab, split over two descriptors.
        m.write_slice(&[0xab; 512], GuestAddress(DATA)).unwrap();
        header(&m, HDR, VIRTIO_BLK_T_OUT, 2);
        let (_, u) = run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 100, 0),
                desc(DATA + 100, 412, 0),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(u, vec![(0, 1)]);
        assert_eq!(status(&m), VIRTIO_BLK_S_OK as u8);
        let mut back = [0u8; 512];
        blk.disk().read_at(&mut back, 1024).unwrap();
        assert_eq!(back, [0xab; 512]);
        // FLUSH.
        header(&m, HDR, VIRTIO_BLK_T_FLUSH, 0);
        let (_, u) = run(
            &mut blk,
            &m,
            &[vec![desc(HDR, 16, 0), desc(STATUS, 1, F_WRITE)]],
        );
        assert_eq!(u, vec![(0, 1)]);
        assert_eq!(status(&m), VIRTIO_BLK_S_OK as u8);
        // GET_ID into 20 bytes.
        header(&m, HDR, VIRTIO_BLK_T_GET_ID, 0);
        let (_, u) = run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 20, F_WRITE),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(u, vec![(0, SERIAL.len() as u32 + 1)]);
        let mut id = vec![0u8; SERIAL.len()];
        m.read_slice(&mut id, GuestAddress(DATA)).unwrap();
        assert_eq!(id, SERIAL);
        assert_eq!(blk.ok, 4);
        assert_eq!(blk.throttled(), 0, "the default limit is far above this");
    }

    /// A flood of requests is served up to the burst, then at the sustained rate: the rest
    /// waits in the queue (a notification meanwhile does nothing), and the timer event at
    /// `wake_at` serves it. Under the default limit the same queue goes through at once.
    #[test]
    fn a_flood_is_throttled_and_the_queue_resumes_when_tokens_refill() {
        use crate::virtio::rate::Bucket;
        const MS: u64 = 1_000_000;
        let t0 = 1_000 * MS;
        let m = mem();
        let limit = RateLimit {
            bytes: None,
            ops: Some(Bucket {
                capacity: 4,
                per_sec: 10,
            }),
        };
        header(&m, HDR, VIRTIO_BLK_T_FLUSH, 0);
        let chains: Vec<_> = (0..10)
            .map(|i| vec![desc(HDR, 16, 0), desc(STATUS + i, 1, F_WRITE)])
            .collect();
        for (lim, want) in [(limit, 4), (RateLimit::BLK, 10)] {
            let mut blk = Blk::with_limit(Box::new(MemDisk::new(vec![0; 4096])), lim);
            let (q, used_addr) = queue_with(&m, 0, 32, &chains);
            let mut queues = vec![q];
            let ep = Epoll::new().unwrap();
            let poll = Poll::new(&ep, 0);
            let mut faults = Faults::default();
            let mut at = |blk: &mut Blk, t: u64, ev: Event| {
                let mut cx = Ctx::new(&m, &mut queues, &poll, &mut faults).at(t);
                blk.handle(&mut cx, ev);
                used(&m, used_addr, 0).0
            };
            assert_eq!(at(&mut blk, t0, Event::Queue(0)), want);
            if want == 10 {
                assert_eq!(blk.throttled(), 0);
                assert_eq!(blk.wake_at(), None);
                continue;
            }
            assert_eq!(blk.throttled(), 1);
            assert_eq!(blk.wake_at(), Some(t0 + 100 * MS), "one request a 100 ms");
            assert_eq!(
                at(&mut blk, t0 + 50 * MS, Event::Queue(0)),
                4,
                "still stopped"
            );
            assert_eq!(at(&mut blk, t0 + 100 * MS, Event::Timer), 5);
            assert_eq!(blk.wake_at(), Some(t0 + 200 * MS));
            // Long after: a full bucket (4), then the last one 100 ms later.
            assert_eq!(at(&mut blk, t0 + 10_000 * MS, Event::Timer), 9);
            assert_eq!(at(&mut blk, t0 + 10_100 * MS, Event::Timer), 10);
            assert_eq!(blk.wake_at(), None, "the queue is empty: no timer");
            assert_eq!(blk.throttled(), 3);
            assert_eq!(blk.ok, 10, "every request served once");
            for i in 0..10 {
                let st: u8 = m.read_obj(GuestAddress(STATUS + i)).unwrap();
                assert_eq!(st, VIRTIO_BLK_S_OK as u8);
            }
            assert_eq!(faults.total_refused(), 0);
        }
    }

    #[test]
    fn unsupported_out_of_range_and_wrong_direction() {
        let m = mem();
        let mut blk = disk(4096); // 8 sectors
        header(&m, HDR, 11, 0); // DISCARD: not offered
        let (f, u) = run(
            &mut blk,
            &m,
            &[vec![desc(HDR, 16, 0), desc(STATUS, 1, F_WRITE)]],
        );
        assert_eq!(u, vec![(0, 1)]);
        assert_eq!(status(&m), VIRTIO_BLK_S_UNSUPP as u8);
        assert_eq!(f.count("unsupported"), 1);
        // Past the end: sector 7 + 1024 bytes.
        header(&m, HDR, VIRTIO_BLK_T_IN, 7);
        run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 1024, F_WRITE),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(status(&m), VIRTIO_BLK_S_IOERR as u8);
        // A sector number that overflows.
        header(&m, HDR, VIRTIO_BLK_T_OUT, u64::MAX);
        run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 512, 0),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(status(&m), VIRTIO_BLK_S_IOERR as u8);
        // Not a multiple of 512.
        header(&m, HDR, VIRTIO_BLK_T_IN, 0);
        run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 100, F_WRITE),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(status(&m), VIRTIO_BLK_S_IOERR as u8);
        // OUT with a device-writable data buffer: wrong direction, disk untouched.
        let before = {
            let mut b = vec![0u8; 4096];
            blk.disk().read_at(&mut b, 0).unwrap();
            b
        };
        header(&m, HDR, VIRTIO_BLK_T_OUT, 0);
        let (f, _) = run(
            &mut blk,
            &m,
            &[vec![
                desc(HDR, 16, 0),
                desc(DATA, 512, F_WRITE),
                desc(STATUS, 1, F_WRITE),
            ]],
        );
        assert_eq!(status(&m), VIRTIO_BLK_S_IOERR as u8);
        assert_eq!(f.count("wrong-direction"), 1);
        let mut after = vec![0u8; 4096];
        blk.disk().read_at(&mut after, 0).unwrap();
        assert_eq!(before, after);
        // A short header.
        let (f, u) = run(
            &mut blk,
            &m,
            &[vec![desc(HDR, 8, 0), desc(STATUS, 1, F_WRITE)]],
        );
        assert_eq!(u, vec![(0, 1)]);
        assert_eq!(f.count("short-header"), 1);
        assert_eq!(status(&m), VIRTIO_BLK_S_IOERR as u8);
    }

    #[test]
    fn file_disk_reads_and_writes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        std::fs::write(&p, vec![7u8; 2048]).unwrap();
        let mut d = FileDisk::open(&p).unwrap();
        assert_eq!(d.size(), 2048);
        d.write_at(&[1, 2, 3], 512).unwrap();
        d.flush().unwrap();
        let mut b = [0u8; 4];
        d.read_at(&mut b, 511).unwrap();
        assert_eq!(b, [7, 1, 2, 3]);
        assert!(d.read_at(&mut [0u8; 8], 2044).is_err());
        assert!(FileDisk::open(&dir.path().join("absent")).is_err());
        assert!(FileDisk::open(dir.path()).is_err());
        let _ = std::fs::read(&p).unwrap();
    }
}
