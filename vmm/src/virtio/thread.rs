//! The virtio devices of one VM ([`VirtioDevices`]: set up before the seccomp filter) and
//! their one device thread ([`DeviceThread`]: epoll over every queue's notification
//! eventfd, the backends' descriptors and a stop eventfd; started before the vCPUs, stopped
//! and joined after the run). The thread's `epoll_wait` times out at the earliest time a
//! device asked for ([`super::VirtioDevice::wake_at`]: a queue its rate limit stopped), and
//! that device then gets [`Event::Timer`].
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use vm_memory::GuestMemoryMmap;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;

use super::mmio::MmioTransport;
use super::{window_base, Event, Interrupt, Poll, VirtioDevice, BACKEND_TOKEN_BASE, MMIO_SIZE};

/// The stop eventfd's epoll data word.
const STOP: u64 = u64::MAX;

fn lock(t: &Mutex<MmioTransport>) -> MutexGuard<'_, MmioTransport> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// The devices of one VM, device `i` at [`window_base`]`(i)`.
pub struct VirtioDevices {
    transports: Vec<Arc<Mutex<MmioTransport>>>,
    names: Vec<&'static str>,
    epoll: Arc<Epoll>,
    stop: EventFd,
    /// The thread's own handles on each queue's eventfd (duplicates).
    queue_evts: Vec<Vec<EventFd>>,
    /// The rate limits' clock ([`super::MONOTONIC`] but in tests).
    clock: super::Clock,
}

impl VirtioDevices {
    /// Wraps `devices` (name, device, the irqfd of its IRQ) in transports and registers
    /// every queue eventfd, backend descriptor and the stop eventfd in one epoll.
    pub fn new(
        mem: &GuestMemoryMmap,
        devices: Vec<(&'static str, Box<dyn VirtioDevice>, EventFd)>,
    ) -> io::Result<Self> {
        let epoll = Arc::new(Epoll::new()?);
        let stop = EventFd::new(libc::EFD_NONBLOCK)?;
        epoll.ctl(
            ControlOperation::Add,
            stop.as_raw_fd(),
            EpollEvent::new(EventSet::IN, STOP),
        )?;
        let mut transports = Vec::new();
        let mut names = Vec::new();
        let mut queue_evts = Vec::new();
        for (i, (name, dev, irq)) in devices.into_iter().enumerate() {
            let backend = dev.backend_fds();
            let t = MmioTransport::new(
                dev,
                mem.clone(),
                Arc::new(Interrupt::new(irq)),
                epoll.clone(),
                i as u32,
            )?;
            let poll = Poll::new(&epoll, i as u32);
            let mut evts = Vec::new();
            for (q, e) in t.queue_evts().iter().enumerate() {
                let dup = e.try_clone()?;
                poll.add(dup.as_raw_fd(), q as u32, EventSet::IN)?;
                evts.push(dup);
            }
            for (fd, token, events) in backend {
                debug_assert!(token >= BACKEND_TOKEN_BASE);
                poll.add(fd, token, events)?;
            }
            transports.push(Arc::new(Mutex::new(t)));
            names.push(name);
            queue_evts.push(evts);
        }
        Ok(VirtioDevices {
            transports,
            names,
            epoll,
            stop,
            queue_evts,
            clock: super::MONOTONIC,
        })
    }

    /// The same devices on `clock` (the thread's timeouts and every transport's events): a
    /// test drives time itself instead of waiting for it.
    pub fn with_clock(mut self, clock: super::Clock) -> Self {
        self.clock = clock;
        for t in &self.transports {
            lock(t).set_clock(clock);
        }
        self
    }

    pub fn len(&self) -> usize {
        self.transports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.transports.is_empty()
    }

    /// Device `i`'s transport.
    pub fn transport(&self, i: usize) -> Option<&Arc<Mutex<MmioTransport>>> {
        self.transports.get(i)
    }

    /// The MMIO windows' handles for the vCPU side.
    pub fn windows(&self) -> MmioWindows {
        MmioWindows {
            transports: self.transports.clone(),
        }
    }

    /// (name, window base) of each device.
    pub fn layout(&self) -> Vec<(&'static str, u64)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, window_base(i)))
            .collect()
    }

    /// A reader of every device's report, usable after the thread stopped.
    pub fn reporter(&self) -> DeviceReporter {
        DeviceReporter {
            transports: self.transports.clone(),
            names: self.names.clone(),
        }
    }

    /// Starts the device thread.
    pub fn start(self) -> io::Result<DeviceThread> {
        let stop = self.stop.try_clone()?;
        let handle = std::thread::Builder::new()
            .name("virtio".into())
            .spawn(move || self.serve())?;
        Ok(DeviceThread {
            stop,
            handle: Some(handle),
        })
    }

    /// The epoll timeout until the earliest device timer, ms (rounded up: never early), or
    /// -1 (none).
    fn timeout_ms(&self, now: u64) -> i32 {
        let next = self
            .transports
            .iter()
            .filter_map(|t| lock(t).wake_at())
            .min();
        match next {
            None => -1,
            Some(at) => {
                let ms = at.saturating_sub(now).div_ceil(1_000_000);
                i32::try_from(ms).unwrap_or(i32::MAX)
            }
        }
    }

    /// Delivers [`Event::Timer`] to every device whose time came.
    fn timers(&self, now: u64) {
        for t in &self.transports {
            let mut t = lock(t);
            if t.wake_at().is_some_and(|at| at <= now) {
                t.handle(Event::Timer);
            }
        }
    }

    fn serve(self) {
        let mut events = vec![EpollEvent::default(); 32];
        loop {
            let timeout = self.timeout_ms((self.clock)());
            let n = match self.epoll.wait(timeout, &mut events) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            for e in &events[..n] {
                if e.data() == STOP {
                    return;
                }
                let (dev, sub) = Poll::split(e.data());
                let Some(t) = self.transports.get(dev as usize) else {
                    continue;
                };
                let ev = if sub < BACKEND_TOKEN_BASE {
                    // Reset the counter first: a notify after this read wakes us again.
                    if let Some(evt) = self
                        .queue_evts
                        .get(dev as usize)
                        .and_then(|v| v.get(sub as usize))
                    {
                        let _ = evt.read();
                    }
                    Event::Queue(sub as u16)
                } else {
                    Event::Backend {
                        token: sub,
                        events: e.events(),
                    }
                };
                lock(t).handle(ev);
            }
            self.timers((self.clock)());
        }
    }
}

/// The vCPU side: MMIO accesses routed to the device whose window holds the address.
#[derive(Clone, Default)]
pub struct MmioWindows {
    transports: Vec<Arc<Mutex<MmioTransport>>>,
}

impl MmioWindows {
    fn find(&self, addr: u64) -> Option<(&Arc<Mutex<MmioTransport>>, u64)> {
        let off = addr.checked_sub(super::MMIO_BASE)?;
        let t = self
            .transports
            .get(usize::try_from(off / MMIO_SIZE).ok()?)?;
        Some((t, off % MMIO_SIZE))
    }

    /// A read at `addr`: false when no window holds it.
    pub fn read(&self, addr: u64, data: &mut [u8]) -> bool {
        match self.find(addr) {
            Some((t, off)) => {
                lock(t).read(off, data);
                true
            }
            None => false,
        }
    }

    /// A write at `addr`: false when no window holds it.
    pub fn write(&self, addr: u64, data: &[u8]) -> bool {
        match self.find(addr) {
            Some((t, off)) => {
                lock(t).write(off, data);
                true
            }
            None => false,
        }
    }
}

/// Reads what each device did ([`VirtioDevices::reporter`]).
pub struct DeviceReporter {
    transports: Vec<Arc<Mutex<MmioTransport>>>,
    names: Vec<&'static str>,
}

impl DeviceReporter {
    /// Each device's report, in window order.
    pub fn reports(&self) -> Vec<super::DeviceReport> {
        self.transports
            .iter()
            .zip(&self.names)
            .map(|(t, n)| lock(t).report(n))
            .collect()
    }
}

/// The running device thread; [`DeviceThread::stop`] ends and joins it.
pub struct DeviceThread {
    stop: EventFd,
    handle: Option<JoinHandle<()>>,
}

impl DeviceThread {
    /// Stops and joins the thread; false if it panicked.
    pub fn stop(mut self) -> bool {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> bool {
        let _ = self.stop.write(1);
        match self.handle.take() {
            Some(h) => h.join().is_ok(),
            None => true,
        }
    }
}

impl Drop for DeviceThread {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::blk::{Blk, MemDisk};
    use crate::virtio::mmio::*;
    use crate::virtio::testutil::{desc, mem, used, F_WRITE, Q};
    use virtio_queue::QueueT;
    use vm_memory::{Bytes, GuestAddress};

    /// The whole path without KVM: probe over the windows, a request, the thread serves it
    /// and raises the interrupt; then the thread stops.
    #[test]
    fn device_thread_serves_a_blk_request() {
        let m = mem();
        let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let irq_reader = irq.try_clone().unwrap();
        let disk = MemDisk::new(vec![0x5a; 4096]);
        let devs =
            VirtioDevices::new(&m, vec![("blk", Box::new(Blk::new(Box::new(disk))), irq)]).unwrap();
        assert_eq!(devs.layout(), vec![("blk", 0xd000_0000)]);
        let win = devs.windows();
        let reporter = devs.reporter();
        let thread = devs.start().unwrap();
        let base = 0xd000_0000u64;
        let w = |off: u64, v: u32| assert!(win.write(base + off, &v.to_le_bytes()));
        let r = |off: u64| {
            let mut b = [0u8; 4];
            assert!(win.read(base + off, &mut b));
            u32::from_le_bytes(b)
        };
        assert_eq!(r(MAGIC_VALUE), MAGIC);
        assert!(
            !win.read(base + MMIO_SIZE, &mut [0u8; 4]),
            "one window only"
        );
        assert!(!win.read(0xcfff_f000, &mut [0u8; 4]));
        let mut q = Q::new(&m, 0x1000, 16);
        w(STATUS, S_ACKNOWLEDGE);
        w(STATUS, S_ACKNOWLEDGE | S_DRIVER);
        w(DRIVER_FEATURES_SEL, 1);
        w(DRIVER_FEATURES, 1);
        w(STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK);
        w(QUEUE_SEL, 0);
        w(QUEUE_NUM, 16);
        let qq = q.queue();
        w(QUEUE_DESC_LOW, qq.desc_table() as u32);
        w(QUEUE_DRIVER_LOW, qq.avail_ring() as u32);
        w(QUEUE_DEVICE_LOW, qq.used_ring() as u32);
        w(QUEUE_READY, 1);
        w(STATUS, 0xf);
        assert_eq!(r(STATUS), 0xf);
        let mut hdr = [0u8; 16];
        hdr[8] = 1; // IN, sector 1
        m.write_slice(&hdr, GuestAddress(0x10_0000)).unwrap();
        q.push(&[
            desc(0x10_0000, 16, 0),
            desc(0x11_0000, 512, F_WRITE),
            desc(0x12_0000, 1, F_WRITE),
        ]);
        w(QUEUE_NOTIFY, 0);
        let mut got = 0;
        for _ in 0..500 {
            got = used(&m, q.used_addr, 1).0;
            if got == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(got, 1);
        assert_eq!(r(INTERRUPT_STATUS) & 1, 1);
        assert!(irq_reader.read().unwrap() >= 1);
        let mut data = [0u8; 512];
        m.read_slice(&mut data, GuestAddress(0x11_0000)).unwrap();
        assert_eq!(data, [0x5a; 512]);
        assert!(thread.stop());
        // The report after the thread stopped: one chain served, one request ok.
        let reports = reporter.reports();
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].name, "blk");
        assert_eq!(reports[0].chains_ok, 1);
        assert_eq!(reports[0].counters["requests_ok"], 1);
        assert_eq!(reports[0].counters["requests_ioerr"], 0);
        assert!(reports[0].refused.is_empty());
    }

    /// The test clock of [`device_thread_resumes_a_throttled_queue_on_its_timer`], ns.
    static TEST_NOW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000);

    fn test_now() -> u64 {
        TEST_NOW.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A queue stopped by its rate limit is resumed by the thread itself: one notification,
    /// three requests at one per 30.3 ms of the devices' clock, all served without another
    /// notification — each only once the clock the test drives has reached its tokens (no
    /// assertion on how long anything took: the clock is the test's).
    #[test]
    fn device_thread_resumes_a_throttled_queue_on_its_timer() {
        use crate::virtio::rate::{Bucket, RateLimit};
        use std::sync::atomic::Ordering::SeqCst;
        let m = mem();
        let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let limit = RateLimit {
            bytes: None,
            ops: Some(Bucket {
                capacity: 1,
                per_sec: 33,
            }),
        };
        let blk = Blk::with_limit(Box::new(MemDisk::new(vec![0; 4096])), limit);
        let devs = VirtioDevices::new(&m, vec![("blk", Box::new(blk), irq)])
            .unwrap()
            .with_clock(test_now);
        let win = devs.windows();
        let reporter = devs.reporter();
        let base = 0xd000_0000u64;
        let w = |off: u64, v: u32| assert!(win.write(base + off, &v.to_le_bytes()));
        let mut q = Q::new(&m, 0x1000, 16);
        let qq = q.queue();
        for (off, v) in [
            (STATUS, S_ACKNOWLEDGE),
            (STATUS, S_ACKNOWLEDGE | S_DRIVER),
            (DRIVER_FEATURES_SEL, 1),
            (DRIVER_FEATURES, 1),
            (STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK),
            (QUEUE_SEL, 0),
            (QUEUE_NUM, 16),
            (QUEUE_DESC_LOW, qq.desc_table() as u32),
            (QUEUE_DRIVER_LOW, qq.avail_ring() as u32),
            (QUEUE_DEVICE_LOW, qq.used_ring() as u32),
            (QUEUE_READY, 1),
        ] {
            w(off, v);
        }
        let mut hdr = [0u8; 16];
        hdr[..4].copy_from_slice(&4u32.to_le_bytes()); // FLUSH
        m.write_slice(&hdr, GuestAddress(0x10_0000)).unwrap();
        for i in 0..3 {
            q.push(&[desc(0x10_0000, 16, 0), desc(0x12_0000 + i, 1, F_WRITE)]);
        }
        let thread = devs.start().unwrap();
        // DRIVER_OK looks at the queue once: the only notification. The bucket starts full:
        // one request served at once, the next stopped until 1/33 s later on the clock.
        w(STATUS, 0xf);
        let served = || used(&m, q.used_addr, 0).0;
        // Waits (polling, at most 10 s of real time against a hang) until `n` are served.
        let until = |n: u16| {
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while served() < n && std::time::Instant::now() < give_up {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            served()
        };
        assert_eq!(until(1), 1, "the first request at once");
        // The clock has not moved: whatever the thread does, nothing more can be served.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(
            served(),
            1,
            "a stopped queue waits for its tokens, not for the thread"
        );
        // One token is 1/33 s = 30,303,031 ns (rounded up). A hair short of it: still stopped.
        TEST_NOW.fetch_add(30_303_030, SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(served(), 1, "one ns short of the token");
        TEST_NOW.fetch_add(1, SeqCst);
        assert_eq!(
            until(2),
            2,
            "the timer serves the second once its token is there"
        );
        TEST_NOW.fetch_add(30_303_031, SeqCst);
        assert_eq!(until(3), 3, "and the third");
        assert!(thread.stop());
        let r = &reporter.reports()[0];
        assert_eq!(r.counters["requests_ok"], 3);
        assert_eq!(r.counters["throttled"], 2);
    }
}
