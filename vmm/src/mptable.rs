//! The Intel MP table (MP spec 1.4) that tells the guest its processors, the IOAPIC and the
//! interrupt routing, so up to [`MAX_VCPUS`] vCPUs come up through INIT/SIPI. Built as bytes
//! by a pure function.

/// Where the table goes: the last KiB of base memory, which Linux always scans.
pub const MPTABLE_ADDR: u64 = 0x9_fc00;
/// Most vCPUs supported: the one limit of `truecold_proto::limits` (the table for that many
/// fits the last KiB of base memory, checked below).
pub const MAX_VCPUS: u8 = truecold_proto::limits::MAX_VCPUS as u8;
/// Bytes left for the table: [`MPTABLE_ADDR`] up to the end of base memory (0xA0000).
pub const MPTABLE_ROOM: usize = 0xa_0000 - MPTABLE_ADDR as usize;
/// The IOAPIC's MMIO base (KVM's in-kernel IOAPIC).
pub const IOAPIC_ADDR: u32 = 0xfec0_0000;
/// The local APIC's MMIO base.
pub const LAPIC_ADDR: u32 = 0xfee0_0000;
const APIC_VERSION: u8 = 0x14;
const IOAPIC_VERSION: u8 = 0x11;
const ISA_IRQS: u8 = 16;

/// Bytes [`build`] produces for `vcpus` processors: floating pointer, table header, one
/// 20-byte entry per processor, bus, IOAPIC, one 8-byte entry per ISA IRQ and the two
/// local interrupts.
pub const fn table_len(vcpus: u8) -> usize {
    16 + 44 + 20 * vcpus as usize + 8 + 8 + 8 * ISA_IRQS as usize + 2 * 8
}

// The limit is a u8 (APIC ids are 8 bits; the IOAPIC takes id MAX_VCPUS) and its table fits.
const _: () = assert!(truecold_proto::limits::MAX_VCPUS < 255);
const _: () = assert!(table_len(MAX_VCPUS) <= MPTABLE_ROOM);

fn checksum(bytes: &[u8]) -> u8 {
    0u8.wrapping_sub(bytes.iter().fold(0u8, |a, b| a.wrapping_add(*b)))
}

/// The MP floating pointer (16 bytes) followed by the configuration table, for `vcpus`
/// processors with APIC ids `0..vcpus` (0 is the BSP) and the IOAPIC at id `vcpus`.
/// `base` is the guest-physical address the bytes will be written at.
pub fn build(vcpus: u8, base: u64) -> Vec<u8> {
    let ioapic_id = vcpus;
    let mut entries: Vec<u8> = Vec::new();
    let mut count: u16 = 0;
    for id in 0..vcpus {
        entries.extend_from_slice(&[0, id, APIC_VERSION, if id == 0 { 3 } else { 1 }]);
        entries.extend_from_slice(&0x600u32.to_le_bytes()); // family 6 signature
        entries.extend_from_slice(&0x201u32.to_le_bytes()); // FPU | APIC
        entries.extend_from_slice(&[0; 8]);
        count += 1;
    }
    entries.extend_from_slice(&[1, 0]);
    entries.extend_from_slice(b"ISA   ");
    count += 1;
    entries.extend_from_slice(&[2, ioapic_id, IOAPIC_VERSION, 1]);
    entries.extend_from_slice(&IOAPIC_ADDR.to_le_bytes());
    count += 1;
    for irq in 0..ISA_IRQS {
        // I/O interrupt: INT, conforming polarity/trigger, ISA bus irq → IOAPIC pin irq.
        entries.extend_from_slice(&[3, 0, 0, 0, 0, irq, ioapic_id, irq]);
        count += 1;
    }
    // Local interrupts: LINT0 = ExtINT (the PIC), LINT1 = NMI, on every local APIC.
    entries.extend_from_slice(&[4, 3, 0, 0, 0, 0, 0xff, 0]);
    entries.extend_from_slice(&[4, 1, 0, 0, 0, 0, 0xff, 1]);
    count += 2;

    let table_addr = (base + 16) as u32;
    let mut table = Vec::with_capacity(44 + entries.len());
    table.extend_from_slice(b"PCMP");
    table.extend_from_slice(&((44 + entries.len()) as u16).to_le_bytes());
    table.push(4); // spec revision 1.4
    table.push(0); // checksum, below
    table.extend_from_slice(b"TRUECOLD");
    table.extend_from_slice(b"VMM         ");
    table.extend_from_slice(&0u32.to_le_bytes()); // OEM table pointer
    table.extend_from_slice(&0u16.to_le_bytes()); // OEM table size
    table.extend_from_slice(&count.to_le_bytes());
    table.extend_from_slice(&LAPIC_ADDR.to_le_bytes());
    table.extend_from_slice(&0u16.to_le_bytes()); // extended table length
    table.extend_from_slice(&[0, 0]); // extended checksum, reserved
    table.extend_from_slice(&entries);
    table[7] = checksum(&table);

    let mut fp = Vec::with_capacity(16);
    fp.extend_from_slice(b"_MP_");
    fp.extend_from_slice(&table_addr.to_le_bytes());
    fp.extend_from_slice(&[1, 4, 0, 0, 0, 0, 0, 0]); // length 1×16, rev 1.4, checksum, features
    fp[10] = checksum(&fp);
    fp.extend_from_slice(&table);
    fp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(b: &[u8]) -> u8 {
        b.iter().fold(0u8, |a, x| a.wrapping_add(*x))
    }

    #[test]
    fn checksums_and_counts() {
        for n in 1..=MAX_VCPUS {
            let t = build(n, MPTABLE_ADDR);
            assert_eq!(&t[0..4], b"_MP_");
            assert_eq!(sum(&t[0..16]), 0);
            let ptr = u32::from_le_bytes(t[4..8].try_into().unwrap()) as u64;
            assert_eq!(ptr, MPTABLE_ADDR + 16);
            let table = &t[16..];
            assert_eq!(&table[0..4], b"PCMP");
            let len = u16::from_le_bytes([table[4], table[5]]) as usize;
            assert_eq!(len, table.len());
            assert_eq!(sum(table), 0);
            let count = u16::from_le_bytes([table[34], table[35]]) as usize;
            // walk the entries: processors are 20 bytes, the rest 8
            let mut off = 44;
            let mut cpus = 0;
            let mut bsp = 0;
            for _ in 0..count {
                if table[off] == 0 {
                    cpus += 1;
                    if table[off + 3] & 2 != 0 {
                        bsp += 1;
                        assert_eq!(table[off + 1], 0);
                    }
                    off += 20;
                } else {
                    off += 8;
                }
            }
            assert_eq!(off, len);
            assert_eq!((cpus, bsp), (n, 1));
            assert_eq!(t.len(), table_len(n));
            assert!(t.len() <= MPTABLE_ROOM, "fits the last KiB of base memory");
        }
    }

    #[test]
    fn thirty_two_processors() {
        assert_eq!(MAX_VCPUS, 32);
        let t = build(32, MPTABLE_ADDR);
        assert_eq!(t.len(), table_len(32));
        assert!(t.len() <= MPTABLE_ROOM);
        let table = &t[16..];
        assert_eq!(sum(table), 0);
        assert_eq!(sum(&t[..16]), 0);
        let count = u16::from_le_bytes([table[34], table[35]]) as usize;
        assert_eq!(count, 32 + 1 + 1 + 16 + 2);
        // Processor entries: APIC ids 0..32 in order, enabled, only id 0 the BSP.
        for id in 0..32usize {
            let e = &table[44 + 20 * id..44 + 20 * (id + 1)];
            assert_eq!(e[0], 0, "processor entry");
            assert_eq!(usize::from(e[1]), id, "APIC id");
            assert_eq!(e[3] & 1, 1, "enabled");
            assert_eq!(e[3] & 2 != 0, id == 0, "BSP flag");
        }
        // The IOAPIC takes the next id, and every ISA IRQ is routed to it.
        let after = 44 + 20 * 32 + 8;
        assert_eq!(&table[after..after + 2], &[2, 32]);
        let irqs = &table[after + 8..after + 8 + 16 * 8];
        for (irq, e) in irqs.chunks(8).enumerate() {
            assert_eq!((e[0], e[5], e[6], e[7]), (3, irq as u8, 32, irq as u8));
        }
    }
}
