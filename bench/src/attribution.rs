//! `--attribution K`: K more launches after the measured campaign, with
//! [`truecold_proto::cmdline::ATTRIBUTION_CMDLINE`] on a Linux guest's command line (a probe
//! guest has no kernel: its launches carry the host stages only). Their lines go to
//! `attribution.jsonl`, never to `samples.csv`; `truecold_proof::attribution` makes
//! `attribution.csv` and `attribution.svg` from them and the measured rows.
//!
//! [`run_for`] is the entry point for any caller with a campaign spec and a VMM command
//! (the tune runner calls it for one arm).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use truecold_proof::attribution::AttributionLine;
use truecold_proof::reports::ReportLine;

use crate::campaign::{self, CampaignSpec, Harness};
use crate::launch::{ProcessLauncher, VmmCommand};
use crate::progress::{Progress, Style};
use crate::schedule::Schedule;

/// The attribution command line added to `extra` (space-separated; `extra` may be empty).
pub fn cmdline_extra(extra: &str) -> String {
    let a = truecold_proto::cmdline::ATTRIBUTION_CMDLINE;
    if extra.trim().is_empty() {
        a.to_string()
    } else {
        format!("{} {a}", extra.trim_end())
    }
}

/// Runs `k` sequential launches of `command` (already carrying the attribution command line,
/// see [`cmdline_extra`]) under `spec`'s contract, deadline and guest, and returns
/// `attribution.jsonl`: one [`AttributionLine`] per launch, in order, with the names of the
/// initcall addresses read from `vmlinux`'s symbol table (when given and readable; an
/// address without a name stays as the guest sent it).
pub fn run_for(
    spec: &CampaignSpec,
    command: &VmmCommand,
    k: u64,
    vmlinux: Option<&Path>,
    stop: &AtomicBool,
) -> Result<Vec<u8>, crate::error::RunError> {
    let mut aspec = spec.clone();
    aspec.schedule = Schedule::Sequential { n: k };
    let launcher = ProcessLauncher {
        command: command.clone(),
        deadline_ns: aspec.deadline_ns,
        kill_grace_ns: aspec.kill_grace_ns,
        from_intended: false,
    };
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), "attribution", k);
    let harness = Harness::plain();
    let ex = campaign::execute(
        &aspec,
        &launcher,
        &crate::vmm_report::observe_attempt,
        stop,
        &mut progress,
        &harness,
    )?;
    let syms = vmlinux
        .and_then(|p| std::fs::read(p).ok())
        .map(|elf| function_symbols(&elf))
        .unwrap_or_default();
    let reports = ex.reports.to_vec()?;
    Ok(lines(&reports, &syms))
}

/// Wraps each `reports.jsonl` line with the names of its trace's addresses.
pub fn lines(reports: &[u8], syms: &BTreeMap<u64, String>) -> Vec<u8> {
    let mut out = Vec::new();
    for l in reports.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(report) = serde_json::from_slice::<ReportLine>(l) else {
            continue;
        };
        let mut symbols = BTreeMap::new();
        if let Some(trace) = report.core().and_then(|c| c.guest_trace) {
            for c in trace.initcalls {
                let addr = c
                    .func
                    .strip_prefix("0x")
                    .and_then(|h| u64::from_str_radix(h, 16).ok());
                if let Some(name) = addr.and_then(|a| syms.get(&a)) {
                    symbols.insert(c.func.clone(), name.clone());
                }
            }
        }
        let line = AttributionLine { report, symbols };
        if let Ok(s) = serde_json::to_string(&line) {
            out.extend_from_slice(s.as_bytes());
            out.push(b'\n');
        }
    }
    out
}

/// Function symbols (`STT_FUNC`, named) of a little-endian ELF64 file's `.symtab`: address →
/// name (the first name at an address). Anything malformed ends the reading with what was
/// read so far (the vmlinux is the host's own artifact; this only names addresses).
pub fn function_symbols(elf: &[u8]) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    // Every read is bounds-checked and every offset sum checked: a malformed file gives
    // `None`, never a panic.
    let at = |base: usize, d: usize, n: usize| -> Option<&[u8]> {
        let o = base.checked_add(d)?;
        elf.get(o..o.checked_add(n)?)
    };
    let u16_at = |b: usize, d: usize| -> Option<u64> {
        Some(u64::from(u16::from_le_bytes(at(b, d, 2)?.try_into().ok()?)))
    };
    let u32_at = |b: usize, d: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(at(b, d, 4)?.try_into().ok()?)))
    };
    let u64_at = |b: usize, d: usize| -> Option<u64> {
        Some(u64::from_le_bytes(at(b, d, 8)?.try_into().ok()?))
    };
    let sz = |v: u64| usize::try_from(v).ok();
    let mut run = || -> Option<()> {
        if elf.get(0..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        let shoff = sz(u64_at(0, 0x28)?)?;
        let shentsize = sz(u16_at(0, 0x3a)?)?;
        let shnum = sz(u16_at(0, 0x3c)?)?;
        let sh = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
        for i in 0..shnum {
            let s = sh(i)?;
            if u32_at(s, 4)? != 2 {
                continue; // not SHT_SYMTAB
            }
            let (off, size) = (sz(u64_at(s, 0x18)?)?, sz(u64_at(s, 0x20)?)?);
            let link = sz(u32_at(s, 0x28)?)?;
            let ls = sh(link)?;
            let (stroff, strsize) = (sz(u64_at(ls, 0x18)?)?, sz(u64_at(ls, 0x20)?)?);
            let strtab = elf.get(stroff..stroff.checked_add(strsize)?)?;
            let end = off.checked_add(size)?;
            let mut e = off;
            while e.checked_add(24)? <= end {
                let name = sz(u32_at(e, 0)?)?;
                let info = *at(e, 4, 1)?.first()?;
                let value = u64_at(e, 8)?;
                e += 24;
                if info & 0xf != 2 || name == 0 {
                    continue;
                }
                let rest = strtab.get(name..)?;
                let stop = rest.iter().position(|b| *b == 0)?;
                if let Ok(n) = std::str::from_utf8(&rest[..stop]) {
                    if truecold_proto::trace::valid_name(n) {
                        out.entry(value).or_insert_with(|| n.to_string());
                    }
                }
            }
        }
        Some(())
    };
    let _ = run();
    out
}

/// The addresses a set of lines asks names for (for tests and diagnostics).
pub fn addresses(reports: &[u8]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in reports.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(t) = serde_json::from_slice::<ReportLine>(l)
            .ok()
            .and_then(|r| r.core())
            .and_then(|c| c.guest_trace)
        {
            out.extend(t.initcalls.into_iter().map(|c| c.func));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_is_added_once_to_the_extra() {
        assert_eq!(
            cmdline_extra(""),
            truecold_proto::cmdline::ATTRIBUTION_CMDLINE
        );
        assert_eq!(
            cmdline_extra("quiet "),
            format!("quiet {}", truecold_proto::cmdline::ATTRIBUTION_CMDLINE)
        );
    }

    #[test]
    fn garbage_elf_gives_no_symbols_and_no_panic() {
        assert!(function_symbols(b"").is_empty());
        assert!(function_symbols(b"\x7fELF\x02\x01\xff\xff").is_empty());
        let mut e = vec![0u8; 64];
        e[..6].copy_from_slice(b"\x7fELF\x02\x01");
        e[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        e[0x3c..0x3e].copy_from_slice(&5u16.to_le_bytes());
        assert!(function_symbols(&e).is_empty());
    }

    #[test]
    fn reads_this_test_binarys_own_function_symbols() {
        // The test binary is an ELF64 with a .symtab (tests are built with symbols).
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let syms = function_symbols(&me);
        assert!(syms.values().any(|n| n == "main"), "{} symbols", syms.len());
    }
}
