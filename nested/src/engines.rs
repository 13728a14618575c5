//! Engines side by side inside L1, for the platform check and whole-process timings: the same
//! vmlinux, initramfs and kernel command line under truecold-vmm and under Firecracker, the
//! runs interleaved in a seeded shuffled order per round. Pure: the argv of each engine, the
//! CSV row; `truecold-engines` (the L1-side binary) does the I/O. Firecracker's config and
//! argv and the round order are `truecold_engine`'s (the builders of `truecold run --engine`);
//! this check differs only in its kernel command line (console or nothing, not the serial
//! transport) and in timing whole processes instead of observing strict-ready.
//!
//! Time here is whatever clock the caller's CLOCK_MONOTONIC is — inside the nested harness,
//! QEMU's instruction-counting virtual clock (1 ns per emulated instruction), never hardware
//! wall time.

use std::path::Path;
pub use truecold_engine::order;
pub use truecold_proto::kinds::Engine;
use truecold_proto::limits::GuestMem;
use truecold_proto::GuestPlatform;

/// The engines this check runs.
pub const ENGINES: [Engine; 2] = [Engine::Truecold, Engine::Firecracker];

/// Parses an engine this check runs.
pub fn parse_engine(s: &str) -> Option<Engine> {
    ENGINES.into_iter().find(|e| e.as_str() == s)
}

/// One guest, identical for every engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guest {
    pub kernel: String,
    pub initramfs: String,
    pub vcpus: u8,
    pub mem: GuestMem,
    /// Console on ttyS0 (kernel log and the guest's record on the engine's output).
    pub console: bool,
    /// Appended to truecold's tuned base command line.
    pub cmdline_extra: String,
}

impl Guest {
    /// The complete kernel command line, the one definition both engines get.
    pub fn cmdline(&self) -> Result<String, String> {
        use truecold_proto::boot_cmdline::{cmdline, SerialUse};
        let serial = if self.console {
            SerialUse::Console
        } else {
            SerialUse::Off
        };
        cmdline(serial, self.mem, &self.cmdline_extra).map_err(|e| e.to_string())
    }
}

/// truecold-vmm's argv (after the program). The VMM builds the same command line itself from
/// `--console`, the memory and `--cmdline-extra`.
pub fn truecold_args(g: &Guest, deadline_ms: u64) -> Vec<String> {
    let mut a: Vec<String> = [
        "boot",
        "--kernel",
        &g.kernel,
        "--initramfs",
        &g.initramfs,
        "--vcpus",
        &g.vcpus.to_string(),
        "--mem-mib",
        &g.mem.mib().to_string(),
        "--deadline-ms",
        &deadline_ms.to_string(),
        "--host-kind",
        "nested-emulated",
        // The layout this check was written for, spelt out: not the VMM's default, which
        // follows the guest's memory.
        "--ram-layout",
        "around-hole",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !g.cmdline_extra.is_empty() {
        a.push("--cmdline-extra".into());
        a.push(g.cmdline_extra.clone());
    }
    if g.console {
        a.push("--console".into());
    }
    a
}

/// The engine crate's guest for this one (anonymous 4 KiB memory, like truecold's default).
fn engine_guest(g: &Guest) -> truecold_engine::Guest {
    truecold_engine::Guest {
        kernel: g.kernel.clone().into(),
        initramfs: g.initramfs.clone().into(),
        vcpus: u32::from(g.vcpus),
        mem: g.mem,
        backing: truecold_proto::kinds::Backing::Anon,
        cmdline_extra: g.cmdline_extra.clone(),
        // Firecracker's config only: the layout is truecold-vmm's.
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    }
}

/// Firecracker's `--config-file` content ([`truecold_engine::firecracker::config_for`]) with
/// this check's command line.
pub fn firecracker_config(g: &Guest) -> Result<String, String> {
    truecold_engine::firecracker::config_for(&engine_guest(g), &g.cmdline()?)
        .map_err(|e| e.to_string())
}

/// Firecracker's argv (after the program), as released: seccomp on, no API server, its log
/// in `log` ([`truecold_engine::firecracker::args`]).
pub fn firecracker_args(config: &Path, log: &Path) -> Vec<String> {
    truecold_engine::firecracker::args(&config.to_string_lossy(), &log.to_string_lossy())
}

/// One arm of a run: a label (unique), the engine kind and its binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arm {
    pub label: String,
    pub engine: Engine,
    pub path: String,
}

impl Arm {
    /// `KIND=PATH` (the label is the kind) or `LABEL:KIND=PATH`; a label is `[a-z0-9_-]+`.
    pub fn parse(spec: &str) -> Result<Arm, String> {
        let (head, path) = spec
            .split_once('=')
            .ok_or_else(|| format!("`{spec}`: want [LABEL:]KIND=PATH"))?;
        let (label, kind) = head.split_once(':').unwrap_or((head, head));
        let engine = parse_engine(kind).ok_or_else(|| format!("unknown engine `{kind}`"))?;
        let ok = !label.is_empty()
            && label
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_');
        if !ok || path.is_empty() {
            return Err(format!("`{spec}`: bad label or empty path"));
        }
        Ok(Arm {
            label: label.into(),
            engine,
            path: path.into(),
        })
    }
}

/// One run's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    pub round: u64,
    pub slot: usize,
    /// The arm's label (the engine's name unless labelled).
    pub arm: String,
    pub engine: Engine,
    /// Fork to exit of the engine process, CLOCK_MONOTONIC.
    pub elapsed_ns: u64,
    /// The process's exit status (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// From the guest's `TC1 record` line, when the console was on and one arrived.
    pub platform: Option<GuestPlatform>,
}

/// `engines.csv`'s header.
pub const CSV_HEADER: &str = "round,slot,arm,engine,elapsed_ns,exit_code,packages,\
cores_per_package,threads_per_core,tsc_deadline_timer,constant_tsc,nonstop_tsc,tsc_unstable,\
clocksource";

impl RunRow {
    /// One CSV line (no newline); empty fields where there is nothing.
    pub fn csv(&self) -> String {
        let p = match &self.platform {
            Some(p) => format!(
                "{},{},{},{},{},{},{},{}",
                p.packages,
                p.cores_per_package,
                p.threads_per_core,
                u8::from(p.tsc_deadline_timer),
                u8::from(p.constant_tsc),
                u8::from(p.nonstop_tsc),
                u8::from(p.tsc_unstable),
                p.clocksource.as_ref().map_or("none", |c| c.as_str()),
            ),
            None => ",,,,,,,".into(),
        };
        format!(
            "{},{},{},{},{},{},{}",
            self.round,
            self.slot,
            self.arm,
            self.engine.as_str(),
            self.elapsed_ns,
            self.exit_code.map(|c| c.to_string()).unwrap_or_default(),
            p
        )
    }

    /// Parses [`RunRow::csv`]'s form.
    pub fn parse(line: &str) -> Result<RunRow, String> {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 14 {
            return Err(format!("{} fields, want 14: `{line}`", f.len()));
        }
        let num = |i: usize| {
            f[i].parse::<u64>()
                .map_err(|_| format!("field {i}: `{}`", f[i]))
        };
        let count = |i: usize| u32::try_from(num(i)?).map_err(|_| format!("field {i}: `{}`", f[i]));
        let flag = |i: usize| match f[i] {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(format!("field {i}: `{v}`")),
        };
        let platform = if f[6].is_empty() {
            None
        } else {
            Some(GuestPlatform {
                packages: count(6)?,
                cores_per_package: count(7)?,
                threads_per_core: count(8)?,
                tsc_deadline_timer: flag(9)?,
                constant_tsc: flag(10)?,
                nonstop_tsc: flag(11)?,
                tsc_unstable: flag(12)?,
                clocksource: truecold_proto::Clocksource::parse(f[13]),
            })
        };
        Ok(RunRow {
            round: num(0)?,
            slot: usize::try_from(num(1)?).map_err(|e| e.to_string())?,
            arm: f[2].to_string(),
            engine: parse_engine(f[3]).ok_or_else(|| format!("engine `{}`", f[3]))?,
            elapsed_ns: num(4)?,
            exit_code: if f[5].is_empty() {
                None
            } else {
                Some(f[5].parse().map_err(|_| format!("exit code `{}`", f[5]))?)
            },
            platform,
        })
    }
}

/// The guest's record from an engine's output, if a valid `TC1 record` line is in it.
pub fn record_in(output: &[u8]) -> Option<truecold_proto::GuestRecord> {
    output.split(|b| *b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let start = line.windows(4).position(|w| w == b"TC1 ")?;
        match truecold_proto::Message::decode(&line[start..]) {
            Ok(truecold_proto::Message::Record(r)) => Some(r),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest() -> Guest {
        Guest {
            kernel: "/guest/vmlinux".into(),
            initramfs: "/guest/platform-initramfs.cpio".into(),
            vcpus: 2,
            mem: GuestMem::from_mib(256).unwrap(),
            console: true,
            cmdline_extra: "printk.time=1".into(),
        }
    }

    #[test]
    fn both_engines_get_one_command_line() {
        let g = guest();
        let line = g.cmdline().unwrap();
        assert!(line.starts_with("console=ttyS0 "), "{line}");
        assert!(
            line.contains(" truecold.mem=268435456 printk.time=1"),
            "{line}"
        );
        let cfg: serde_json::Value =
            serde_json::from_str(&firecracker_config(&g).unwrap()).unwrap();
        assert_eq!(cfg["boot-source"]["boot_args"], line.as_str());
        assert_eq!(cfg["machine-config"]["vcpu_count"], 2);
        assert_eq!(cfg["machine-config"]["mem_size_mib"], 256);
        assert_eq!(cfg["machine-config"]["smt"], false);
        let a = truecold_args(&g, 1000).join(" ");
        assert!(a.contains("--vcpus 2 --mem-mib 256"), "{a}");
        assert!(a.contains("--cmdline-extra printk.time=1 --console"), "{a}");
        assert_eq!(
            firecracker_args(Path::new("/tmp/fc.json"), Path::new("/tmp/fc.log")).join(" "),
            "--no-api --config-file /tmp/fc.json --log-path /tmp/fc.log --level Error"
        );
    }

    #[test]
    fn arms_parse() {
        let a = Arm::parse("firecracker=/bin/firecracker").unwrap();
        assert_eq!(
            (a.label.as_str(), a.engine),
            ("firecracker", Engine::Firecracker)
        );
        let a = Arm::parse("before:truecold=/bin/old").unwrap();
        assert_eq!(
            (a.label.as_str(), a.engine, a.path.as_str()),
            ("before", Engine::Truecold, "/bin/old")
        );
        for bad in [
            "qemu=/x",
            "truecold",
            "Bad:truecold=/x",
            ":truecold=/x",
            "truecold=",
        ] {
            assert!(Arm::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rows_round_trip_and_records_are_found() {
        let line = "junk\r\n[    0.5] x\nTC1 record boot_id=none t_init_ns=1 t_ready_ns=0 \
t_reply_ns=0 t_record_ns=2 mem_configured=0 mem_firmware_ram=0 mem_total=0 mem_present=0 mem_managed=0 mem_probe=0 \
cpus=0 packages=1 cores_per_package=2 threads_per_core=1 tsc_deadline_timer=1 \
constant_tsc=0 nonstop_tsc=0 tsc_unstable=0 clocksource=kvm-clock workload=not_run code=ok\r\n";
        let rec = record_in(line.as_bytes()).expect("record");
        assert!(rec.platform.topology_is(1, 2));
        let row = RunRow {
            round: 3,
            slot: 1,
            arm: "fc".into(),
            engine: Engine::Firecracker,
            elapsed_ns: 123,
            exit_code: Some(0),
            platform: Some(rec.platform),
        };
        assert_eq!(RunRow::parse(&row.csv()), Ok(row.clone()));
        assert_eq!(CSV_HEADER.split(',').count(), row.csv().split(',').count());
        let bare = RunRow {
            platform: None,
            exit_code: None,
            ..row
        };
        assert_eq!(RunRow::parse(&bare.csv()), Ok(bare));
        assert!(record_in(b"TC1 record garbage\n").is_none());
    }
}
