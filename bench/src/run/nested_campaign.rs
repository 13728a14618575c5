//! The nested-harness campaign (`--nested`): the whole campaign runs inside the L1 VM of
//! [`truecold_nested`] — QEMU TCG with an emulated AMD SVM CPU, an L1 Linux with real KVM —
//! where this same bench (static, `/bin/truecold`) launches a fresh static `truecold-vmm` per
//! sample against the real tuned guest kernel. L1's init sets `TRUECOLD_HOST_KIND=
//! nested-emulated`, so the bundle says what it is. The bundle is written and checksummed
//! inside L1, streamed back over L1's data serial port (length- and digest-checked), placed
//! atomically under `--out`, and verified here. Its SHA256SUMS were made in L1, so the transfer
//! cannot alter a byte unnoticed.

use super::outcome::RunOutcome;
use crate::artifacts::guest_files::PARITY_KERNEL_DIR;
use crate::artifacts::guest_files::WORKSPACE_IMAGE;
use crate::engines::engines_error::EnginesError;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::explicit_args;
use crate::plan::explicit_args::{dest_or, engines_dest, explicit_args, guest_flag, ArgPaths};
use std::path::{Path, PathBuf};
use std::time::Duration;
use truecold_nested::{run_l1, write_initramfs, Job, L1File, L1Run, Layout};
use truecold_proof::bundle::Written;
use truecold_proof::schema::ContractKind;
use truecold_proof::verify::verify_dir;
use truecold_proto::kinds::{Backing, Engine};
use truecold_proto::layout::RamLayout;
use truecold_proto::limits::HUGE_PAGE_2M;
use truecold_proto::path_io::PathIoError;

/// Printed with every nested campaign.
pub const WARNING: &str = "nested-emulated: L1 and the guest run under QEMU software \
emulation; times are its virtual clock (1 ns per emulated instruction, never wall time): a \
reproducible cost model of the boot's work, held against hardware in docs/fidelity.md";

/// Where L1's bench writes its bundle (under `truecold_nested::OUT_DIR`).
pub(crate) const L1_BUNDLE: &str = "bundle";

/// Why a nested campaign could not run.
#[derive(Debug, thiserror::Error)]
pub enum NestedError {
    #[error("the nested harness")]
    Harness(#[from] truecold_nested::NestedError),
    #[error(
        "L1's campaign wrote no bundle (its `truecold run` exited {exit}); L1 console: {}",
        console.display()
    )]
    NoBundle { exit: i32, console: PathBuf },
    #[error("{0} already exists; a bundle is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the engines campaign")]
    Engines(#[from] EnginesError),
    #[error("writing the received bundle")]
    Io(#[source] PathIoError),
}

/// The inner `truecold run` arguments: the same campaign, every argument explicit
/// ([`crate::plan::explicit_args::explicit_args`]), as a Linux campaign on L1's KVM with L1's
/// paths.
pub fn inner_args(plan: &CampaignPlan) -> Vec<String> {
    inner_engine_args(plan, &[])
}

/// The inner `truecold run` of an engines campaign (none: a truecold campaign): the same
/// campaign, every argument explicit, each engine at its L1 path.
pub fn inner_engine_args(plan: &CampaignPlan, arms: &[Engine]) -> Vec<String> {
    let out = format!("{}/{L1_BUNDLE}", truecold_nested::OUT_DIR);
    // An arm's own guest is packed at /guest-<engine> ([`arm_guest_files`]).
    let mut plan = plan.clone();
    for (e, d) in &mut plan.arm_guest_dir {
        *d = PathBuf::from(arm_guest_l1_dir(*e));
    }
    let plan = &plan;
    let bins: Vec<(Engine, PathBuf)> = arms
        .iter()
        .map(|e| (*e, PathBuf::from(truecold_nested::engine_l1_path(*e))))
        .collect();
    let mut v: Vec<String> = vec!["/bin/truecold".into(), "run".into()];
    v.extend(explicit_args(
        plan,
        guest_flag(ContractKind::Linux),
        ArgPaths {
            vmm: Path::new(truecold_nested::engine_l1_path(Engine::Truecold)),
            guest_dir: Some(Path::new("/guest")),
            out: Path::new(&out),
            engines: &bins,
        },
    ));
    v
}

/// Where an arm's own guest directory is in L1.
fn arm_guest_l1_dir(e: Engine) -> String {
    format!("/guest-{}", e.as_str())
}

/// The arms' own guests (`--arm-guest-dir`) for L1, each at [`arm_guest_l1_dir`].
fn arm_guest_files(plan: &CampaignPlan) -> Vec<L1File> {
    plan.arm_guest_dir
        .iter()
        .flat_map(|(e, dir)| {
            truecold_nested::GUEST_FILES.iter().map(move |f| L1File {
                dest: format!("{}/{f}", &arm_guest_l1_dir(*e)[1..]),
                src: dir.join(f),
                executable: false,
            })
        })
        .collect()
}

/// The peer engines' files for L1. L1's truecold-vmm is the layout's static build; the
/// peers are located like a native campaign's and packed with what they need to run (QEMU's
/// libraries and firmware).
fn engine_files(plan: &CampaignPlan, arms: &[Engine]) -> Result<Vec<L1File>, NestedError> {
    let b = &plan.engine_bins;
    let bins = truecold_nested::EngineBinaries::locate(
        arms,
        b.firecracker.as_deref(),
        b.cloud_hypervisor.as_deref(),
        b.qemu.as_deref(),
    )
    .map_err(EnginesError::BinaryMissing)?;
    Ok(truecold_nested::engine_files(arms, &bins)?)
}

/// An engines campaign in L1: the whole multi-arm directory is made there, received,
/// placed atomically and verified here; each arm is verified on its own too.
pub fn run_engines(
    plan: &CampaignPlan,
    arms: &[Engine],
    rounds: u64,
    guest_dir: &Path,
) -> Result<RunOutcome, NestedError> {
    let mut extra = engine_files(plan, arms)?;
    extra.extend(arm_guest_files(plan));
    let dest = engines_dest(plan, arms);
    let written = in_l1(
        plan,
        inner_engine_args(plan, arms),
        extra,
        rounds.saturating_mul(arms.len() as u64),
        guest_dir,
        dest,
    )?;
    Ok(received(written, arms))
}

/// A parity campaign in L1 (`--parity --nested`): the inner run is the same campaign on L1's
/// KVM, with the workspace image packed beside the guest; L1's kernel has TUN, so the VMM
/// there creates its taps.
pub fn run_parity(
    plan: &CampaignPlan,
    arms: Option<&[Engine]>,
    rounds: u64,
    guest_dir: &Path,
) -> Result<RunOutcome, NestedError> {
    let label = arms
        .map(|a| format!("-{}", explicit_args::engines_label(a)))
        .unwrap_or_default();
    let dest = dest_or(plan, &format!("nested-parity{label}"));
    let parity = PARITY_KERNEL_DIR;
    let mut extra: Vec<L1File> = [
        WORKSPACE_IMAGE.to_string(),
        format!("{parity}/vmlinux"),
        format!("{parity}/config"),
    ]
    .into_iter()
    .map(|f| L1File {
        dest: format!("guest/{f}"),
        src: guest_dir.join(&f),
        executable: false,
    })
    .collect();
    // Engine arms: the peers packed like an engines campaign's, named at their L1 paths.
    let inner = match arms {
        Some(arms) => {
            extra.extend(engine_files(plan, arms)?);
            inner_engine_args(plan, arms)
        }
        None => inner_args(plan),
    };
    let n_arms = arms.map_or(1, <[Engine]>::len) as u64;
    let written = in_l1(
        plan,
        inner,
        extra,
        rounds.saturating_mul(n_arms),
        guest_dir,
        dest,
    )?;
    Ok(received(written, arms.unwrap_or_default()))
}

/// The outcome of a campaign received from L1: the whole directory and each of `arms`'
/// bundles in it, each verified on its own.
fn received(written: Written, arms: &[Engine]) -> RunOutcome {
    let arms = arms
        .iter()
        .map(|e| {
            let path = written.path.join(e.as_str());
            let verdict = verify_dir(&path);
            (*e, Written { path, verdict })
        })
        .collect();
    RunOutcome {
        written,
        interrupted: false,
        warnings: vec![WARNING.to_string()],
        arms,
    }
}

/// Runs the campaign in L1 and returns the received, verified bundle.
pub fn run(plan: &CampaignPlan, planned: u64, guest_dir: &Path) -> Result<Written, NestedError> {
    let dest = dest_or(plan, "nested-linux");
    // `--bzimage`: the guest directory's bzImage beside its vmlinux in L1.
    let extra = if plan.guest.bzimage {
        vec![L1File {
            dest: "guest/bzImage".into(),
            src: guest_dir.join("bzImage"),
            executable: false,
        }]
    } else {
        Vec::new()
    };
    in_l1(plan, inner_args(plan), extra, planned, guest_dir, dest)
}

/// The 2 MiB hugetlb pool L1 reserves at boot for `plan`: the largest guest mapping of any
/// arm whose backing is hugetlb ([`Engine::expected_mapping`], the larger of truecold's RAM
/// layouts, so a layout knob's arm fits too), 0 when no arm's is. One guest's worth: launches
/// run one at a time and a VMM's pages return to the pool when it exits. The VMMs map
/// hugetlb memory reserved at mmap time (no `MAP_NORESERVE`), so a smaller pool fails the
/// launch (`hugetlb-pool-short`), never silently.
pub(crate) fn l1_hugetlb_pages(plan: &CampaignPlan) -> u64 {
    let engines = if plan.engines.is_empty() {
        vec![Engine::Truecold]
    } else {
        plan.engines.clone()
    };
    let bytes = plan.guest.mem.bytes();
    engines
        .into_iter()
        .filter(|e| plan.backing_of(*e, true) == Backing::Hugetlb)
        .flat_map(|e| RamLayout::ALL.map(|l| e.expected_mapping(bytes, l)))
        .max()
        .unwrap_or(0)
        .div_ceil(HUGE_PAGE_2M)
}

/// L1's memory, MiB, for a guest of `guest_mib` and a pool of `hugepages_2m`: the guest's
/// size and 1 GiB for L1's kernel, the initramfs and the VMM (the guest touches only part of
/// its memory); with a pool, the pool and 2 GiB beside it (L1's kernel, the initramfs, and
/// the touched pages of any arm not on hugetlb), whichever is larger.
pub(crate) fn l1_mem_mib(guest_mib: u64, hugepages_2m: u64) -> u64 {
    let plain = guest_mib.saturating_add(1024);
    if hugepages_2m == 0 {
        return plain;
    }
    let pool_mib = hugepages_2m.saturating_mul(HUGE_PAGE_2M >> 20);
    plain.max(pool_mib.saturating_add(2048))
}

/// L1's run for a campaign of `planned` launches (plus `--attribution`'s).
fn l1_run(
    plan: &CampaignPlan,
    l0: truecold_nested::L0Qemu,
    kernel: PathBuf,
    initramfs: PathBuf,
    workdir: PathBuf,
    planned: u64,
) -> L1Run {
    let per_launch_ms = plan.deadline_ms.saturating_add(plan.kill_grace_ms);
    let hugepages_2m = l1_hugetlb_pages(plan);
    L1Run {
        l0,
        kernel,
        initramfs,
        mem_mib: u32::try_from(l1_mem_mib(plan.guest.mem.mib(), hugepages_2m)).unwrap_or(u32::MAX),
        hugepages_2m,
        thp: plan.l1_thp,
        cpus: u32::from(plan.guest.vcpus.get()).max(2),
        timeout: Duration::from_secs(300)
            + Duration::from_millis(
                per_launch_ms.saturating_mul(planned.saturating_add(plan.attribution)),
            ),
        workdir,
        // The campaign's `--seed` (engines or plain): a nested campaign's randomness (nonces,
        // boot ids) is a function of it (docs/virtual-clock.md), so two campaigns of one seed
        // repeat them and campaigns of distinct seeds do not.
        seed: plan.seed,
    }
}

/// Removes L1's initramfs (tens of MiB), spent once L0 has exited or its write failed; the
/// console and stream logs (a few hundred KiB, the path the run's note names) stay in the work
/// directory.
fn remove_spent(initramfs: &Path) {
    if let Err(e) = std::fs::remove_file(initramfs) {
        if e.kind() != std::io::ErrorKind::NotFound {
            crate::note!(
                "truecold: warning: could not remove {}: {e}",
                initramfs.display()
            );
        }
    }
}

/// Runs `argv` (an inner `truecold run`) in L1 with the truecold files and `extra`, receives
/// what it wrote under `bundle/`, places it atomically at `dest` and verifies it.
pub(crate) fn in_l1(
    plan: &CampaignPlan,
    argv: Vec<String>,
    extra: Vec<L1File>,
    planned: u64,
    guest_dir: &Path,
    dest: PathBuf,
) -> Result<Written, NestedError> {
    let mut layout = Layout::discover();
    layout.guest_dir = guest_dir.to_path_buf();
    if let Some(vmm) = &plan.vmm {
        layout.vmm = vmm.clone();
    }
    layout.check()?;
    if dest.symlink_metadata().is_ok() {
        return Err(NestedError::OutExists(dest));
    }
    let work = std::env::temp_dir().join(format!("truecold-nested-{}", std::process::id()));
    let io = |op, path: &Path| {
        let at = PathIoError::at(op, path);
        move |source| NestedError::Io(at(source))
    };
    std::fs::create_dir_all(&work).map_err(io("create", &work))?;
    let initramfs = work.join("l1.cpio");
    // The host's opt-outs hold in L1 too (TRUECOLD_VMM_JAIL=off: the inner bench passes
    // `--no-jail`, and the bundle records it).
    let job = Job {
        argv,
        stdout: None,
        env: truecold_nested::forwarded_env(),
    };
    let mut files = layout.l1_files();
    files.extend(extra);
    let l0 = truecold_nested::L0Qemu::locate()?;
    let facts = truecold_nested::HarnessFacts::probe(&l0, &layout.l1_kernel, plan.seed)
        .and_then(|f| f.with_binaries(&layout.l1_init, &layout.bench))
        .map_err(truecold_nested::NestedError::Facts)?;
    if let Err(e) = write_initramfs(&initramfs, &layout.l1_init, &job, &facts, &files) {
        remove_spent(&initramfs);
        return Err(e.into());
    }
    let l1 = l1_run(
        plan,
        l0,
        layout.l1_kernel.clone(),
        initramfs.clone(),
        work.clone(),
        planned,
    );
    crate::note!(
        "truecold: nested: L1 under QEMU TCG (seed {}), {planned} launches inside; L1 console: {}",
        truecold_proof::seed::hex(plan.seed),
        work.join("console.log").display()
    );
    let got = run_l1(&l1);
    remove_spent(&initramfs);
    let got = got?;
    let prefix = format!("{L1_BUNDLE}/");
    let files: Vec<(&str, &Vec<u8>)> = got
        .files
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|name| (name, v)))
        .collect();
    if files.is_empty() {
        return Err(NestedError::NoBundle {
            exit: got.job_exit,
            console: got.console_log,
        });
    }
    // Atomic: a reader never sees half a bundle.
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io("create", parent))?;
    let tmp = parent.join(format!(".truecold-nested-{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (name, data) in files {
        let path = tmp.join(name);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(io("create", d))?;
        }
        std::fs::write(&path, data).map_err(io("write", &path))?;
    }
    std::fs::rename(&tmp, &dest).map_err(io("rename into place", &dest))?;
    let verdict = verify_dir(&dest);
    Ok(Written {
        path: dest,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    fn parse(argv: &[&str]) -> CampaignPlan {
        let words = argv
            .strip_prefix(&["truecold", "run"])
            .expect("truecold run …");
        CampaignPlan::of_words(words).unwrap()
    }

    #[test]
    fn inner_campaign_is_the_same_campaign_as_linux_on_l1() {
        let a = parse(&[
            "truecold",
            "run",
            "--nested",
            "-n",
            "3",
            "--vcpus",
            "2",
            "--mem-mib",
            "1024",
        ]);
        let v = inner_args(&a).join(" ");
        assert!(
            v.starts_with(
                "/bin/truecold run --linux --mode sequential --count 3 --vcpus 2 --mem-mib 1024"
            ),
            "{v}"
        );
        assert!(v.contains("--deadline-ms 300000"), "{v}");
        assert!(
            v.contains("--vmm /bin/truecold-vmm --guest-dir /guest --out /out/bundle"),
            "{v}"
        );
        let a = parse(&[
            "truecold",
            "run",
            "--nested",
            "--mode",
            "open-loop",
            "--rate",
            "2.5",
            "--deadline-ms",
            "9",
        ]);
        let v = inner_args(&a).join(" ");
        assert!(
            v.contains("--mode open-loop")
                && v.contains("--rate 2.500 --concurrency 64")
                && v.contains("--deadline-ms 9"),
            "{v}"
        );
    }

    #[test]
    fn l1_reserves_a_hugetlb_pool_only_for_a_hugetlb_arm_and_holds_it() {
        let l0 = truecold_nested::L0Qemu {
            bin: PathBuf::from("/q"),
            firmware: vec![],
        };
        let run = |args: &[&str]| {
            let a = parse(args);
            l1_run(&a, l0.clone(), "/k".into(), "/i".into(), "/w".into(), 2)
        };
        let qemu_line = |r: &L1Run| {
            truecold_nested::qemu_command(r)
                .get_args()
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let plain = run(&[
            "truecold",
            "run",
            "--nested",
            "-n",
            "2",
            "--mem-mib",
            "16384",
        ]);
        assert_eq!(plain.hugepages_2m, 0);
        assert_eq!(plain.mem_mib, 16384 + 1024);
        let cmd = qemu_line(&plain);
        assert!(!cmd.contains("hugepages="), "{cmd}");
        let h = run(&[
            "truecold",
            "run",
            "--nested",
            "-n",
            "2",
            "--mem-mib",
            "16384",
            "--backing",
            "hugetlb",
        ]);
        // 16 GiB and the legacy hole laid around, rounded up to 2 MiB: 8,193 pages.
        let bytes = 16384u64 << 20;
        let most = RamLayout::ALL
            .map(|l| Engine::Truecold.expected_mapping(bytes, l))
            .into_iter()
            .max()
            .unwrap();
        assert_eq!(h.hugepages_2m, most / HUGE_PAGE_2M);
        assert_eq!(h.hugepages_2m, 8193);
        assert_eq!(u64::from(h.mem_mib), 8193 * 2 + 2048);
        let cmd = qemu_line(&h);
        assert!(cmd.contains("hugepages=8193"), "{cmd}");
        // One engine arm on hugetlb is enough; the peers map exactly the configured size.
        let e = run(&[
            "truecold",
            "run",
            "--nested",
            "-n",
            "2",
            "--mem-mib",
            "1024",
            "--engines",
            "truecold,firecracker",
            "--arm-backing",
            "firecracker=hugetlb",
        ]);
        assert_eq!(e.hugepages_2m, 512);
        assert_eq!(l1_mem_mib(1024, 0), 2048);
        assert_eq!(l1_mem_mib(1024, 512), 3072);
    }

    #[test]
    fn a_plain_campaigns_seed_is_l1s_qemu_seed_not_the_inner_runs() {
        let a = parse(&["truecold", "run", "--nested", "-n", "2", "--seed", "41"]);
        let l0 = truecold_nested::L0Qemu {
            bin: PathBuf::from("/q"),
            firmware: vec![],
        };
        let l1 = l1_run(
            &a,
            l0.clone(),
            PathBuf::from("/k"),
            PathBuf::from("/i"),
            PathBuf::from("/w"),
            2,
        );
        assert_eq!(l1.seed, 41);
        let cmd = truecold_nested::qemu_command(&l1);
        let argv: Vec<String> = cmd
            .get_args()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert!(argv.join(" ").contains("-seed 41"), "{argv:?}");
        // The inner run is a plain --linux campaign, where --seed has no use (and is refused).
        let v = inner_args(&a);
        assert!(!v.iter().any(|w| w == "--seed"), "{v:?}");
        // The default seed when none is given.
        let a = parse(&["truecold", "run", "--nested", "-n", "2"]);
        let l1 = l1_run(&a, l0, "/k".into(), "/i".into(), "/w".into(), 2);
        assert_eq!(l1.seed, crate::cli::DEFAULT_SEED);
    }

    #[test]
    fn an_engines_campaign_in_l1_names_each_engine_at_its_l1_path() {
        let a = parse(&[
            "truecold",
            "run",
            "--nested",
            "--engines",
            "truecold,firecracker,cloud-hypervisor,qemu-microvm",
            "-n",
            "3",
            "--mem-mib",
            "1024",
        ]);
        let arms = a.engines.clone();
        let v = inner_engine_args(&a, &arms).join(" ");
        assert!(
            v.starts_with(
                "/bin/truecold run --linux --mode sequential --count 3 --vcpus 2 --mem-mib 1024"
            ),
            "{v}"
        );
        assert!(
            v.contains(
                "--engines truecold,firecracker,cloud-hypervisor,qemu-microvm --seed 0x74727565636f6c64 \
                 --firecracker /bin/firecracker --cloud-hypervisor /bin/cloud-hypervisor \
                 --qemu /usr/bin/qemu-system-x86_64 --vmm /bin/truecold-vmm --guest-dir /guest \
                 --out /out/bundle"
            ),
            "{v}"
        );
        assert!(!v.contains("--nested"), "{v}");
    }
}
