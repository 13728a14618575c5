//! Cloud Hypervisor v53.0 as released (seccomp on, its default): `--kernel --initramfs
//! --cmdline --cpus boot=N --memory size=…M,thp=… --serial tty --console off`. The 8250 is
//! on its stdio (`--serial tty`); the virtio console, whose default is also the terminal, is
//! off, so only the guest's serial lines reach stdout. Its log goes to stderr (the default),
//! never onto the serial stream. It reboots the guest on the i8042 reset instead of
//! exiting, so the bench kills it right after the record ([`crate::Ending::KillAfterRecord`]).
//! Guest RAM above 3 GiB is split around the 32-bit hole into two mappings.

use crate::{utf8, EngineError, Guest, Launch};
use std::path::Path;
use truecold_proto::kinds::{Backing, Engine};

/// `--memory`'s value. Cloud Hypervisor advises THP on its RAM by default (`thp=on`), so
/// `--backing anon` says `thp=off`.
pub fn memory(g: &Guest) -> String {
    let extra = match g.backing {
        Backing::Anon => "thp=off",
        Backing::Thp => "thp=on",
        Backing::Hugetlb => "hugepages=on,hugepage_size=2M",
    };
    format!("size={}M,{extra}", g.mem.mib())
}

/// The argv after the program.
pub fn args(g: &Guest) -> Result<Vec<String>, EngineError> {
    let e = Engine::CloudHypervisor;
    Ok(vec![
        "--kernel".into(),
        utf8(e, "the kernel path", &g.kernel)?,
        "--initramfs".into(),
        utf8(e, "the initramfs path", &g.initramfs)?,
        "--cmdline".into(),
        g.cmdline(e)?,
        "--cpus".into(),
        format!("boot={}", g.vcpus),
        "--memory".into(),
        memory(g),
        "--serial".into(),
        "tty".into(),
        "--console".into(),
        "off".into(),
    ])
}

/// The parity devices of one launch (`crate::parity`): the hybrid vsock at `uds` (guest CID
/// 3), virtio-net on the launch's tap (Cloud Hypervisor creates it, addresses the host side
/// and brings it up; it is gone with the process) with the pair's guest MAC, and the
/// workspace clone `image` as a raw disk.
pub fn parity_args(uds: &str, p: &crate::PerLaunch<'_>, image: &str) -> Vec<String> {
    vec![
        "--vsock".into(),
        format!("cid={},socket={uds}", truecold_proto::parity::GUEST_CID),
        "--net".into(),
        format!(
            "tap={},ip={},mask={},mac={}",
            p.tap,
            p.pair.host(),
            p.pair.netmask(),
            p.pair.guest_mac_text()
        ),
        "--disk".into(),
        format!("path={image},image_type=raw"),
    ]
}

/// The arm's launch.
pub fn launch(program: &Path, g: &Guest) -> Result<Launch, EngineError> {
    Ok(Launch {
        engine: Engine::CloudHypervisor,
        program: program.to_path_buf(),
        args: args(g)?,
        files: Vec::new(),
        report_file: None,
        per_sample_stamps: false,
        agent: None,
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    })
}

/// Whether `line` is Cloud Hypervisor's `--version` line: `cloud-hypervisor v53.0.0`.
pub fn is_version_line(line: &str) -> bool {
    line.strip_prefix("cloud-hypervisor v")
        .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}
