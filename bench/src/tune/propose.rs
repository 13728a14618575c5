//! Profile-guided tuning: knobs proposed from an attribution of the boot
//! (`truecold tune --propose-from BUNDLE`), each with its source
//! ([`truecold_proof::tune::Proposal`]).
//!
//! The attribution's shown launch (the one `attribution.csv` shows) gives rows with a cost:
//! with the `initcall` instrument each initcall's own duration, with `rip` each function's
//! self time (on the one clock when the VMM counted its requested samples, else samples ×
//! period). A row that cost at least [`MIN_SHARE_PPM`] of the launch's request → strict-ready
//! is looked at, costliest first, and yields:
//!
//! 1. the catalogue knobs that address it ([`LEADS`]: the crypto self-tests, the RNG's
//!    seeding, the legacy PTYs, the delay-loop calibration, TSC checks, RCU waits, the boot
//!    hash tables, struct-page init and the memory's backing, `mark_rodata_ro`, printk);
//! 2. otherwise, for an initcall not on [`NEVER_BLACKLIST`] (what strict-ready's boot uses),
//!    `initcall-blacklist-<fn>` when the kernel has `CONFIG_KALLSYMS` (without it the kernel
//!    ignores `initcall_blacklist=`);
//! 3. and, with a kernel source tree, `kconfig-off-<SYMBOL>` for the symbol whose Makefile
//!    line builds the function's file ([`super::kconfig_map`]) when the kernel builds it in and
//!    strict-ready does not need it ([`never_off`]); the file's timed waits (`msleep`,
//!    `mdelay`, … with their arguments) are named in the reason.
//!
//! What is not proposed, and why, is a note. Nothing here is assumed safe: the tune screens
//! every proposal under the contract, and one that breaks strict-ready is reported so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use truecold_proof::attribution::{
    attribute, parse_lines, AttributionLine, Instrument, Lane, JSONL_FILE, JSONL_MAX_BYTES,
};
use truecold_proof::tune::{Evidence, Proposal, ProposalSource};
use truecold_proto::tune::{Knob, ProposedKind};

use super::kconfig_map::{built_in, find_files, kconfig_symbol, timed_waits, KconfigMapError};
use crate::artifacts::own_kernel::REQUIREMENTS;

/// A row is looked at when it cost at least this share of the shown launch's request →
/// strict-ready (ppm: 0.5 %).
pub const MIN_SHARE_PPM: u64 = 5_000;

/// The most proposals one attribution yields (the costliest rows first).
pub const MAX_PROPOSALS: usize = 16;

/// The catalogue knobs that address a function's or an initcall's cost, and why.
pub const LEADS: &[(&[&str], &[Knob], &str)] = &[
    (
        &["blake2s_mod_init", "blake2s_compress", "blake2s_compress_generic"],
        &[Knob::NoCryptoSelftests],
        "the crypto library's BLAKE2s self-test runs at boot unless CRYPTO_MANAGER_DISABLE_TESTS",
    ),
    (
        &["chacha_permute", "chacha_block_generic", "crng_reseed", "get_random_bytes", "_get_random_bytes", "rand_initialize"],
        &[Knob::RandomTrustCpu],
        "the RNG's ChaCha work at boot; random.trust_cpu=on credits RDRAND when seeding it",
    ),
    (
        &["pty_init"],
        &[Knob::NoLegacyPtys],
        "pty_init registers the BSD legacy PTYs (256 pairs by default)",
    ),
    (
        &["calibrate_delay", "calibrate_delay_converge", "delay_loop"],
        &[Knob::Lpj],
        "the delay-loop calibration, a timed wait that lpj= skips",
    ),
    (
        &["check_tsc_sync_source", "check_tsc_sync_target", "check_tsc_warp", "tsc_refine_calibration_work", "clocksource_watchdog"],
        &[Knob::TscReliable],
        "TSC synchronisation and watchdog checks, which tsc=reliable skips",
    ),
    (
        &["synchronize_rcu", "synchronize_rcu_normal", "rcu_barrier", "wait_rcu_gp", "__wait_rcu_gp"],
        &[Knob::RcuExpedited],
        "waits for RCU grace periods, which rcupdate.rcu_expedited=1 shortens",
    ),
    (
        &["alloc_large_system_hash", "dcache_init", "inode_init", "vfs_caches_init"],
        &[Knob::DhashEntries, Knob::IhashEntries],
        "memory-proportional: the dentry and inode hash tables, sized by the guest's memory and zeroed at boot",
    ),
    (
        &["inet_init", "tcp_init", "udp_table_init", "inet_hashinfo2_init"],
        &[Knob::ThashEntries, Knob::UhashEntries],
        "memory-proportional: the TCP and UDP hash tables inet_init allocates, sized by the guest's memory",
    ),
    (
        &["deferred_init_memmap", "deferred_init_maxorder", "deferred_init_pages", "deferred_free_pages", "padata_mt_helper"],
        &[Knob::NoDeferredStructPageInit, Knob::RamLayoutAbove4g],
        "memory-proportional: struct pages initialised by deferred init (in parallel, or on the boot CPU for the low zones)",
    ),
    (
        &["memmap_init_range", "__init_single_page", "memmap_init_zone_range", "init_unavailable_range"],
        &[Knob::RamLayoutHoleInside, Knob::RamLayoutAbove4g],
        "memory-proportional: struct pages initialised on the boot CPU before SMP (the low zones, and a partly used section)",
    ),
    (
        &["__free_pages_core", "__free_pages_ok", "free_reserved_area", "memblock_free_all", "clear_page_orig", "clear_page_rep", "clear_page_erms"],
        &[Knob::BackingHugetlb, Knob::BackingThp],
        "memory-proportional: pages freed or zeroed at boot touch guest memory, whose host faults the backing prices",
    ),
    (
        &["mark_rodata_ro", "set_memory_ro", "__change_page_attr_set_clr"],
        &[Knob::RodataOff],
        "page-attribute changes at the end of boot (a security trade-off: never a default)",
    ),
    (
        &["vprintk_emit", "console_flush_all", "console_unlock", "serial8250_console_write", "wait_for_xmitr", "io_serial_out", "io_serial_in"],
        &[Knob::NoPrintk],
        "console and printk: the kernel log written at boot, each serial byte a VM exit",
    ),
];

/// Initcalls never proposed for `initcall_blacklist=`: what strict-ready's boot uses (the
/// initramfs, the firmware memory map, /proc and /sys, ELF, futexes, the network and
/// loopback, the tty and 8250, virtio and vsock, the clock and the RNG), exactly or by
/// prefix (a name ending in `*`).
pub const NEVER_BLACKLIST: &[&str] = &[
    "populate_rootfs",
    "default_rootfs",
    "firmware_memmap_init",
    "proc_*",
    "ksysfs_init",
    "param_sysfs_init",
    "init_elf_binfmt",
    "init_script_binfmt",
    "futex_init",
    "inet_init",
    "af_unix_init",
    "sock_init",
    "net_dev_init",
    "net_ns_init",
    "proto_init",
    "netlink_proto_init",
    "devinet_init",
    "ipv4_offload_init",
    "chr_dev_init",
    "tty_init",
    "serial8250_init",
    "univ8250_console_init",
    "virtio_*",
    "vsock_*",
    "virtio_vsock_init",
    "clocksource_done_booting",
    "init_clocksource_sysfs",
    "kvm_*",
    "pvh_*",
    "random_*",
    "percpu_counter_startup",
    "cpuhp_sysfs_init",
    "topology_sysfs_init",
    "deferred_probe_initcall",
    "init_pipe_fs",
    "anon_inode_init",
];

/// Symbols never proposed off beyond [`REQUIREMENTS`]: virtio, vsock and the paravirtual
/// guest (what truecold-vmm's devices and clock use), and the kernel's symbol table
/// (`initcall_blacklist=` needs it); a name ending in `*` is a prefix.
pub const NEVER_OFF: &[&str] = &[
    "VIRTIO*",
    "VSOCKETS*",
    "KVM_GUEST",
    "PARAVIRT*",
    "HYPERVISOR_GUEST",
    "SERIAL_8250*",
    "KALLSYMS*",
    "UNIX",
];

fn matches_any(list: &[&str], name: &str) -> bool {
    list.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *p == name,
    })
}

/// Whether strict-ready needs `symbol` (without `CONFIG_`): [`REQUIREMENTS`] (at any vCPU
/// count) or [`NEVER_OFF`].
pub fn never_off(symbol: &str) -> bool {
    REQUIREMENTS
        .iter()
        .any(|r| r.symbol.strip_prefix("CONFIG_") == Some(symbol))
        || matches_any(NEVER_OFF, symbol)
}

/// Why proposals could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error("{path}: no {JSONL_FILE} (an attribution bundle: `truecold run … --attribution K`)")]
    NoAttribution { path: PathBuf },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {JSONL_FILE} is larger than {JSONL_MAX_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}")]
    Attribution {
        path: PathBuf,
        #[source]
        source: truecold_proof::attribution::AttributionError,
    },
    #[error("the kernel source tree for Kconfig symbols")]
    Tree(#[source] KconfigMapError),
}

/// An attribution bundle, as the planner reads it.
#[derive(Clone, Debug)]
pub struct Attributed {
    /// The bundle, as given (recorded in each proposal's source).
    pub path: String,
    pub lines: Vec<AttributionLine>,
    /// The guest kernel's config the bundle records (`config`), when it has one.
    pub kernel_config: Option<String>,
}

impl Attributed {
    /// Reads `dir`'s `attribution.jsonl` (bounded) and its kernel `config`.
    pub fn read(dir: &Path) -> Result<Attributed, ProposeError> {
        let jp = dir.join(JSONL_FILE);
        if !jp.is_file() {
            return Err(ProposeError::NoAttribution {
                path: dir.to_path_buf(),
            });
        }
        let read = |p: &Path| {
            truecold_proof::fsio::read_capped(p, JSONL_MAX_BYTES).map_err(|source| {
                ProposeError::Read {
                    path: p.to_path_buf(),
                    source,
                }
            })
        };
        let bytes = read(&jp)?.ok_or_else(|| ProposeError::TooLarge {
            path: dir.to_path_buf(),
        })?;
        let lines = parse_lines(&bytes).map_err(|source| ProposeError::Attribution {
            path: jp.clone(),
            source,
        })?;
        let cp = dir.join(truecold_proof::names::CONFIG_FILE);
        let kernel_config = match cp.is_file() {
            true => read(&cp)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
            false => None,
        };
        Ok(Attributed {
            path: dir.display().to_string(),
            lines,
            kernel_config,
        })
    }
}

/// One row of the shown launch with a cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cost {
    pub evidence: Evidence,
    pub name: String,
    pub ns: u64,
    /// The timed-wait helpers ([`WAIT_HELPERS`]) whose samples were charged to this function,
    /// their caller (call stacks only).
    pub via: Vec<String>,
}

/// Functions that wait for a time or a device on behalf of their caller: with call stacks,
/// a sample in one is charged to the first caller up its stack that is none of these (the
/// call site that asked for the wait); without, to itself.
pub const WAIT_HELPERS: &[&str] = &[
    "delay_tsc",
    "delay_loop",
    "delay_halt",
    "delay_halt_tpause",
    "delay_halt_mwaitx",
    "__const_udelay",
    "__udelay",
    "__ndelay",
    "__delay",
    "msleep",
    "msleep_interruptible",
    "usleep_range_state",
    "schedule_timeout",
    "schedule_hrtimeout_range",
    "native_io_delay",
    "io_serial_in",
    "io_serial_out",
];

/// Each function's time in a profile `p` on the one clock: its self time, a
/// [`WAIT_HELPERS`] frame's time charged to its first caller that is none of them when the
/// stack has one (that caller's `via` names the helper); idle, unsampled and unnamed frames,
/// the root and the host stages are no function.
pub fn profile_costs(p: &truecold_proof::attribution::Profile) -> Vec<Cost> {
    let stages: BTreeSet<&str> = truecold_proto::measure::Stage::ALL
        .iter()
        .map(|s| s.name())
        .collect();
    let named = |n: &str| {
        !n.starts_with('[') && !stages.contains(n) && n != truecold_proof::attribution::ROOT
    };
    let mut by: std::collections::BTreeMap<String, (u64, BTreeSet<String>)> = Default::default();
    for (stack, ns) in &p.stacks {
        let frames: Vec<&str> = stack.split(';').filter(|f| named(f)).collect();
        let Some(leaf) = frames.last() else { continue };
        let (name, via) = match WAIT_HELPERS.contains(leaf) {
            true => match frames.iter().rev().find(|f| !WAIT_HELPERS.contains(f)) {
                Some(caller) => (*caller, Some(*leaf)),
                None => (*leaf, None),
            },
            false => (*leaf, None),
        };
        let e = by.entry(name.to_string()).or_default();
        e.0 += ns;
        if let Some(v) = via {
            e.1.insert(v.to_string());
        }
    }
    by.into_iter()
        .map(|(name, (ns, via))| Cost {
            evidence: Evidence::Function,
            name,
            ns,
            via: via.into_iter().collect(),
        })
        .collect()
}

/// The shown launch's request → strict-ready and its rows with a cost, costliest first: its
/// initcalls (the top [`truecold_proof::attribution::TOP_INITCALLS`], the kernel's own
/// durations) and its functions' self times (idle, unsampled and unnamed time left out).
pub fn costs(lines: &[AttributionLine]) -> Result<(u64, Vec<Cost>), ProposeError> {
    let a = attribute(lines, &[]).map_err(|source| ProposeError::Attribution {
        path: PathBuf::from(JSONL_FILE),
        source,
    })?;
    let total = a
        .rows
        .iter()
        .find(|r| r.lane == Lane::Summary && r.name == "attribution_total")
        .and_then(|r| r.dur_ns)
        .unwrap_or(0);
    let mut out: Vec<Cost> = a
        .rows
        .iter()
        .filter(|r| r.lane == Lane::Initcall)
        .filter_map(|r| {
            Some(Cost {
                evidence: Evidence::Initcall,
                name: r.name.clone(),
                ns: r.dur_ns?,
                via: Vec::new(),
            })
        })
        .collect();
    match &a.flame {
        // The one clock: each function's time.
        Some((_, p)) => out.extend(profile_costs(p)),
        // An older record: samples × period per vCPU, summed.
        None => {
            let mut funcs: std::collections::BTreeMap<String, u64> = Default::default();
            for r in a.rows.iter().filter(|r| r.lane == Lane::Rip) {
                let Some((vcpu, f)) = r.name.split_once(' ') else {
                    continue;
                };
                if !vcpu.starts_with("vcpu") || f.starts_with('[') || f == "samples" || f == "rate"
                {
                    continue;
                }
                *funcs.entry(f.to_string()).or_insert(0) += r.dur_ns.unwrap_or(0);
            }
            out.extend(funcs.into_iter().map(|(name, ns)| Cost {
                evidence: Evidence::Function,
                name,
                ns,
                via: Vec::new(),
            }));
        }
    }
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    Ok((total, out))
}

/// What the planner proposes, and what it left out and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proposals {
    pub proposals: Vec<Proposal>,
    pub notes: Vec<String>,
    /// The shown launch's request → strict-ready, ns.
    pub total_ns: u64,
}

/// The proposals an attribution `a` yields (module doc); `tree`: a kernel source tree of the
/// attributed kernel's version, for Kconfig symbols and timed waits (`None`: no
/// `kconfig-off-*` proposal, said in a note).
pub fn propose(a: &Attributed, tree: Option<&Path>) -> Result<Proposals, ProposeError> {
    propose_with(a, tree, MIN_SHARE_PPM)
}

/// [`propose`] with rows looked at from `min_share_ppm` of the launch.
pub fn propose_with(
    a: &Attributed,
    tree: Option<&Path>,
    min_share_ppm: u64,
) -> Result<Proposals, ProposeError> {
    let (total, rows) = costs(&a.lines)?;
    let floor = u64::try_from(u128::from(total) * u128::from(min_share_ppm) / 1_000_000)
        .unwrap_or(u64::MAX)
        .max(1);
    let rows: Vec<Cost> = rows.into_iter().filter(|r| r.ns >= floor).collect();
    let mut out = Proposals {
        total_ns: total,
        ..Proposals::default()
    };
    let config = a.kernel_config.as_deref();
    let kallsyms = config.is_some_and(|c| built_in(c, "KALLSYMS"));
    let files = match tree {
        Some(t) => {
            let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
            find_files(t, &names).map_err(ProposeError::Tree)?
        }
        None => {
            out.notes.push(
                "no kernel source tree: no Kconfig symbol proposed (--propose-source DIR)".into(),
            );
            Default::default()
        }
    };
    if rows.iter().any(|r| r.evidence == Evidence::Initcall) && !kallsyms {
        out.notes.push(
            "the kernel has no CONFIG_KALLSYMS (its bundle's config): initcall_blacklist= \
             would be ignored, so no initcall-blacklist-* is proposed"
                .into(),
        );
    }
    let instrument = |e: Evidence| match e {
        Evidence::Initcall => Instrument::Initcall,
        Evidence::Function => Instrument::Rip,
    };
    let push = |out: &mut Proposals, knob: Knob, row: &Cost, why: String| {
        if out.proposals.len() >= MAX_PROPOSALS || out.proposals.iter().any(|p| p.knob == knob) {
            return;
        }
        out.proposals.push(Proposal {
            knob,
            source: ProposalSource {
                attribution: a.path.clone(),
                instrument: instrument(row.evidence),
                evidence: row.evidence,
                name: row.name.clone(),
                ns: row.ns,
                why,
            },
        });
    };
    for row in &rows {
        let name = row.name.as_str();
        let via = match row.via.is_empty() {
            true => String::new(),
            false => format!("; its time is in {} (waits it called)", row.via.join(", ")),
        };
        if let Some((_, knobs, why)) = LEADS.iter().find(|(names, _, _)| names.contains(&name)) {
            for k in knobs.iter() {
                push(&mut out, *k, row, format!("{why}{via}"));
            }
            continue;
        }
        let file = files.get(name);
        let waits = match (tree, file) {
            (Some(t), Some(f)) => std::fs::read(t.join(f))
                .map(|b| timed_waits(&String::from_utf8_lossy(&b)))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let waits_text = match waits.is_empty() {
            true => via.clone(),
            false => {
                format!(
                    "; timed waits in {}: {}",
                    file.map(|f| f.display().to_string()).unwrap_or_default(),
                    waits
                        .iter()
                        .take(4)
                        .map(|(l, c)| format!("{c} at line {l}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ) + &via
            }
        };
        if row.evidence == Evidence::Initcall {
            if matches_any(NEVER_BLACKLIST, name) {
                out.notes.push(format!(
                    "initcall {name} ({} ms): strict-ready's boot uses it, not proposed",
                    truecold_proof::fmt::ms(row.ns)
                ));
            } else if kallsyms {
                if let Some(k) = Knob::proposed(ProposedKind::InitcallBlacklist, name) {
                    push(
                        &mut out,
                        k,
                        row,
                        format!("the initcall's work, skipped{waits_text}"),
                    );
                }
            }
        }
        let Some(f) = file else {
            if tree.is_some() {
                out.notes
                    .push(format!("{name}: not found in the source tree"));
            }
            continue;
        };
        let Some(t) = tree else { continue };
        match kconfig_symbol(t, f) {
            None => out.notes.push(format!(
                "{name} ({}): built whatever the config, no symbol to turn off",
                f.display()
            )),
            Some(sym) if never_off(&sym) => out.notes.push(format!(
                "{name} ({}): built by CONFIG_{sym}, which strict-ready needs",
                f.display()
            )),
            Some(sym) if !config.is_some_and(|c| built_in(c, &sym)) => out.notes.push(format!(
                "{name} ({}): CONFIG_{sym} is not built in (=y) in the bundle's config",
                f.display()
            )),
            Some(sym) => {
                if let Some(k) = Knob::proposed(ProposedKind::KconfigOff, &sym) {
                    push(
                        &mut out,
                        k,
                        row,
                        format!(
                            "CONFIG_{sym} builds {}, which holds it{waits_text}",
                            f.display()
                        ),
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The proposals as text, one a line, then the notes.
pub fn proposals_text(p: &Proposals) -> String {
    let mut s = format!(
        "proposals ({}; rows of at least {MIN_SHARE_PPM} ppm of the shown launch's {} ms):\n",
        p.proposals.len(),
        truecold_proof::fmt::ms(p.total_ns)
    );
    for q in &p.proposals {
        s.push_str(&format!("  {}\n", q.line()));
    }
    for n in &p.notes {
        s.push_str(&format!("  note: {n}\n"));
    }
    s
}

#[cfg(test)]
mod tests;
