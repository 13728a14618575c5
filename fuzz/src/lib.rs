//! Helpers shared by the fuzz targets: a reader that turns the fuzzer's bytes into the
//! structured inputs some targets need (numbers, flags, slices), never failing (missing
//! bytes read as zeros), so every input is a valid case.

/// Takes values off the front of the fuzzer's bytes.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// The next `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        head
    }

    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    pub fn u16(&mut self) -> u16 {
        let mut a = [0u8; 2];
        let b = self.bytes(2);
        a[..b.len()].copy_from_slice(b);
        u16::from_le_bytes(a)
    }

    pub fn u32(&mut self) -> u32 {
        let mut a = [0u8; 4];
        let b = self.bytes(4);
        a[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(a)
    }

    pub fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        let b = self.bytes(8);
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A slice whose length is the next byte.
    pub fn short(&mut self) -> &'a [u8] {
        let n = usize::from(self.u8());
        self.bytes(n)
    }

    /// Bytes left.
    pub fn rest_len(&self) -> usize {
        self.data.len()
    }

    /// Whatever is left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(usize::MAX)
    }
}

/// A driver's split virtqueue in guest memory, for the per-device virtio targets: the
/// descriptor table at `base`, the available ring at `base + 0x1000`, the used ring at
/// `base + 0x1400` (room for 256 entries each), `size` entries. Chains are placed as a
/// driver places them (consecutive descriptors, NEXT by position, wrapping), or written raw.
pub struct Ring {
    pub base: u64,
    pub size: u16,
    next_desc: u16,
    avail_idx: u16,
    used_seen: u16,
}

/// One buffer of a chain: (guest address, length, device-writable).
pub type Buf = (u64, u32, bool);

impl Ring {
    pub const SPAN: u64 = 0x2000;

    /// `size` is rounded down to a power of two in 1..=256.
    pub fn new(base: u64, size: u16) -> Self {
        let size = size.clamp(1, 256);
        let size = 1u16 << (15 - size.leading_zeros());
        Ring {
            base,
            size,
            next_desc: 0,
            avail_idx: 0,
            used_seen: 0,
        }
    }

    fn avail(&self) -> u64 {
        self.base + 0x1000
    }

    fn used(&self) -> u64 {
        self.base + 0x1400
    }

    /// The device side of this ring (what a driver's MMIO programming gives).
    pub fn queue(&self) -> virtio_queue::Queue {
        use virtio_queue::QueueT;
        let mut q = virtio_queue::Queue::new(256).expect("a queue of 256");
        q.set_size(self.size);
        q.set_desc_table_address(Some(self.base as u32), Some(0));
        q.set_avail_ring_address(Some(self.avail() as u32), Some(0));
        q.set_used_ring_address(Some(self.used() as u32), Some(0));
        q.set_ready(true);
        q
    }

    /// Writes descriptor `i` as it is.
    pub fn raw_desc<M: vm_memory::Bytes<vm_memory::GuestAddress>>(
        &self,
        mem: &M,
        i: u16,
        addr: u64,
        len: u32,
        flags: u16,
        next: u16,
    ) {
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..].copy_from_slice(&next.to_le_bytes());
        let at = self.base + 16 * u64::from(i % self.size);
        let _ = mem.write_slice(&d, vm_memory::GuestAddress(at));
    }

    /// Makes `head` available (its next avail ring entry, then the index).
    pub fn offer<M: vm_memory::Bytes<vm_memory::GuestAddress>>(&mut self, mem: &M, head: u16) {
        let slot = self.avail() + 4 + 2 * u64::from(self.avail_idx % self.size);
        let _ = mem.write_slice(&head.to_le_bytes(), vm_memory::GuestAddress(slot));
        self.avail_idx = self.avail_idx.wrapping_add(1);
        let _ = mem.write_slice(
            &self.avail_idx.to_le_bytes(),
            vm_memory::GuestAddress(self.avail() + 2),
        );
    }

    /// What a hostile driver writes: descriptor `i` raw (an address below `mem_size + 4096`,
    /// any length, flags and next) and an avail entry naming any head up to `size + 1`, read
    /// from `input` in that order.
    pub fn hostile_offer<M: vm_memory::Bytes<vm_memory::GuestAddress>>(
        &mut self,
        mem: &M,
        input: &mut Input,
        mem_size: u64,
    ) {
        let i = input.u16();
        let (addr, len, flags, next) = (
            input.u64() % (mem_size + 4096),
            input.u32(),
            input.u16(),
            input.u16(),
        );
        self.raw_desc(mem, i, addr, len, flags, next);
        let head = input.u16() % (self.size + 2);
        self.offer(mem, head);
    }

    /// Places `bufs` as one chain in the next free descriptors and offers it: its head, or
    /// None when the ring has not that many descriptors free (`in_flight` of them taken) or
    /// `bufs` is empty.
    pub fn push<M: vm_memory::Bytes<vm_memory::GuestAddress>>(
        &mut self,
        mem: &M,
        bufs: &[Buf],
        in_flight: usize,
    ) -> Option<u16> {
        if bufs.is_empty() || in_flight + bufs.len() > usize::from(self.size) {
            return None;
        }
        let head = self.next_desc;
        for (i, &(addr, len, write)) in bufs.iter().enumerate() {
            let at = self.next_desc;
            let next = (at + 1) % self.size;
            let last = i + 1 == bufs.len();
            let flags = u16::from(!last) | if write { 2 } else { 0 };
            self.raw_desc(mem, at, addr, len, flags, if last { 0 } else { next });
            self.next_desc = next;
        }
        self.offer(mem, head);
        Some(head)
    }

    /// The used ring entries added since the last call: (id, len).
    pub fn take_used<M: vm_memory::Bytes<vm_memory::GuestAddress>>(
        &mut self,
        mem: &M,
    ) -> Vec<(u32, u32)> {
        let mut idx = [0u8; 2];
        let _ = mem.read_slice(&mut idx, vm_memory::GuestAddress(self.used() + 2));
        let idx = u16::from_le_bytes(idx);
        let mut out = Vec::new();
        while self.used_seen != idx && out.len() <= usize::from(self.size) {
            let at = self.used() + 4 + 8 * u64::from(self.used_seen % self.size);
            let mut e = [0u8; 8];
            let _ = mem.read_slice(&mut e, vm_memory::GuestAddress(at));
            out.push((
                u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            ));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }
}

/// A rate limit and a clock from the fuzzer's bytes: unlimited, the default, or small
/// buckets that a few operations exhaust.
pub fn rate_limit(
    input: &mut Input<'_>,
    default: truecold_vmm::virtio::rate::RateLimit,
) -> truecold_vmm::virtio::rate::RateLimit {
    use truecold_vmm::virtio::rate::{Bucket, RateLimit};
    match input.u8() % 4 {
        0 => RateLimit::UNLIMITED,
        1 => default,
        _ => {
            let mut bucket = |cap: u64| {
                input.bool().then(|| Bucket {
                    capacity: 1 + u64::from(input.u16()) % cap,
                    per_sec: 1 + u64::from(input.u32()) % 1_000_000,
                })
            };
            RateLimit {
                bytes: bucket(1 << 16),
                ops: bucket(16),
            }
        }
    }
}

/// The rows and declarations of a committed bundle (results/), for the readers that check
/// a file against a bundle's rows, read in the bundle's own schema. A bundle no longer
/// readable (a schema verify dropped) stops the target at its first input, naming the file:
/// point these paths at a current bundle.
pub fn committed_bundle() -> &'static (
    Vec<truecold_proof::schema::Sample>,
    truecold_proof::reports::Expect,
) {
    use std::sync::OnceLock;
    static B: OnceLock<(
        Vec<truecold_proof::schema::Sample>,
        truecold_proof::reports::Expect,
    )> = OnceLock::new();
    B.get_or_init(|| {
        let result = truecold_proof::bundle::parse_result(include_bytes!(
            "../../results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/result.json"
        ))
        .expect("results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/result.json reads");
        // Read in the bundle's own schema (verify's rule), so a newer schema does not stop it.
        let samples = truecold_proof::csv::read_schema_samples_from(
            &include_bytes!(
                "../../results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/samples.csv"
            )[..],
            result.schema_version,
        )
        .expect("results/20261130T231633Z-nested-linux-sequential-1vcpu-1024mib/samples.csv reads");
        (samples, truecold_proof::reports::Expect::of(&result))
    })
}

/// A hostile driver's write of a few bytes anywhere in the first `mem_size` bytes of guest
/// memory (rings, headers, buffers), read from `input`.
pub fn raw_write<M: vm_memory::Bytes<vm_memory::GuestAddress>>(
    mem: &M,
    input: &mut Input,
    mem_size: u64,
) {
    let at = u64::from(input.u32()) % mem_size;
    let bytes = input.short();
    let _ = mem.write_slice(bytes, vm_memory::GuestAddress(at));
}
