//! The tune planner on recorded attributions (trimmed to their shown launch:
//! `bench/tests/data/propose/`, from results/20261203T2016Z-…-attribution-initcall and
//! results/20261203T2015Z-…-attribution-rip).

use super::*;
use std::path::PathBuf;

fn fixture(name: &str, config: &str) -> Attributed {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/propose")
        .join(name);
    let bytes = std::fs::read(&p).unwrap();
    Attributed {
        path: format!("recorded/{name}"),
        lines: parse_lines(&bytes).unwrap(),
        kernel_config: Some(config.to_string()),
    }
}

/// The recorded kernel's config, as far as the planner reads it.
const BASE: &str = "# CONFIG_KALLSYMS is not set\nCONFIG_SMP=y\n";
const WITH_KALLSYMS: &str = "CONFIG_KALLSYMS=y\nCONFIG_SMP=y\nCONFIG_SERIO_I8042=y\n";

fn summary(p: &Proposals) -> Vec<(String, Evidence, String, u64)> {
    p.proposals
        .iter()
        .map(|q| {
            (
                q.knob.to_string(),
                q.source.evidence,
                q.source.name.clone(),
                q.source.ns,
            )
        })
        .collect()
}

#[test]
fn a_recorded_initcall_attribution_yields_catalogue_knobs_each_naming_its_initcall() {
    let a = fixture("initcall.jsonl", BASE);
    let p = propose(&a, None).unwrap();
    // The shown launch: attribution.csv's attribution_total of the recorded bundle.
    assert_eq!(p.total_ns, 118_343_629);
    assert_eq!(
        summary(&p),
        [
            (
                "no-crypto-selftests".to_string(),
                Evidence::Initcall,
                "blake2s_mod_init".to_string(),
                5_987_000
            ),
            (
                "thash-entries".to_string(),
                Evidence::Initcall,
                "inet_init".to_string(),
                2_676_000
            ),
            (
                "uhash-entries".to_string(),
                Evidence::Initcall,
                "inet_init".to_string(),
                2_676_000
            ),
        ]
    );
    for q in &p.proposals {
        assert_eq!(q.source.instrument, Instrument::Initcall);
        assert_eq!(q.source.attribution, "recorded/initcall.jsonl");
        assert!(!q.source.why.is_empty());
    }
    assert!(p.proposals[1].source.why.contains("memory-proportional"));
    // Without KALLSYMS no initcall is proposed for the blacklist, and that is said; the
    // initcalls strict-ready's boot uses are never proposed.
    let notes = p.notes.join("\n");
    assert!(notes.contains("no CONFIG_KALLSYMS"), "{notes}");
    assert!(
        notes.contains("initcall percpu_counter_startup (1.162 ms): strict-ready's boot uses it"),
        "{notes}"
    );
    assert!(notes.contains("initcall chr_dev_init"), "{notes}");
    assert!(notes.contains("no kernel source tree"), "{notes}");
    // Every proposal's record passes the verifier's check against the screened knobs.
    let knobs: Vec<Knob> = p.proposals.iter().map(|q| q.knob).collect();
    assert!(truecold_proof::tune::proposal_problems(&p.proposals, &knobs).is_empty());
}

/// A tree laid out as Linux 6.12's for the recorded initcalls (their real files and
/// Makefile lines), and one driver under its own symbol.
fn tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let f = t.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    };
    w("Makefile", "obj-y += kernel/ lib/ drivers/\n");
    w("Kconfig", "mainmenu \"Linux\"\n");
    w("kernel/Makefile", "obj-y     = fork.o exec_domain.o panic.o \\\n\t    extable.o params.o \\\n\t    kthread.o\n");
    w("kernel/params.c", "static int __init param_sysfs_builtin_init(void)\n{\n\treturn 0;\n}\nlate_initcall(param_sysfs_builtin_init);\n");
    w("lib/Makefile", "obj-$(CONFIG_SMP) += percpu_counter.o\n");
    w("lib/percpu_counter.c", "static int __init percpu_counter_startup(void)\n{\n}\nmodule_init(percpu_counter_startup);\n");
    w("drivers/Makefile", "obj-y += input/\n");
    w("drivers/input/Makefile", "obj-y += serio/\n");
    w(
        "drivers/input/serio/Makefile",
        "obj-$(CONFIG_SERIO_I8042)\t+= i8042.o\n",
    );
    w(
        "drivers/input/serio/i8042.c",
        "static int __init i8042_init(void)\n{\n\tmdelay(20);\n\treturn 0;\n}\nmodule_init(i8042_init);\n",
    );
    t
}

#[test]
fn with_kallsyms_and_a_source_tree_initcalls_are_proposed_off_where_safe() {
    let t = tree();
    let a = fixture("initcall.jsonl", WITH_KALLSYMS);
    let p = propose(&a, Some(t.path())).unwrap();
    let s = summary(&p);
    assert_eq!(s.len(), 4, "{s:?}");
    assert_eq!(
        s[3],
        (
            "initcall-blacklist-param_sysfs_builtin_init".to_string(),
            Evidence::Initcall,
            "param_sysfs_builtin_init".to_string(),
            2_394_000
        )
    );
    assert_eq!(
        p.proposals[3].knob.change(),
        truecold_proto::tune::Change::Cmdline("initcall_blacklist=param_sysfs_builtin_init")
    );
    let notes = p.notes.join("\n");
    // Built with kernel/ (obj-y): no symbol; percpu_counter.c is CONFIG_SMP's, which
    // strict-ready needs at 2 vCPUs.
    assert!(
        notes.contains("param_sysfs_builtin_init (kernel/params.c): built whatever the config"),
        "{notes}"
    );
    assert!(!notes.contains("KALLSYMS"), "{notes}");
    assert!(
        !s.iter()
            .any(|q| q.0.contains("SMP") || q.0.contains("percpu")),
        "{s:?}"
    );
    assert!(never_off("SMP") && never_off("PVH") && never_off("VIRTIO_MMIO"));
    assert!(!never_off("SERIO_I8042"));
}

#[test]
fn a_slow_driver_is_proposed_off_by_its_symbol_with_its_timed_waits() {
    let t = tree();
    // The recorded launch with one more initcall: i8042_init, 3 ms.
    let mut a = fixture("initcall.jsonl", WITH_KALLSYMS);
    let core = a.lines[0].report.vmm.as_mut().unwrap();
    let tr = core["guest_trace"]["initcalls"].as_array_mut().unwrap();
    tr.push(serde_json::json!({"fn": "i8042_init", "start_us": 1000, "dur_us": 3000, "ret": 0}));
    let p = propose(&a, Some(t.path())).unwrap();
    let s = summary(&p);
    let at = |k: &str| {
        s.iter()
            .position(|q| q.0 == k)
            .unwrap_or_else(|| panic!("{k}: {s:?}"))
    };
    let bl = at("initcall-blacklist-i8042_init");
    let off = at("kconfig-off-SERIO_I8042");
    assert_eq!(bl + 1, off);
    let q = &p.proposals[off];
    assert_eq!(q.source.name, "i8042_init");
    assert_eq!(q.source.ns, 3_000_000);
    assert!(
        q.source
            .why
            .contains("CONFIG_SERIO_I8042 builds drivers/input/serio/i8042.c"),
        "{}",
        q.source.why
    );
    assert!(
        q.source.why.contains("mdelay(20) at line 3"),
        "{}",
        q.source.why
    );
    assert_eq!(
        q.knob.change(),
        truecold_proto::tune::Change::Kconfig("# CONFIG_SERIO_I8042 is not set\n")
    );
    // Not built in: not proposed, said so.
    let a2 = Attributed {
        kernel_config: Some("CONFIG_KALLSYMS=y\nCONFIG_SERIO_I8042=m\n".into()),
        ..a
    };
    let p2 = propose(&a2, Some(t.path())).unwrap();
    assert!(!p2
        .proposals
        .iter()
        .any(|q| q.knob.to_string().starts_with("kconfig-off")));
    assert!(p2
        .notes
        .join("\n")
        .contains("CONFIG_SERIO_I8042 is not built in"));
}

#[test]
fn a_recorded_rip_profile_is_too_coarse_to_propose_and_its_costs_sum_over_vcpus() {
    let a = fixture("rip.jsonl", BASE);
    let (total, costs) = costs(&a.lines).unwrap();
    assert_eq!(total, 80_892_826);
    // 21 samples a vCPU every 100 µs: samples × period, summed over the vCPUs; idle and
    // unnamed time left out.
    let top: Vec<(&str, u64)> = costs
        .iter()
        .take(4)
        .map(|c| (c.name.as_str(), c.ns))
        .collect();
    assert_eq!(
        top,
        [
            ("pv_native_safe_halt", 300_000),
            ("__free_pages_core", 200_000),
            ("blake2s_compress", 200_000),
            ("free_reserved_area", 200_000)
        ]
    );
    assert!(costs
        .iter()
        .all(|c| c.evidence == Evidence::Function && !c.name.starts_with('[')));
    // No row reaches 0.5 % of the launch (404 µs): nothing proposed.
    assert!(propose(&a, None).unwrap().proposals.is_empty());
    // From 0.2 %: the memory's backing and the crypto self-tests, each from its function.
    let p = propose_with(&a, None, 2_000).unwrap();
    assert_eq!(
        summary(&p),
        [
            (
                "backing-hugetlb".to_string(),
                Evidence::Function,
                "__free_pages_core".to_string(),
                200_000
            ),
            (
                "backing-thp".to_string(),
                Evidence::Function,
                "__free_pages_core".to_string(),
                200_000
            ),
            (
                "no-crypto-selftests".to_string(),
                Evidence::Function,
                "blake2s_compress".to_string(),
                200_000
            ),
        ]
    );
    assert!(p
        .proposals
        .iter()
        .all(|q| q.source.instrument == Instrument::Rip));
}

/// With call stacks, a timed wait's samples are charged to the call site that asked for the
/// wait (the first caller that is not a wait helper), which names the helper.
#[test]
fn a_wait_is_charged_to_its_caller_with_call_stacks() {
    use truecold_proof::attribution::{Profile, ROOT};
    let mut p = Profile::default();
    for (s, ns) in [
        (
            "guest_boot;i8042_init;i8042_flush;__const_udelay;delay_tsc",
            5_000_000,
        ),
        ("guest_boot;i8042_init;i8042_flush", 1_000_000),
        ("guest_boot;[halted]", 10_000_000),
        ("spawn", 2_000_000),
        ("guest_boot;delay_tsc", 300_000),
    ] {
        p.stacks.insert(format!("{ROOT};{s}"), ns);
    }
    let c = profile_costs(&p);
    let got: Vec<(&str, u64, Vec<String>)> = c
        .iter()
        .map(|c| (c.name.as_str(), c.ns, c.via.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("delay_tsc", 300_000, vec![]),
            ("i8042_flush", 6_000_000, vec!["delay_tsc".to_string()]),
        ]
    );
}
