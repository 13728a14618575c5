//! The guest's call stack at a RIP sample (`--sample-stacks`): the walk of its kernel's
//! frame-pointer chain, read from guest memory through the guest's own page tables.
//!
//! A kernel built with `CONFIG_FRAME_POINTER` keeps, in each function's frame, the caller's
//! frame pointer at `[rbp]` and the return address at `[rbp + 8]`. From the vCPU's RBP the
//! walk reads those two words frame after frame, translating each virtual address with the
//! guest's page tables (CR3; 4-level paging, or 5-level with CR4.LA57; 4 KiB, 2 MiB and
//! 1 GiB pages) and reading guest physical memory through the VMM's own mapping of it.
//!
//! Guest memory is untrusted: it may hold anything, and other vCPUs change it while this one
//! is read. Every loop is bounded and every read checked, so a bad chain ends the stack with
//! a marker ([`StackEnd`]), never with a fault or a hang of the VMM:
//! - at most [`MAX_STACK_DEPTH`] return addresses, each frame pointer strictly above the
//!   previous one and inside [`MAX_STACK_SPAN`] above RSP;
//! - at most 5 page-table reads per translation, and per sample at most [`TLB_ENTRIES`]
//!   translations kept (a small cache, reset at each sample);
//! - a physical address outside guest RAM is no read ([`GuestPhys::read_u64`] says so).
//!
//! The walk only runs when the vCPU is in 64-bit mode with paging (EFER.LMA, CR0.PG, CS.L)
//! at CPL 0 with a RIP in the kernel's half; otherwise the sample has no stack
//! ([`StackEnd::NotWalked`]). A leaf sampled in its prologue, before it set up its frame,
//! shows its caller's caller first (the frame-pointer unwinder's known blind spot); an
//! interrupt's frames end at its entry (an encoded `pt_regs` pointer): the interrupted code is
//! not followed.

use truecold_proto::rip::{StackEnd, MAX_STACK_DEPTH, MAX_STACK_SPAN};

/// Translations cached per sample.
pub const TLB_ENTRIES: usize = 8;

/// Guest physical memory, read 8 bytes at a time.
pub trait GuestPhys {
    /// The little-endian u64 at guest physical address `gpa`, `None` when any of its bytes
    /// is outside guest RAM.
    fn read_u64(&self, gpa: u64) -> Option<u64>;
}

impl GuestPhys for vm_memory::GuestMemoryMmap {
    fn read_u64(&self, gpa: u64) -> Option<u64> {
        use vm_memory::Bytes;
        self.read_obj::<u64>(vm_memory::GuestAddress(gpa)).ok()
    }
}

/// The registers the walk reads (`KVM_GET_REGS`, `KVM_GET_SREGS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cpu {
    pub rip: u64,
    pub rbp: u64,
    pub rsp: u64,
    pub cr0: u64,
    pub cr3: u64,
    pub cr4: u64,
    pub efer: u64,
    /// CS.L: 64-bit code.
    pub cs_long: bool,
    /// The current privilege level (CS's selector's low two bits).
    pub cpl: u8,
}

impl Cpu {
    /// From the vCPU's registers.
    pub fn of(regs: &kvm_bindings::kvm_regs, sregs: &kvm_bindings::kvm_sregs) -> Self {
        Cpu {
            rip: regs.rip,
            rbp: regs.rbp,
            rsp: regs.rsp,
            cr0: sregs.cr0,
            cr3: sregs.cr3,
            cr4: sregs.cr4,
            efer: sregs.efer,
            cs_long: sregs.cs.l != 0,
            cpl: (sregs.cs.selector & 3) as u8,
        }
    }

    fn la57(&self) -> bool {
        self.cr4 & CR4_LA57 != 0
    }

    /// Whether `va` is a canonical address of the kernel's (upper) half.
    fn kernel(&self, va: u64) -> bool {
        if self.la57() {
            va >= 0xff00_0000_0000_0000
        } else {
            va >= 0xffff_8000_0000_0000
        }
    }
}

const CR0_PG: u64 = 1 << 31;
const CR4_LA57: u64 = 1 << 12;
const EFER_LMA: u64 = 1 << 10;
const PTE_PRESENT: u64 = 1;
const PTE_PS: u64 = 1 << 7;
/// Bits 12..51: the next table's, or a 4 KiB page's, physical address.
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

/// The per-sample translation cache: virtual 4 KiB page → physical page.
struct Tlb<'m, M: GuestPhys + ?Sized> {
    mem: &'m M,
    cr3: u64,
    levels: u32,
    entries: [(u64, u64); TLB_ENTRIES],
    len: usize,
    next: usize,
}

impl<'m, M: GuestPhys + ?Sized> Tlb<'m, M> {
    fn new(mem: &'m M, cpu: &Cpu) -> Self {
        Tlb {
            mem,
            cr3: cpu.cr3,
            levels: if cpu.la57() { 5 } else { 4 },
            entries: [(0, 0); TLB_ENTRIES],
            len: 0,
            next: 0,
        }
    }

    /// The guest physical address of `va` (`None`: not mapped, or a table outside RAM).
    fn translate(&mut self, va: u64) -> Option<u64> {
        let page = va >> 12;
        if let Some(&(_, pa)) = self.entries[..self.len].iter().find(|e| e.0 == page) {
            return Some(pa | (va & 0xfff));
        }
        let pa = self.walk(va)?;
        self.entries[self.next] = (page, pa & !0xfff);
        self.next = (self.next + 1) % TLB_ENTRIES;
        self.len = (self.len + 1).min(TLB_ENTRIES);
        Some(pa)
    }

    /// The page-table walk: one read per level, at most 5.
    fn walk(&self, va: u64) -> Option<u64> {
        let mut table = self.cr3 & ADDR_MASK;
        let mut shift = 12 + 9 * self.levels;
        for _ in 0..self.levels {
            shift -= 9;
            let index = (va >> shift) & 0x1ff;
            let e = self.mem.read_u64(table.checked_add(index * 8)?)?;
            if e & PTE_PRESENT == 0 {
                return None;
            }
            // A 1 GiB (PDPT) or 2 MiB (PD) page.
            if (shift == 30 || shift == 21) && e & PTE_PS != 0 {
                let low = (1u64 << shift) - 1;
                return Some((e & ADDR_MASK & !low) | (va & low));
            }
            table = e & ADDR_MASK;
        }
        Some(table | (va & 0xfff))
    }

    fn read(&mut self, va: u64) -> Option<u64> {
        let pa = self.translate(va)?;
        self.mem.read_u64(pa)
    }
}

/// Walks the frame-pointer chain of `cpu` in `mem`: the return addresses, innermost caller
/// first, written to `out` (their count returned), and how the walk ended.
pub fn walk<M: GuestPhys + ?Sized>(
    cpu: &Cpu,
    mem: &M,
    out: &mut [u64; MAX_STACK_DEPTH],
) -> (usize, StackEnd) {
    let long_mode = cpu.cr0 & CR0_PG != 0 && cpu.efer & EFER_LMA != 0 && cpu.cs_long;
    if !long_mode || cpu.cpl != 0 || !cpu.kernel(cpu.rip) {
        return (0, StackEnd::NotWalked);
    }
    let mut tlb = Tlb::new(mem, cpu);
    let lo = cpu.rsp;
    let mut fp = cpu.rbp;
    let mut n = 0;
    loop {
        if fp == 0 || fp & 7 == 1 {
            // The end of the chain: none, or an entry's encoded pt_regs pointer.
            return (n, StackEnd::End);
        }
        if fp & 7 != 0 || !cpu.kernel(fp) {
            return (n, StackEnd::BadAddress);
        }
        if fp < lo || fp - lo >= MAX_STACK_SPAN {
            return (n, StackEnd::OutOfSpan);
        }
        if n == MAX_STACK_DEPTH {
            return (n, StackEnd::Depth);
        }
        let Some(ret_at) = fp.checked_add(8) else {
            return (n, StackEnd::BadAddress);
        };
        let (Some(next), Some(ret)) = (tlb.read(fp), tlb.read(ret_at)) else {
            return (n, StackEnd::Unmapped);
        };
        if !cpu.kernel(ret) {
            return (n, StackEnd::BadReturn);
        }
        out[n] = ret;
        n += 1;
        if next != 0 && next & 7 != 1 && next <= fp {
            return (n, StackEnd::NotAbove);
        }
        fp = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Guest physical memory as a sparse map of u64s (the rest unreadable), with a
    /// counter of reads.
    #[derive(Default)]
    struct Mem {
        words: BTreeMap<u64, u64>,
        reads: std::cell::Cell<u64>,
    }

    impl GuestPhys for Mem {
        fn read_u64(&self, gpa: u64) -> Option<u64> {
            self.reads.set(self.reads.get() + 1);
            self.words.get(&gpa).copied()
        }
    }

    const KERNEL: u64 = 0xffff_ffff_8100_0000;
    /// The stack's virtual page, mapped by a 4 KiB page at STACK_PA.
    const STACK: u64 = 0xffff_c900_0001_0000;
    const STACK_PA: u64 = 0x0020_0000;
    const CR3: u64 = 0x1000;

    /// Page tables at CR3 mapping STACK..STACK+8 KiB (4 KiB pages), and the kernel text by
    /// a 2 MiB page.
    fn mem() -> Mem {
        let mut m = Mem::default();
        let idx = |va: u64, shift: u32| (va >> shift) & 0x1ff;
        // STACK: PML4 → PDPT 0x2000 → PD 0x3000 → PT 0x4000.
        m.words.insert(CR3 + idx(STACK, 39) * 8, 0x2000 | 3);
        m.words.insert(0x2000 + idx(STACK, 30) * 8, 0x3000 | 3);
        m.words.insert(0x3000 + idx(STACK, 21) * 8, 0x4000 | 3);
        m.words.insert(0x4000 + idx(STACK, 12) * 8, STACK_PA | 3);
        m.words.insert(
            0x4000 + idx(STACK + 0x1000, 12) * 8,
            (STACK_PA + 0x1000) | 3,
        );
        m
    }

    fn cpu(rbp: u64) -> Cpu {
        Cpu {
            rip: KERNEL + 0x123,
            rbp,
            rsp: STACK + 0x100,
            cr0: CR0_PG | 1,
            cr3: CR3,
            cr4: 1 << 5,
            efer: EFER_LMA | (1 << 8),
            cs_long: true,
            cpl: 0,
        }
    }

    /// A frame at virtual `fp`: `[fp]` = `next`, `[fp + 8]` = `ret`.
    fn frame(m: &mut Mem, fp: u64, next: u64, ret: u64) {
        m.words.insert(STACK_PA + (fp - STACK), next);
        m.words.insert(STACK_PA + (fp + 8 - STACK), ret);
    }

    fn run(m: &Mem, c: &Cpu) -> (Vec<u64>, StackEnd) {
        let mut out = [0u64; MAX_STACK_DEPTH];
        let (n, end) = walk(c, m, &mut out);
        (out[..n].to_vec(), end)
    }

    #[test]
    fn a_good_chain_is_walked_to_its_end() {
        let mut m = mem();
        // Three frames, the second across the page boundary, the last ending in 0.
        frame(&mut m, STACK + 0x200, STACK + 0xff8, KERNEL + 0x10);
        frame(&mut m, STACK + 0xff8, STACK + 0x1100, KERNEL + 0x20);
        frame(&mut m, STACK + 0x1100, 0, KERNEL + 0x30);
        let c = cpu(STACK + 0x200);
        assert_eq!(
            run(&m, &c),
            (
                vec![KERNEL + 0x10, KERNEL + 0x20, KERNEL + 0x30],
                StackEnd::End
            )
        );
        // An entry's encoded pt_regs pointer ends it too.
        frame(&mut m, STACK + 0x1100, STACK + 0x1f00 + 1, KERNEL + 0x30);
        assert_eq!(run(&m, &c).1, StackEnd::End);
        // 5-level paging: one more level above the same tables.
        let mut m5 = Mem::default();
        for (k, v) in &m.words {
            m5.words.insert(*k, *v);
        }
        let l5 = 0x5000;
        m5.words.insert(l5 + ((STACK >> 48) & 0x1ff) * 8, CR3 | 3);
        let mut c5 = c;
        c5.cr3 = l5;
        c5.cr4 |= CR4_LA57;
        assert_eq!(run(&m5, &c5).0.len(), 3);
    }

    #[test]
    fn a_loop_ends_the_stack_with_its_marker() {
        let mut m = mem();
        frame(&mut m, STACK + 0x200, STACK + 0x300, KERNEL + 0x10);
        frame(&mut m, STACK + 0x300, STACK + 0x200, KERNEL + 0x20);
        let (f, end) = run(&m, &cpu(STACK + 0x200));
        assert_eq!(end, StackEnd::NotAbove);
        assert_eq!(f, vec![KERNEL + 0x10, KERNEL + 0x20]);
        // A frame pointing at itself.
        frame(&mut m, STACK + 0x200, STACK + 0x200, KERNEL + 0x10);
        assert_eq!(run(&m, &cpu(STACK + 0x200)).1, StackEnd::NotAbove);
    }

    #[test]
    fn a_chain_out_of_bounds_ends_with_its_marker() {
        let mut m = mem();
        // Below RSP.
        assert_eq!(run(&m, &cpu(STACK + 0x80)), (vec![], StackEnd::OutOfSpan));
        // Past the span above RSP.
        frame(
            &mut m,
            STACK + 0x200,
            STACK + 0x100 + MAX_STACK_SPAN,
            KERNEL,
        );
        assert_eq!(run(&m, &cpu(STACK + 0x200)).1, StackEnd::OutOfSpan);
        // Inside the span but not mapped (the third stack page has no entry).
        frame(&mut m, STACK + 0x200, STACK + 0x2000, KERNEL);
        assert_eq!(run(&m, &cpu(STACK + 0x200)).1, StackEnd::Unmapped);
        // Mapped, but to a physical address outside RAM.
        let mut m = mem();
        m.words.remove(&(STACK_PA + 0x200));
        assert_eq!(run(&m, &cpu(STACK + 0x200)).1, StackEnd::Unmapped);
        // A page-table entry pointing past RAM: no read succeeds, nothing loops.
        let mut m = mem();
        let pml4 = CR3 + ((STACK >> 39) & 0x1ff) * 8;
        m.words.insert(pml4, 0x000f_ffff_ffff_f000 | 3);
        assert_eq!(run(&m, &cpu(STACK + 0x200)).1, StackEnd::Unmapped);
        // Not a 48-deep chain beyond the bound: a chain of 60 frames stops at the depth.
        let mut m = mem();
        for i in 0..60u64 {
            frame(
                &mut m,
                STACK + 0x200 + i * 16,
                STACK + 0x210 + i * 16,
                KERNEL + i,
            );
        }
        let (f, end) = run(&m, &cpu(STACK + 0x200));
        assert_eq!((f.len(), end), (MAX_STACK_DEPTH, StackEnd::Depth));
        // Bounded reads: a translation cached per page, at most 4 table reads a miss.
        assert!(m.reads.get() <= (2 * MAX_STACK_DEPTH + 4 * 2) as u64 + 8);
    }

    #[test]
    fn a_non_canonical_or_misaligned_address_ends_with_its_marker() {
        let mut m = mem();
        // A non-canonical frame pointer.
        assert_eq!(
            run(&m, &cpu(0x0000_9000_0000_0000)),
            (vec![], StackEnd::BadAddress)
        );
        assert_eq!(run(&m, &cpu(0xfff0_0000_0000_0000)).1, StackEnd::BadAddress);
        // Misaligned.
        assert_eq!(run(&m, &cpu(STACK + 0x204)).1, StackEnd::BadAddress);
        // A return address in user space or non-canonical.
        frame(&mut m, STACK + 0x200, 0, 0x0000_8000_0000_0000);
        assert_eq!(run(&m, &cpu(STACK + 0x200)).1, StackEnd::BadReturn);
        // With 5-level paging the canonical kernel half starts at 0xff00…: below it, no walk.
        let mut c = cpu(STACK + 0x200);
        c.cr4 |= CR4_LA57;
        c.rip = 0xfe00_0000_0000_0000;
        assert_eq!(run(&m, &c).1, StackEnd::NotWalked);
    }

    #[test]
    fn only_64_bit_kernel_code_is_walked() {
        let m = mem();
        let mut c = cpu(STACK + 0x200);
        c.cpl = 3;
        assert_eq!(run(&m, &c), (vec![], StackEnd::NotWalked));
        let mut c = cpu(STACK + 0x200);
        c.rip = 0x40_1000;
        assert_eq!(run(&m, &c).1, StackEnd::NotWalked);
        let mut c = cpu(STACK + 0x200);
        c.efer = 0;
        assert_eq!(run(&m, &c).1, StackEnd::NotWalked);
        let mut c = cpu(STACK + 0x200);
        c.cr0 = 1;
        assert_eq!(run(&m, &c).1, StackEnd::NotWalked);
        let mut c = cpu(STACK + 0x200);
        c.cs_long = false;
        assert_eq!(run(&m, &c).1, StackEnd::NotWalked);
    }

    /// Large pages: a stack mapped by a 2 MiB page, then by a 1 GiB page.
    #[test]
    fn large_pages_translate() {
        let idx = |va: u64, shift: u32| (va >> shift) & 0x1ff;
        let base = 0x4000_0000u64; // 1 GiB-aligned physical base
        for big in [21u32, 30] {
            let mut m = Mem::default();
            m.words.insert(CR3 + idx(STACK, 39) * 8, 0x2000 | 3);
            if big == 30 {
                m.words
                    .insert(0x2000 + idx(STACK, 30) * 8, base | PTE_PS | 3);
            } else {
                m.words.insert(0x2000 + idx(STACK, 30) * 8, 0x3000 | 3);
                m.words
                    .insert(0x3000 + idx(STACK, 21) * 8, base | PTE_PS | 3);
            }
            let pa = |va: u64| base + (va & ((1u64 << big) - 1));
            m.words.insert(pa(STACK + 0x200), 0);
            m.words.insert(pa(STACK + 0x208), KERNEL + 7);
            assert_eq!(
                run(&m, &cpu(STACK + 0x200)),
                (vec![KERNEL + 7], StackEnd::End),
                "page shift {big}"
            );
        }
    }
}
