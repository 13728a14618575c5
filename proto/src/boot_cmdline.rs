//! The guest kernel's command line, built once for every engine (pure): truecold-vmm builds
//! it for its own guests, and the bench hands the same string to Firecracker, Cloud
//! Hypervisor and QEMU. Its memory key takes the one memory quantity ([`GuestMem`]), so the
//! size the guest checks is the size the host configured, in bytes, with no conversion here.

use crate::cmdline as keys;
use crate::kinds::{Engine, RamLayout, Transport};
use crate::limits::GuestMem;
use crate::parity::NetPair;

/// Longest command line, bytes, without the final NUL (the boot protocol's 2048 with it).
pub const CMDLINE_MAX: usize = 2047;

/// A command line that cannot be given to a kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CmdlineError {
    #[error("command line of {0} bytes is longer than {CMDLINE_MAX}")]
    TooLong(usize),
    #[error("command line contains a NUL or non-ASCII byte")]
    Invalid,
}

impl CmdlineError {
    /// Stable kebab-case kind (the VMM's JSON error report).
    pub fn kind(&self) -> &'static str {
        "cmdline-invalid"
    }
}

/// What the guest's 8250 (ttyS0) is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SerialUse {
    /// No serial port at all (`8250.nr_uarts=0`): the fastest boot; truecold's ports carry
    /// everything.
    Off,
    /// The kernel console and the guest's messages (diagnostics; each byte is a VM exit).
    Console,
    /// The guest's transport to `engine` (`truecold.transport=serial`): one port, no
    /// console, only the guest's short `TC1` lines cross it.
    Transport(Engine),
}

/// The tuned base command line (see docs/architecture.md and notes/anchors.md): console off
/// unless asked (each 8250 byte is a VM exit), no ACPI/PCI probing, reboot through the
/// keyboard controller (our stop signal), no crypto self-tests, no I/O-port delays, no legacy
/// PTYs (measured: `pty.legacy_count=0` is −9.3 % of a 2-vCPU nested boot's p50,
/// results/20261201T1050Z-tune-nested-linux-2vcpu-1024mib-no-legacy-ptys; kernel-config/README.md).
pub fn base_cmdline(serial: SerialUse) -> &'static str {
    match serial {
        SerialUse::Console => {
            "console=ttyS0 8250.nr_uarts=1 reboot=k panic=-1 acpi=off pci=off i8042.noaux \
             i8042.nomux i8042.nopnp i8042.dumbkbd cryptomgr.notests swiotlb=noforce \
             io_delay=none no_timer_check pty.legacy_count=0"
        }
        SerialUse::Transport(_) => {
            "8250.nr_uarts=1 quiet loglevel=0 reboot=k panic=-1 acpi=off pci=off i8042.noaux \
             i8042.nomux i8042.nopnp i8042.dumbkbd cryptomgr.notests swiotlb=noforce \
             io_delay=none no_timer_check pty.legacy_count=0"
        }
        SerialUse::Off => {
            "8250.nr_uarts=0 quiet loglevel=0 reboot=k panic=-1 acpi=off pci=off i8042.noaux \
             i8042.nomux i8042.nopnp i8042.dumbkbd cryptomgr.notests swiotlb=noforce \
             io_delay=none no_timer_check pty.legacy_count=0"
        }
    }
}

/// The dentry-cache hash at the size Linux 6.12 gives a 1 GiB guest (`alloc_large_system_hash`,
/// one bucket per 8 KiB of low memory rounded up to a power of two): 131,072 buckets, 1 MiB.
pub const DHASH_CAP: &str = "dhash_entries=131072";
/// The inode-cache hash at its 1 GiB size (one bucket per 16 KiB): 65,536 buckets, 512 KiB.
pub const IHASH_CAP: &str = "ihash_entries=65536";
/// The TCP established hash at its 1 GiB size (one bucket per 128 KiB; the bind and listen
/// tables follow it): 8,192 buckets.
pub const THASH_CAP: &str = "thash_entries=8192";
/// The UDP hash at its 1 GiB size (one slot per 2 MiB): 512 slots.
pub const UHASH_CAP: &str = "uhash_entries=512";
/// The four boot hash tables' caps, in the order the base command line has them.
pub const HASH_CAPS: [&str; 4] = [DHASH_CAP, IHASH_CAP, THASH_CAP, UHASH_CAP];
/// The four boot hash tables sized by the kernel from the guest's memory (a zero count leaves
/// the size to `alloc_large_system_hash`): what the `kernel-hash-sizes` tune knob appends, after
/// the caps, to undo them.
pub const HASH_SIZES_BY_MEMORY: &str =
    "dhash_entries=0 ihash_entries=0 thash_entries=0 uhash_entries=0";
/// Guest memory above which the base command line caps the boot hash tables
/// ([`hash_caps`]), MiB: at this size and below the caps equal or exceed the kernel's own sizes.
pub const HASH_CAPS_ABOVE_MIB: u64 = 1024;

/// The boot hash tables' caps for a guest of `mem` (pure): [`HASH_CAPS`] above
/// [`HASH_CAPS_ABOVE_MIB`], none at or below it. The kernel sizes these tables by the guest's
/// memory and zeroes them at boot (16 MiB of dentry and 8 MiB of inode hash for a 16 GiB
/// guest); capped at their 1 GiB sizes they never grow a table, and each was measured faster at
/// 2 vCPU / 16 GiB (results/20261204T2031Z-tune-nested-linux-2vcpu-16384mib-thp-hash-knobs;
/// kernel-config/README.md says how the default was chosen and what it costs a guest that
/// caches millions of dentries). A user's own `dhash_entries=` (`--cmdline-extra`) comes later
/// on the line and wins: the kernel keeps the last.
pub fn hash_caps(mem: GuestMem) -> &'static [&'static str] {
    if mem.mib() > HASH_CAPS_ABOVE_MIB {
        &HASH_CAPS
    } else {
        &[]
    }
}

/// The full command line (pure): the base, the hash caps of a guest above 1 GiB
/// ([`hash_caps`]), `truecold.mem=<bytes>` (and `truecold.transport=serial
/// truecold.engine=<engine>` for the serial transport), then extra. The one definition every
/// engine's guest gets.
pub fn cmdline(serial: SerialUse, mem: GuestMem, extra: &str) -> Result<String, CmdlineError> {
    let mut s = base_cmdline(serial).to_string();
    for w in hash_caps(mem) {
        s.push(' ');
        s.push_str(w);
    }
    s.push_str(&format!(" {}={}", keys::MEM, mem.bytes()));
    if let SerialUse::Transport(engine) = serial {
        s.push_str(&format!(
            " {}={} {}={}",
            keys::TRANSPORT,
            Transport::Serial.as_str(),
            keys::ENGINE,
            engine.as_str()
        ));
    }
    let extra = extra.trim();
    if !extra.is_empty() {
        s.push(' ');
        s.push_str(extra);
    }
    if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(CmdlineError::Invalid);
    }
    if s.len() > CMDLINE_MAX {
        return Err(CmdlineError::TooLong(s.len()));
    }
    Ok(s)
}

/// Whether a word of a guest command line is one that the arms of a side-by-side campaign
/// differ in by design, and which is then the only kind of word they may differ in (the
/// verifier holds every other word to be the same in every arm): the engine the guest runs
/// under (`truecold.engine=`, its firmware-map rule), truecold-vmm's RAM layout
/// (`truecold.ram_layout=`), and, under the parity contract, where an engine puts its
/// virtio devices (its `virtio_mmio.device=` entries, or the PCI bus probed instead:
/// [`agent_cmdline`] drops `pci=off`).
pub fn is_per_engine_word(word: &str, parity: bool) -> bool {
    let key = |k: &str| {
        word.strip_prefix(k)
            .is_some_and(|rest| rest.starts_with('='))
    };
    key(keys::ENGINE)
        || key(keys::RAM_LAYOUT)
        || (parity && (key(VIRTIO_MMIO_DEVICE) || word == PCI_OFF))
}

/// A guest command line's words that every arm of a side-by-side campaign shares: all but
/// the per-engine ones ([`is_per_engine_word`]), in order.
pub fn shared_words(cmdline: &str, parity: bool) -> Vec<&str> {
    cmdline
        .split_whitespace()
        .filter(|w| !is_per_engine_word(w, parity))
        .collect()
}

/// The kernel's key of a virtio-MMIO device's placement.
pub const VIRTIO_MMIO_DEVICE: &str = "virtio_mmio.device";
/// The base line's word that keeps the kernel off the PCI bus.
pub const PCI_OFF: &str = "pci=off";

/// truecold-vmm's word for its RAM layout (pure): `truecold.ram_layout=<layout>` for every
/// layout but [`RamLayout::ABSENT`], so that the guest's exact-RAM rule uses the layout's
/// hole; nothing for that one, which is what the guest reads when the word is absent.
pub fn ram_layout_key(layout: RamLayout) -> Option<String> {
    ram_layout_word(layout).map(str::to_string)
}

/// [`ram_layout_key`]'s word as a constant (what a tune knob's command-line delta names).
pub fn ram_layout_word(layout: RamLayout) -> Option<&'static str> {
    match layout {
        RamLayout::AroundHole => None,
        RamLayout::HoleInside => Some("truecold.ram_layout=hole-inside"),
        RamLayout::Above4g => Some("truecold.ram_layout=above-4g"),
    }
}

/// The parity contract's guest keys (pure), in this order: `truecold.net=eth0,<guest>/30`
/// with a network pair, `truecold.workspace=1` with a workspace, `truecold.transport=vsock`
/// under that transport. Every engine's parity guest gets them (truecold-vmm's
/// [`vmm_cmdline`], [`agent_cmdline`]).
pub fn parity_keys(net: Option<NetPair>, workspace: bool, transport: Transport) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(p) = net {
        v.push(format!("{}={}", keys::NET, p.guest_net_value()));
    }
    if workspace {
        v.push(format!("{}=1", keys::WORKSPACE));
    }
    if transport == Transport::Vsock {
        v.push(format!("{}={}", keys::TRANSPORT, Transport::Vsock.as_str()));
    }
    v
}

/// Base of truecold-vmm's first virtio-MMIO window (the parity contract's devices).
pub const VIRTIO_MMIO_BASE: u64 = 0xd000_0000;
/// Size of one virtio-MMIO window.
pub const VIRTIO_MMIO_SIZE: u64 = 0x1000;
/// The IRQs of truecold-vmm's virtio devices 0, 1, 2 (ISA IRQs routed identity to IOAPIC
/// pins by the MP table).
pub const VIRTIO_DEVICE_IRQS: [u32; 3] = [5, 6, 7];

/// Device `i`'s virtio-MMIO window base.
pub const fn virtio_window_base(i: usize) -> u64 {
    VIRTIO_MMIO_BASE + (i as u64) * VIRTIO_MMIO_SIZE
}

/// The guest command line entry for truecold-vmm's virtio device `i`:
/// `virtio_mmio.device=4K@0x<base>:<irq>` (pure; the format of Linux's
/// `drivers/virtio/virtio_mmio.c`).
pub fn virtio_mmio_entry(i: usize) -> String {
    format!(
        "{VIRTIO_MMIO_DEVICE}=4K@{:#x}:{}",
        virtio_window_base(i),
        VIRTIO_DEVICE_IRQS[i % VIRTIO_DEVICE_IRQS.len()]
    )
}

/// What truecold-vmm attaches and tells the guest about, for its command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmmDevices {
    /// How many virtio-MMIO devices it attaches (entries `0..devices`).
    pub devices: usize,
    /// The network pair, when it attaches a network device.
    pub net: Option<NetPair>,
    /// Whether it attaches the workspace disk.
    pub workspace: bool,
}

/// truecold-vmm's guest command line (pure): the one definition the VMM boots and the bench
/// records for its arm. [`cmdline`] with `serial`, then the virtio entries
/// ([`virtio_mmio_entry`]) and the parity keys ([`parity_keys`]), the layout's word
/// ([`ram_layout_key`]), then `extra`.
pub fn vmm_cmdline(
    serial: SerialUse,
    mem: GuestMem,
    devices: VmmDevices,
    transport: Transport,
    layout: RamLayout,
    extra: &str,
) -> Result<String, CmdlineError> {
    let mut v: Vec<String> = (0..devices.devices).map(virtio_mmio_entry).collect();
    v.extend(parity_keys(devices.net, devices.workspace, transport));
    v.extend(ram_layout_key(layout));
    v.push(extra.trim().to_string());
    cmdline(serial, mem, &v.join(" "))
}

/// truecold-vmm's guest command line under the parity contract (pure): no serial port, its
/// three devices (workspace disk, network, vsock), the parity keys under the vsock
/// transport, its RAM layout's word, then `extra` ([`vmm_cmdline`]).
pub fn vmm_agent_cmdline(
    mem: GuestMem,
    pair: NetPair,
    layout: RamLayout,
    extra: &str,
) -> Result<String, CmdlineError> {
    vmm_cmdline(
        SerialUse::Off,
        mem,
        VmmDevices {
            devices: 3,
            net: Some(pair),
            workspace: true,
        },
        Transport::Vsock,
        layout,
        extra,
    )
}

/// A peer engine's guest command line under the parity contract (pure): no serial port
/// ([`SerialUse::Off`]: the agent channel is vsock), the parity keys ([`parity_keys`]: the
/// network pair, the workspace, `truecold.transport=vsock`), `truecold.engine=<engine>` (its
/// E820 rule), then `extra`. Firecracker appends its own `virtio_mmio.device=` entries to
/// it; an engine whose virtio devices are PCI functions only ([`Engine::virtio_pci_only`]:
/// Cloud Hypervisor) gets its PCI bus probed (the base's `pci=off` dropped). truecold-vmm
/// builds its own ([`vmm_agent_cmdline`]).
pub fn agent_cmdline(
    engine: Engine,
    mem: GuestMem,
    pair: NetPair,
    extra: &str,
) -> Result<String, CmdlineError> {
    let mut v = parity_keys(Some(pair), true, Transport::Vsock);
    v.push(format!("{}={}", keys::ENGINE, engine.as_str()));
    v.push(extra.trim().to_string());
    let s = cmdline(SerialUse::Off, mem, &v.join(" "))?;
    Ok(if engine.virtio_pci_only() {
        s.replacen(&format!(" {PCI_OFF}"), "", 1)
    } else {
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_per_engine_words_may_differ_between_arms() {
        let mem = GuestMem::from_mib(16384).unwrap();
        let line = |e: Engine| cmdline(SerialUse::Transport(e), mem, "").unwrap();
        let (tc, fc) = (line(Engine::Truecold), line(Engine::Firecracker));
        let tc = format!("{tc} truecold.ram_layout=above-4g");
        assert_ne!(tc, fc);
        assert_eq!(shared_words(&tc, false), shared_words(&fc, false));
        // Anything else differs: a hash cap dropped from one arm, a word added.
        let dropped = fc.replace(" dhash_entries=131072", "");
        assert_ne!(shared_words(&tc, false), shared_words(&dropped, false));
        assert_ne!(
            shared_words(&tc, false),
            shared_words(&format!("{fc} tsc=reliable"), false)
        );
        // `pci=off` and virtio placements are per engine under the parity contract only.
        assert!(is_per_engine_word("pci=off", true) && !is_per_engine_word("pci=off", false));
        assert!(is_per_engine_word(
            "virtio_mmio.device=4K@0xd0000000:5",
            true
        ));
        assert!(!is_per_engine_word(
            "virtio_mmio.device=4K@0xd0000000:5",
            false
        ));
        assert!(!is_per_engine_word("truecold.enginex=1", false));
        assert!(!is_per_engine_word("truecold.engine", false));
    }

    fn mib(n: u64) -> GuestMem {
        GuestMem::from_mib(n).expect("a size within the limits")
    }

    #[test]
    fn cmdline_rules_and_length_limit() {
        let c = cmdline(SerialUse::Off, mib(128), " foo=1 ").unwrap();
        assert!(c.contains("truecold.mem=134217728"));
        assert!(c.ends_with(" foo=1"));
        assert!(c.contains("8250.nr_uarts=0"));
        assert!(!c.contains("console=ttyS0"));
        assert!(cmdline(SerialUse::Console, mib(4), "")
            .unwrap()
            .contains("console=ttyS0"));
        let t = cmdline(SerialUse::Transport(Engine::Firecracker), mib(4), "x=1").unwrap();
        assert!(
            t.starts_with("8250.nr_uarts=1 quiet ")
                && t.ends_with(
                    " truecold.mem=4194304 truecold.transport=serial truecold.engine=firecracker x=1"
                )
                && !t.contains("console="),
            "{t}"
        );
        let g = crate::cmdline::GuestConfig::from_cmdline(&t).unwrap();
        assert_eq!(g.transport, Transport::Serial);
        assert_eq!(g.engine, Engine::Firecracker);
        let parsed = crate::cmdline::GuestConfig::from_cmdline(&c).unwrap();
        assert_eq!(parsed.mem, 128 << 20);

        // Exactly CMDLINE_MAX bytes (2048 with the NUL) is accepted, one more is not.
        let base = cmdline(SerialUse::Off, mib(4), "").unwrap().len();
        let fill = |n: usize| format!("x={}", "y".repeat(n - 2));
        let at_max = cmdline(SerialUse::Off, mib(4), &fill(CMDLINE_MAX - base - 1)).unwrap();
        assert_eq!(at_max.len(), CMDLINE_MAX);
        assert_eq!(
            cmdline(SerialUse::Off, mib(4), &fill(CMDLINE_MAX - base)),
            Err(CmdlineError::TooLong(CMDLINE_MAX + 1))
        );
        for bad in ["a\u{e9}", "a\0b", "a\tb"] {
            assert_eq!(
                cmdline(SerialUse::Off, mib(4), bad),
                Err(CmdlineError::Invalid),
                "{bad:?}"
            );
        }
        assert_eq!(CmdlineError::Invalid.kind(), "cmdline-invalid");
        assert_eq!(CmdlineError::TooLong(3000).kind(), "cmdline-invalid");
    }

    #[test]
    fn hash_caps_only_above_one_gib() {
        for m in [4, 128, 1023, 1024] {
            assert!(hash_caps(mib(m)).is_empty(), "{m}");
            let c = cmdline(SerialUse::Off, mib(m), "").unwrap();
            assert!(!c.contains("hash_entries"), "{c}");
        }
        for m in [1025, 4096, 16384] {
            assert_eq!(hash_caps(mib(m)), HASH_CAPS, "{m}");
        }
        let c = cmdline(SerialUse::Off, mib(16384), "dhash_entries=4096").unwrap();
        assert!(
            c.starts_with(base_cmdline(SerialUse::Off))
                && c.contains(
                    " pty.legacy_count=0 dhash_entries=131072 ihash_entries=65536 \
                     thash_entries=8192 uhash_entries=512 truecold.mem=17179869184"
                ),
            "{c}"
        );
        // The user's word comes last, so the kernel (which keeps the last) takes it.
        let last = c
            .split_whitespace()
            .rfind(|w| w.starts_with("dhash_entries="));
        assert_eq!(last, Some("dhash_entries=4096"));
        // Every engine's guest gets them: the parity agent's line too.
        let pair = NetPair::for_slot(0).unwrap();
        let fc = agent_cmdline(Engine::Firecracker, mib(16384), pair, "").unwrap();
        assert!(HASH_CAPS.iter().all(|w| fc.contains(w)), "{fc}");
        assert_eq!(
            crate::cmdline::GuestConfig::from_cmdline(&c).unwrap().mem,
            16384 << 20
        );
    }

    #[test]
    fn the_ram_layout_word_only_off_the_default() {
        assert_eq!(ram_layout_key(RamLayout::AroundHole), None);
        let w = ram_layout_key(RamLayout::HoleInside).unwrap();
        assert_eq!(w, "truecold.ram_layout=hole-inside");
        assert_eq!(
            w,
            format!("{}={}", crate::cmdline::RAM_LAYOUT, RamLayout::HoleInside)
        );
        let c = cmdline(SerialUse::Off, mib(1024), &w).unwrap();
        let g = crate::cmdline::GuestConfig::from_cmdline(&c).unwrap();
        assert_eq!(
            (g.engine, g.ram_layout),
            (Engine::Truecold, RamLayout::HoleInside)
        );
    }

    #[test]
    fn a_peer_engines_agent_command_line() {
        let pair = NetPair::for_slot(0).unwrap();
        let fc = agent_cmdline(Engine::Firecracker, mib(1024), pair, " x=1 ").unwrap();
        assert!(fc.starts_with("8250.nr_uarts=0 quiet "), "{fc}");
        assert!(fc.contains(" acpi=off pci=off "), "{fc}");
        assert!(
            fc.ends_with(
                " truecold.mem=1073741824 truecold.net=eth0,10.200.0.2/30 truecold.workspace=1 \
                 truecold.transport=vsock truecold.engine=firecracker x=1"
            ),
            "{fc}"
        );
        let g = crate::cmdline::GuestConfig::from_cmdline(&fc).unwrap();
        assert_eq!(g.transport, Transport::Vsock);
        assert_eq!(g.engine, Engine::Firecracker);
        assert!(g.workspace);
        assert_eq!(g.net.as_deref(), Some("eth0,10.200.0.2/30"));
        // Cloud Hypervisor's virtio is PCI only: its bus is probed, nothing else changes.
        let ch = agent_cmdline(Engine::CloudHypervisor, mib(1024), pair, "").unwrap();
        assert!(!ch.contains("pci=off"), "{ch}");
        assert_eq!(
            ch.replace(" acpi=off ", " acpi=off pci=off "),
            agent_cmdline(Engine::Firecracker, mib(1024), pair, "")
                .unwrap()
                .replace("=firecracker", "=cloud-hypervisor")
        );
        assert!(!ch.ends_with(' '), "{ch:?}");
    }
}
