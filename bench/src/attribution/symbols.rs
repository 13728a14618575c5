//! Names for the attribution launches' addresses: the function table of the vmlinux's
//! `.symtab`, each initcall address and each sampled RIP looked up in it, every
//! `reports.jsonl` line wrapped as an [`AttributionLine`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use truecold_proof::attribution::{AttributionLine, RipFunction};
use truecold_proof::reports::ReportLine;

/// The function table of the kernel's ELF image at `path`; a file that cannot be read or
/// holds no function symbols gives an empty table, said on stderr (its RIPs and initcall
/// addresses then stay unnamed: `[no symbol]` rows), never silently.
pub(super) fn function_table(path: &Path) -> FunctionTable {
    match std::fs::read(path) {
        Ok(elf) => {
            let t = FunctionTable::of(&elf);
            if t.by_address.is_empty() {
                crate::note!(
                    "truecold: attribution: warning: {} has no function symbols: the samples' \
                     functions are not named",
                    path.display()
                );
            }
            t
        }
        Err(e) => {
            crate::note!(
                "truecold: attribution: warning: cannot read {} ({e}): the samples' functions \
                 are not named",
                path.display()
            );
            FunctionTable::default()
        }
    }
}

/// Wraps each `reports.jsonl` line with the names of its trace's addresses and the
/// functions its RIP samples fall in.
pub fn lines(reports: &[u8], table: &FunctionTable) -> Vec<u8> {
    let syms = &table.by_address;
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
        let functions = report
            .core()
            .and_then(|c| c.rip_samples)
            .map(|r| table.functions_of(sampled_addresses(&r).into_iter()))
            .unwrap_or_default();
        let line = AttributionLine {
            report,
            symbols,
            functions,
        };
        if let Ok(s) = serde_json::to_string(&line) {
            out.extend_from_slice(s.as_bytes());
            out.push(b'\n');
        }
    }
    out
}

/// The addresses whose functions a launch's RIP samples name: each sample's RIP and, with
/// call stacks, each frame's call site ([`truecold_proto::rip::call_site`]). Samples or
/// stacks that do not decode name nothing (the proof refuses them).
fn sampled_addresses(r: &truecold_proto::rip::RipSamples) -> BTreeSet<u64> {
    let mut out: BTreeSet<u64> = r
        .decode()
        .map(|d| d.iter().flatten().map(|s| s.rip).collect())
        .unwrap_or_default();
    if let Ok(stacks) = r.stacks() {
        for v in stacks.iter().flatten() {
            for st in &v.table {
                out.extend(st.frames.iter().map(|f| truecold_proto::rip::call_site(*f)));
            }
        }
    }
    out
}

/// A vmlinux's functions: by start address (the first name there), with the end of each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionTable {
    /// Start → name ([`function_symbols`]).
    pub by_address: BTreeMap<u64, String>,
    /// Start → end (exclusive): `start + st_size`, or the next function's start for a
    /// symbol of size 0 (assembly without a size); the last one of size 0 ends at its start.
    ends: BTreeMap<u64, u64>,
}

impl FunctionTable {
    /// The table of `elf`'s `.symtab` (see [`function_symbols`]).
    pub fn of(elf: &[u8]) -> Self {
        let mut by_address = BTreeMap::new();
        let mut sizes: BTreeMap<u64, u64> = BTreeMap::new();
        symtab_functions(elf, |value, size, name| {
            by_address.entry(value).or_insert_with(|| name.to_string());
            let s = sizes.entry(value).or_insert(size);
            *s = (*s).max(size);
        });
        let starts: Vec<u64> = sizes.keys().copied().collect();
        let ends = sizes
            .iter()
            .enumerate()
            .map(|(i, (&start, &size))| {
                let end = if size > 0 {
                    start.saturating_add(size)
                } else {
                    starts.get(i + 1).copied().unwrap_or(start)
                };
                (start, end)
            })
            .collect();
        FunctionTable { by_address, ends }
    }

    /// The function holding `rip`: the last start at or below it whose end is above it.
    pub fn function_of(&self, rip: u64) -> Option<RipFunction> {
        let (&start, &end) = self.ends.range(..=rip).next_back()?;
        (rip < end).then(|| RipFunction {
            start,
            end,
            name: self.by_address.get(&start).cloned().unwrap_or_default(),
        })
    }

    /// The functions holding any of `rips`, by start, each once.
    pub fn functions_of(&self, rips: impl Iterator<Item = u64>) -> Vec<RipFunction> {
        let mut out: BTreeMap<u64, RipFunction> = BTreeMap::new();
        for rip in rips {
            if let Some(f) = self.function_of(rip) {
                out.entry(f.start).or_insert(f);
            }
        }
        out.into_values().collect()
    }
}

/// Function symbols (`STT_FUNC`, named) of a little-endian ELF64 file's `.symtab`: address →
/// name (the first name at an address). Anything malformed ends the reading with what was
/// read so far (the vmlinux is the host's own artifact; this only names addresses).
pub fn function_symbols(elf: &[u8]) -> BTreeMap<u64, String> {
    FunctionTable::of(elf).by_address
}

/// Calls `f(value, size, name)` for each named `STT_FUNC` symbol of `elf`'s `.symtab`, in
/// table order (see [`function_symbols`]).
fn symtab_functions(elf: &[u8], mut f: impl FnMut(u64, u64, &str)) {
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
                let shndx = u16_at(e, 6)?;
                let value = u64_at(e, 8)?;
                let size = u64_at(e, 16)?;
                e += 24;
                // Not a function, unnamed, or undefined here (SHN_UNDEF: another object's).
                if info & 0xf != 2 || name == 0 || shndx == 0 {
                    continue;
                }
                let rest = strtab.get(name..)?;
                let stop = rest.iter().position(|b| *b == 0)?;
                if let Ok(n) = std::str::from_utf8(&rest[..stop]) {
                    if truecold_proto::trace::valid_name(n) {
                        f(value, size, n);
                    }
                }
            }
        }
        Some(())
    };
    let _ = run();
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
    fn rips_map_to_the_function_that_holds_them() {
        // This test binary's own symbols: a function's start and its last byte map to it,
        // its end does not (unless another function starts there).
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let t = FunctionTable::of(&me);
        let (&start, &end) = t
            .ends
            .iter()
            .find(|(s, e)| **e > **s + 1 && t.by_address.get(s).is_some_and(|n| n == "main"))
            .expect("main has a size");
        let f = t.function_of(start).unwrap();
        assert_eq!((f.start, f.end, f.name.as_str()), (start, end, "main"));
        assert_eq!(t.function_of(end - 1).unwrap().name, "main");
        assert_ne!(t.function_of(end).map(|f| f.start), Some(start));
        assert_eq!(t.function_of(0), None);
        let fs = t.functions_of([start, end - 1, start + 1].into_iter());
        assert_eq!(fs.len(), 1);
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
