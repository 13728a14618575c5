//! Firecracker v1.16.1 as released: `--no-api --config-file F --log-path L --level Error`,
//! seccomp on (its default). The strict config has no drives, no network: the boot source
//! (vmlinux, initramfs, the one command line) and the machine (vCPUs, memory, no SMT, huge
//! pages for `--backing hugetlb`); a parity launch adds vsock, a network interface and the
//! workspace drive ([`parity_config`]). Its logs go to `L` (created empty before each launch: Firecracker
//! opens the path without creating it, and aborts when it is missing), never onto the serial
//! stream. It ends by itself when the guest resets through the i8042 (`reboot=k`).

use crate::{utf8, EngineError, Guest, Launch};
use std::path::Path;
use truecold_proto::kinds::{Backing, Engine};

/// The config file's name in the arm's work directory (also written into the arm bundle as
/// `engine-config.json`).
pub const CONFIG_FILE: &str = "firecracker-config.json";
/// The log file's name in the arm's work directory.
pub const LOG_FILE: &str = "firecracker.log";

/// `--config-file`'s content, with the one command line of the serial transport.
pub fn config(g: &Guest) -> Result<String, EngineError> {
    config_for(g, &g.cmdline(Engine::Firecracker)?)
}

/// `--config-file`'s content with `boot_args` as the kernel command line (the nested
/// harness's platform check boots with the console instead of the serial transport).
pub fn config_for(g: &Guest, boot_args: &str) -> Result<String, EngineError> {
    let e = Engine::Firecracker;
    let huge_pages = match g.backing {
        Backing::Anon => "None",
        Backing::Hugetlb => "2M",
        Backing::Thp => {
            return Err(EngineError::Unsupported {
                engine: e,
                backing: g.backing,
                why: "Firecracker has no transparent-huge-page option (its machine-config \
                      `huge_pages` is None or 2M hugetlbfs)",
            })
        }
    };
    let v = serde_json::json!({
        "boot-source": {
            "kernel_image_path": utf8(e, "the kernel path", &g.kernel)?,
            "initrd_path": utf8(e, "the initramfs path", &g.initramfs)?,
            "boot_args": boot_args,
        },
        "drives": [],
        "machine-config": {
            "vcpu_count": g.vcpus,
            "mem_size_mib": g.mem.mib(),
            "smt": false,
            "huge_pages": huge_pages,
        },
    });
    let mut s = serde_json::to_string_pretty(&v).map_err(EngineError::Config)?;
    s.push('\n');
    Ok(s)
}

/// `--config-file`'s content for one parity launch (`crate::parity`): the strict config with
/// `boot_args` (the agent command line), the hybrid vsock at `uds`, the launch's tap (made by
/// the bench: Firecracker opens it by name) with the pair's guest MAC, and the workspace
/// clone `image` as a non-root drive.
pub fn parity_config(
    g: &Guest,
    boot_args: &str,
    uds: &str,
    p: &crate::PerLaunch<'_>,
    image: &str,
) -> Result<String, EngineError> {
    let mut v: serde_json::Value =
        serde_json::from_str(&config_for(g, boot_args)?).map_err(EngineError::Config)?;
    v["vsock"] = serde_json::json!({
        "guest_cid": truecold_proto::parity::GUEST_CID,
        "uds_path": uds,
    });
    v["network-interfaces"] = serde_json::json!([{
        "iface_id": "eth0",
        "host_dev_name": p.tap,
        "guest_mac": p.pair.guest_mac_text(),
    }]);
    v["drives"] = serde_json::json!([{
        "drive_id": "workspace",
        "path_on_host": image,
        "is_root_device": false,
        "is_read_only": false,
    }]);
    let mut s = serde_json::to_string_pretty(&v).map_err(EngineError::Config)?;
    s.push('\n');
    Ok(s)
}

/// The argv after the program.
pub fn args(config_path: &str, log_path: &str) -> Vec<String> {
    [
        "--no-api",
        "--config-file",
        config_path,
        "--log-path",
        log_path,
        "--level",
        "Error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The arm's launch.
pub fn launch(program: &Path, g: &Guest, work: &Path) -> Result<Launch, EngineError> {
    let e = Engine::Firecracker;
    let cfg = work.join(CONFIG_FILE);
    let log = work.join(LOG_FILE);
    let content = config(g)?;
    Ok(Launch {
        engine: e,
        program: program.to_path_buf(),
        args: args(
            &utf8(e, "the config path", &cfg)?,
            &utf8(e, "the log path", &log)?,
        ),
        files: vec![(cfg, content.into_bytes()), (log, Vec::new())],
        report_file: None,
        per_sample_stamps: false,
        agent: None,
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    })
}

/// Whether `line` is Firecracker's `--version` line: `Firecracker v1.16.1`.
pub fn is_version_line(line: &str) -> bool {
    line.strip_prefix("Firecracker v")
        .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}
