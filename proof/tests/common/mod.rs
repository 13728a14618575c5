//! Synthetic bundles for tests (no KVM): a deterministic fixture builder.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use truecold_proof::digest::sha256_hex;
use truecold_proof::schema::*;
use truecold_proof::verify::Verdict;
use truecold_proof::{write_bundle, BundleInputs};
use truecold_proto::{BootId, Clocksource, GuestPlatform};

/// SplitMix64 for test data.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
    /// Lognormal latency around `median_ns` with log-sd `sigma`.
    pub fn latency(&mut self, median_ns: f64, sigma: f64) -> u64 {
        (median_ns * (sigma * self.normal()).exp()) as u64
    }
}

pub const MEM: u64 = 16 << 30;
pub const DEADLINE: u64 = 1_000_000_000;
/// The first request of a fixture campaign (CLOCK_MONOTONIC ns).
pub const START: u64 = 1_000_000_000;
/// The harness's time between one row's last stamp and the next request.
pub const GAP: u64 = 50_000;

/// A row's last stamp: its request plus its non-queue host stages and its post stages.
pub fn last_stamp(s: &Sample) -> u64 {
    s.actual_request_ns
        + Stage::ALL
            .iter()
            .filter(|st| **st != Stage::Queue && st.kind() != StageKind::Guest)
            .filter_map(|st| s.stages.get(*st))
            .sum::<u64>()
}

/// The campaign's wall time: the rows' span plus a millisecond of setup.
pub fn wall_ns(samples: &[Sample]) -> u64 {
    let first = samples
        .iter()
        .map(|s| s.actual_request_ns)
        .min()
        .unwrap_or(START);
    let last = samples.iter().map(last_stamp).max().unwrap_or(START);
    last.saturating_sub(first) + 1_000_000
}

/// The Linux fixture's guest kernel command line.
pub const GUEST_CMDLINE: &str = "console=none 8250.nr_uarts=0 truecold.mem=17179869184";

pub fn boot_id(i: u64) -> BootId {
    BootId::parse(&format!("00000000-0000-4000-8000-{i:012x}")).unwrap()
}

/// A campaign description for the builder.
#[derive(Clone)]
pub struct Fixture {
    pub kind: ContractKind,
    pub n: u64,
    /// Every `fail_every`-th sample (index % k == k-1) fails.
    pub fail_every: Option<u64>,
    pub median_ns: f64,
    pub sigma: f64,
    pub seed: u64,
    pub host: HostKind,
    pub incomplete: bool,
    /// An arm of an engines campaign (serial observer) run by this engine; `None`: truecold
    /// alone, observed at the VM exit.
    pub engine: Option<Engine>,
    /// truecold-vmm's RAM layout (`configuration.ram_layout`; truecold alone).
    pub ram_layout: truecold_proto::kinds::RamLayout,
    /// truecold-vmm's CPU platform (`configuration.cpu_platform`; truecold alone): the rows'
    /// guests report it, the lines and the reports say it.
    pub cpu_platform: truecold_proto::platform::CpuPlatform,
}

impl Fixture {
    pub fn linux(n: u64) -> Self {
        Fixture {
            kind: ContractKind::Linux,
            n,
            fail_every: Some(7),
            median_ns: 30e6,
            sigma: 0.1,
            seed: 1,
            host: HostKind::Hardware,
            incomplete: false,
            engine: None,
            ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
            cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        }
    }

    /// An arm of an engines campaign: `n` Linux launches of `engine`, observed on serial.
    pub fn engine(engine: Engine, n: u64) -> Self {
        let (median_ns, seed) = match engine {
            Engine::Truecold => (20e6, 11),
            Engine::Firecracker => (40e6, 12),
            Engine::CloudHypervisor => (45e6, 13),
            Engine::QemuMicrovm => (60e6, 14),
        };
        Fixture {
            median_ns,
            seed,
            engine: Some(engine),
            ..Fixture::linux(n)
        }
    }

    /// The engine that boots this fixture's guests.
    pub fn engine_kind(&self) -> Engine {
        self.engine.unwrap_or(Engine::Truecold)
    }

    /// The engine's binary (`configuration.vmm_path`).
    pub fn vmm_path(&self) -> String {
        match self.engine_kind() {
            Engine::Truecold => "/usr/local/bin/truecold-vmm",
            Engine::Firecracker => "/usr/local/bin/firecracker",
            Engine::CloudHypervisor => "/usr/local/bin/cloud-hypervisor",
            Engine::QemuMicrovm => "/usr/bin/qemu-system-x86_64",
        }
        .into()
    }
    /// truecold's RAM under the fixture's layout (configured − its hole).
    pub fn ram(&self) -> u64 {
        Engine::Truecold.expected_firmware_ram(MEM, self.ram_layout)
    }

    pub fn probe(n: u64) -> Self {
        Fixture {
            kind: ContractKind::Probe,
            host: HostKind::Pvm,
            median_ns: 13e6,
            ..Fixture::linux(n)
        }
    }

    /// One successful or failed sample with host stages tiling the latency, requested at
    /// `actual`.
    pub fn sample(&self, i: u64, rng: &mut Rng, actual: u64) -> Sample {
        let linux = self.kind == ContractKind::Linux;
        let lat = rng.latency(self.median_ns, self.sigma).max(1000);
        if let Some(e) = self.engine {
            return self.engine_sample(e, i, lat, actual);
        }
        // Host stages: fixed shares of the latency, the remainder in guest_boot.
        let shares = [
            (Stage::Spawn, 8),
            (Stage::KvmOpen, 1),
            (Stage::VmCreate, 2),
            (Stage::Memory, 5),
            (Stage::KernelLoad, 4),
            (Stage::Vcpus, 3),
            (Stage::GuestInit, 10),
            (Stage::Challenge, 1),
        ];
        let mut stages = StageTimes::default();
        let mut used = 0;
        for (st, pct) in shares {
            let d = lat * pct / 100;
            stages.set(st, Some(d));
            used += d;
        }
        stages.set(Stage::GuestBoot, Some(lat - used));
        if linux {
            stages.set(Stage::GuestKernelToInit, Some(lat * 50 / 100));
            stages.set(Stage::GuestInitToReady, Some(lat * 9 / 100));
        }
        stages.set(Stage::Workload, Some(2_000_000));
        stages.set(Stage::Teardown, Some(1_000_000));
        let fails = self.fail_every.is_some_and(|k| i % k == k - 1);
        let mut s = Sample {
            index: i,
            contract: self.kind,
            concurrency: 1,
            intended_request_ns: None,
            actual_request_ns: actual,
            ready_ns: Some(actual + lat),
            latency_ns: Some(lat),
            stages,
            boot_id: linux.then(|| boot_id(i)),
            host_mem_configured: MEM,
            host_memslots: Some(self.ram()),
            host_e820_usable: Some(self.ram()),
            host_mapping_bytes: None,
            host_page_size: None,
            guest_mem_firmware: linux.then_some(self.ram()),
            guest_mem_total: linux.then_some(MEM - (300 << 20)),
            guest_mem_present: linux
                .then(|| self.ram() - Engine::Truecold.kernel_trim(self.ram_layout)),
            guest_mem_managed: linux.then_some(MEM - (300 << 20)),
            guest_cpus: linux.then_some(2),
            guest_platform: linux.then(|| GuestPlatform {
                packages: u32::from(self.cpu_platform.packages),
                cores_per_package: u32::from(self.cpu_platform.cores_per_package(2)),
                threads_per_core: 1,
                tsc_deadline_timer: true,
                constant_tsc: self.cpu_platform.invariant_tsc,
                nonstop_tsc: self.cpu_platform.invariant_tsc,
                tsc_unstable: false,
                clocksource: Clocksource::parse("kvm-clock"),
            }),
            protocol_errors: 0,
            workload: if linux { "BENCH_OK" } else { "not_run" }.into(),
            ok: true,
            error_kind: String::new(),
            error_detail: String::new(),
            cleanup_ok: None,
            cleanup_ns: None,
            parallel_latency_ns: None,
        };
        if fails {
            s.ok = false;
            s.ready_ns = None;
            s.latency_ns = None;
            s.stages = StageTimes::default();
            s.stages.set(Stage::Spawn, Some(3_000_000));
            s.boot_id = None;
            s.guest_mem_firmware = None;
            s.guest_mem_total = None;
            s.guest_mem_present = None;
            s.guest_mem_managed = None;
            s.guest_cpus = None;
            s.guest_platform = None;
            s.workload = String::new();
            s.error_kind = if i % 2 == 0 { "deadline" } else { "vmm_exit" }.into();
            s.error_detail = "vmm said: \"bad, very bad\"\nsecond line".into();
        }
        s
    }

    /// A row of an engines-campaign arm: truecold has its VMM's stages and `serial_ready`,
    /// another engine only the bench's (`serial_ready`, `challenge`); memory as `e` lays it
    /// out (firmware RAM less its hole, the smaps mapping of the configured size, 4 KiB pages
    /// for `thp`).
    fn engine_sample(&self, e: Engine, i: u64, lat: u64, actual: u64) -> Sample {
        let mut stages = StageTimes::default();
        let shares: &[(Stage, u64)] = match e {
            Engine::Truecold => &[
                (Stage::Spawn, 8),
                (Stage::KvmOpen, 1),
                (Stage::VmCreate, 2),
                (Stage::Memory, 5),
                (Stage::KernelLoad, 4),
                (Stage::Vcpus, 3),
                (Stage::GuestInit, 10),
                (Stage::SerialReady, 2),
                (Stage::Challenge, 1),
            ],
            _ => &[(Stage::Challenge, 2)],
        };
        let rest = if e == Engine::Truecold {
            Stage::GuestBoot
        } else {
            Stage::SerialReady
        };
        let mut used = 0;
        for &(st, pct) in shares {
            let d = lat * pct / 100;
            stages.set(st, Some(d));
            used += d;
        }
        stages.set(rest, Some(lat - used));
        stages.set(Stage::GuestKernelToInit, Some(lat * 50 / 100));
        stages.set(Stage::GuestInitToReady, Some(lat * 9 / 100));
        stages.set(Stage::Workload, Some(2_000_000));
        stages.set(Stage::Teardown, Some(1_000_000));
        let truecold = e == Engine::Truecold;
        let mut s = Sample {
            index: i,
            contract: ContractKind::Linux,
            concurrency: 1,
            intended_request_ns: None,
            actual_request_ns: actual,
            ready_ns: Some(actual + lat),
            latency_ns: Some(lat),
            stages,
            boot_id: Some(boot_id(i + 1000 * (e as u64 + 1))),
            host_mem_configured: MEM,
            host_memslots: truecold.then_some(MEM),
            host_e820_usable: truecold.then_some(MEM),
            host_mapping_bytes: Some(
                e.expected_mapping(MEM, truecold_proto::kinds::RamLayout::AroundHole),
            ),
            host_page_size: Some(4096),
            guest_mem_firmware: Some(
                e.expected_firmware_ram(MEM, truecold_proto::kinds::RamLayout::AroundHole),
            ),
            guest_mem_total: Some(MEM - (300 << 20)),
            guest_mem_present: Some(
                e.expected_firmware_ram(MEM, truecold_proto::kinds::RamLayout::AroundHole)
                    - e.kernel_trim(truecold_proto::kinds::RamLayout::AroundHole),
            ),
            guest_mem_managed: Some(MEM - (300 << 20)),
            guest_cpus: Some(2),
            guest_platform: Some(GuestPlatform {
                packages: 1,
                cores_per_package: 2,
                threads_per_core: 1,
                tsc_deadline_timer: true,
                constant_tsc: false,
                nonstop_tsc: false,
                tsc_unstable: false,
                clocksource: Clocksource::parse("kvm-clock"),
            }),
            protocol_errors: 0,
            workload: "BENCH_OK".into(),
            ok: true,
            error_kind: String::new(),
            error_detail: String::new(),
            cleanup_ok: None,
            cleanup_ns: None,
            parallel_latency_ns: None,
        };
        if self.fail_every.is_some_and(|k| i % k == k - 1) {
            s.ok = false;
            s.ready_ns = None;
            s.latency_ns = None;
            s.stages = StageTimes::default();
            if truecold {
                s.stages.set(Stage::Spawn, Some(3_000_000));
            }
            s.boot_id = None;
            s.host_mapping_bytes = None;
            s.host_page_size = None;
            s.guest_mem_firmware = None;
            s.guest_mem_total = None;
            s.guest_mem_present = None;
            s.guest_mem_managed = None;
            s.guest_cpus = None;
            s.guest_platform = None;
            s.workload = String::new();
            s.error_kind = "deadline".into();
            s.error_detail = "no verified reply on serial by the deadline".into();
        }
        s
    }

    /// The campaign's rows, one after the other as a sequential campaign runs them: each
    /// request [`GAP`] after the previous row's last stamp.
    pub fn samples(&self) -> Vec<Sample> {
        let mut rng = Rng(self.seed);
        let mut t = START;
        (0..self.n)
            .map(|i| {
                let s = self.sample(i, &mut rng, t);
                t = last_stamp(&s) + GAP;
                s
            })
            .collect()
    }

    pub fn config_bytes(&self) -> Option<Vec<u8>> {
        (self.kind == ContractKind::Linux).then(|| b"CONFIG_64BIT=y\nCONFIG_PVH=y\n".to_vec())
    }

    pub fn result(&self, samples: &[Sample]) -> ResultJson {
        let mut artifacts = BTreeMap::new();
        artifacts.insert("vmm".to_string(), sha256_hex(b"vmm"));
        if self.kind == ContractKind::Linux {
            artifacts.insert(
                "config".to_string(),
                sha256_hex(&self.config_bytes().unwrap()),
            );
            artifacts.insert("guest_init".to_string(), sha256_hex(b"init"));
            artifacts.insert("initramfs".to_string(), sha256_hex(b"initramfs"));
            artifacts.insert("vmlinux".to_string(), sha256_hex(b"vmlinux"));
        }
        ResultJson::new(
            Contract::new(
                self.kind,
                if self.engine.is_some() {
                    Observer::Serial
                } else {
                    Observer::VmExit
                },
                self.host.clock(),
                // An engines-campaign arm is interleaved with the other arms.
                self.engine.is_some(),
                Mode::Sequential { count: self.n },
                DEADLINE,
                self.incomplete,
            ),
            Configuration {
                vcpus: 2,
                mem_bytes: MEM,
                backing: "thp (obtained: thp-2m ×1)".into(),
                ram_layout: self.ram_layout,
                cpu_platform: self.cpu_platform,
                cmdline: match self.kind {
                    ContractKind::Linux => GUEST_CMDLINE.into(),
                    ContractKind::Probe => self.vmm_command(),
                },
                vmm_path: self.vmm_path(),
                kernel_path: Some("out/guest/vmlinux".into()),
                initramfs_path: Some("out/guest/initramfs.cpio".into()),
                engine: EngineInfo {
                    kind: self.engine_kind(),
                    version: match self.engine_kind() {
                        Engine::Truecold => "truecold-vmm 0.1.0".into(),
                        e => format!("{e} v1.0.0-test"),
                    },
                },
                knobs: vec![],
            },
            Environment {
                host_kind: self.host,
                cpu_model: "Test CPU @ 3.0GHz".into(),
                cores: 2,
                host_kernel: "6.1.0-test".into(),
                thp_enabled: "always [madvise] never".into(),
                thp_defrag: "always defer defer+madvise [madvise] never".into(),
                hugepages: "2048kB:0 1048576kB:0".into(),
                governor: None,
                loadavg_before: "0.10 0.20 0.30 1/100 1234".into(),
                loadavg_after: "0.50 0.30 0.30 1/100 2234".into(),
                harness: HarnessLoad {
                    wall_ns: wall_ns(samples),
                    cpu_user_ns: 1_000_000_000,
                    cpu_sys_ns: 2_000_000_000,
                    max_start_lag_ns: None,
                    in_window_cpu_ns: None,
                    in_window_wall_ns: None,
                    page_cache_dropped: None,
                },
                warnings: vec![],
                residue: Some(truecold_proof::residue::Residue::default()),
                nested: (self.host == HostKind::NestedEmulated).then(|| {
                    truecold_proof::schema::NestedHarness {
                        l1_seed: 7,
                        l0_qemu: "QEMU emulator version 10.0.2 (test)".into(),
                        l1_kernel_sha256: Some("1".repeat(64)),
                        l1_init_sha256: None,
                        bench_sha256: None,
                    }
                }),
                parity: None,
            },
            artifacts,
            samples,
        )
    }

    /// The `truecold run` invocation `cmdline.txt` records.
    pub fn invocation(&self) -> String {
        format!(
            "truecold run --{} -n {} --vcpus 2 --mem-mib 16384 --backing thp{} \
             --deadline-ms {}",
            self.kind.as_str(),
            self.n,
            self.layout_flag(),
            DEADLINE / 1_000_000
        )
    }

    /// ` --ram-layout <l>` off the default, else nothing (as the bench writes it), and
    /// likewise the CPU platform's flags.
    fn layout_flag(&self) -> String {
        let mut f = String::new();
        if !self.ram_layout.is_absent() {
            f.push_str(&format!(" --ram-layout {}", self.ram_layout));
        }
        for w in self.cpu_platform.flags() {
            f.push(' ');
            f.push_str(&w);
        }
        f
    }

    /// The VMM command `cmdline.txt` records.
    pub fn vmm_command(&self) -> String {
        let guest = match self.kind {
            ContractKind::Linux => {
                "--kernel out/guest/vmlinux --initramfs 'out/guest/initramfs.cpio'"
            }
            ContractKind::Probe => "--probe",
        };
        format!(
            "/usr/local/bin/truecold-vmm boot {guest} --vcpus 2 --mem-mib 16384 --backing thp{} \
             --request-ns <actual_request_ns> --deadline-at-ns <actual_request_ns+{DEADLINE}>",
            self.layout_flag()
        )
    }

    /// An engine arm's per-sample command `cmdline.txt` records.
    pub fn engine_command(&self) -> String {
        let p = self.vmm_path();
        match self.engine_kind() {
            Engine::Truecold => format!(
                "{p} boot --kernel out/guest/vmlinux --initramfs out/guest/initramfs.cpio \
                 --vcpus 2 --mem-mib 16384 --backing thp --transport serial --report-file \
                 <report_file> --request-ns <actual_request_ns> --deadline-at-ns \
                 <actual_request_ns+{DEADLINE}>"
            ),
            Engine::Firecracker => format!("{p} --no-api --config-file <config_file>"),
            Engine::CloudHypervisor => format!(
                "{p} --kernel out/guest/vmlinux --initramfs out/guest/initramfs.cpio \
                 --cmdline '{GUEST_CMDLINE}' --cpus boot=2 --memory size=16384M --serial tty \
                 --console off"
            ),
            Engine::QemuMicrovm => format!(
                "{p} -M microvm -nodefaults -no-reboot -smp 2 -m 16384M -kernel \
                 out/guest/vmlinux -initrd out/guest/initramfs.cpio -append '{GUEST_CMDLINE}' \
                 -serial stdio"
            ),
        }
    }

    /// The bundle's other files, with `reports.jsonl` made from the fixture's own rows.
    pub fn inputs(&self) -> BundleInputs {
        self.inputs_for(&self.samples())
    }

    /// The bundle's other files, with `reports.jsonl` made from `samples`.
    pub fn inputs_for(&self, samples: &[Sample]) -> BundleInputs {
        if let Some(e) = self.engine {
            let explicit = format!(
                "truecold run --linux -n {} --vcpus 2 --mem-mib 16384 --backing thp \
                 --deadline-ms {} --engines truecold,firecracker,cloud-hypervisor,qemu-microvm \
                 {} {}",
                self.n,
                DEADLINE / 1_000_000,
                truecold_proof::cmdline::binary_flag(e),
                self.vmm_path()
            );
            return BundleInputs {
                kernel_config: self.config_bytes(),
                cmdline: truecold_proof::cmdline::format_engine_cmdline_txt(
                    self.kind.label(),
                    &format!("./{explicit}"),
                    &explicit,
                    e,
                    &self.engine_command(),
                    Some(GUEST_CMDLINE),
                ),
                extra_files: vec![(
                    truecold_proof::names::REPORTS_FILE.to_string(),
                    engine_reports_jsonl(samples, DEADLINE, e),
                )],
                staged_files: vec![],
            };
        }
        BundleInputs {
            kernel_config: self.config_bytes(),
            cmdline: truecold_proof::cmdline::format_cmdline_txt(
                self.kind.label(),
                &format!("./{}", self.invocation()),
                &self.invocation(),
                &self.vmm_command(),
                (self.kind == ContractKind::Linux).then_some(GUEST_CMDLINE),
            ),
            extra_files: vec![(
                truecold_proof::names::REPORTS_FILE.to_string(),
                reports_jsonl_platform(samples, DEADLINE, self.ram_layout, self.cpu_platform),
            )],
            staged_files: vec![],
        }
    }

    /// Writes the bundle to `parent/name` with RIP-sampled attribution launches, one per
    /// row that reached its first run (their lines the rows' own reports): vCPU 0 sampled
    /// every 100 µs from its first run, 10 samples in `fn_x` then `extra` in `fn_delay`, each
    /// sample requested; returns its path.
    pub fn write_sampled(&self, parent: &Path, name: &str, extra: u64) -> PathBuf {
        use truecold_proof::attribution::{self, AttributionLine, RipFunction};
        use truecold_proto::rip::{Recorder, RipSamples, Sample as Rs, SamplePeriod, VcpuState};
        const FN_X: u64 = 0xffff_ffff_8100_0000;
        const FN_DELAY: u64 = 0xffff_ffff_8100_1000;
        let samples = self.samples();
        let result = self.result(&samples);
        let mut inputs = self.inputs_for(&samples);
        let mut jsonl = Vec::new();
        for l in reports_jsonl(&samples, DEADLINE)
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            let mut report: truecold_proof::reports::ReportLine =
                serde_json::from_slice(l).unwrap();
            let vmm = report.vmm.as_mut().unwrap();
            let Some(t0) = vmm["stamps"]["first_run"].as_u64() else {
                continue;
            };
            let mut r = Recorder::new(1);
            r.start(t0);
            for k in 0..10 + extra {
                let rip = if k < 10 { FN_X + k } else { FN_DELAY + 8 };
                assert!(r.push(Rs {
                    t_ns: t0 + (k + 1) * 100_000,
                    rip,
                    state: VcpuState::Running,
                }));
            }
            let mut v = r.finish();
            v.requested = Some(10 + extra);
            vmm["rip_samples"] = serde_json::to_value(RipSamples {
                period_us: SamplePeriod::from_us(100).unwrap(),
                t0_ns: t0,
                ticks: 10 + extra,
                missed_ticks: 0,
                vcpus: vec![v],
            })
            .unwrap();
            let line = AttributionLine {
                report,
                symbols: BTreeMap::new(),
                functions: vec![
                    RipFunction {
                        start: FN_X,
                        end: FN_X + 0x100,
                        name: "fn_x".into(),
                    },
                    RipFunction {
                        start: FN_DELAY,
                        end: FN_DELAY + 0x100,
                        name: "fn_delay".into(),
                    },
                ],
            };
            jsonl.extend_from_slice(serde_json::to_string(&line).unwrap().as_bytes());
            jsonl.push(b'\n');
        }
        let clock = result.environment.host_kind.clock().describe();
        inputs
            .extra_files
            .extend(attribution::generate(&jsonl, &samples, clock).unwrap());
        inputs
            .extra_files
            .push((attribution::JSONL_FILE.to_string(), jsonl));
        let dest = parent.join(name);
        let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        dest
    }

    /// Writes the bundle to `parent/name` and returns its path.
    pub fn write(&self, parent: &Path, name: &str) -> PathBuf {
        let samples = self.samples();
        let result = self.result(&samples);
        let dest = parent.join(name);
        let w = write_bundle(&dest, &result, &samples, &self.inputs()).unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        dest
    }
}

/// Rewrites SHA256SUMS so only the semantic check can catch a change (every file but
/// SHA256SUMS and SHA256SUMS.sig; hashed as a stream, so a huge file costs no memory).
pub fn resum(dir: &Path) {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "SHA256SUMS" && name != "SHA256SUMS.sig" {
            let f = std::fs::File::open(e.path()).unwrap();
            entries.push((name, truecold_proof::digest::sha256_reader(f).unwrap().0));
        }
    }
    std::fs::write(
        dir.join("SHA256SUMS"),
        truecold_proof::sums::format_sums(&entries),
    )
    .unwrap();
}

/// Copies a flat bundle directory.
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

/// The committed real bundle: the newest directory under the repository's `results/` that
/// is one bundle (a `result.json` and a SHA256SUMS; an engines directory has neither at its
/// top) (panics when there is none: a test never skips silently).
pub fn real_bundle_source() -> PathBuf {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("SHA256SUMS").is_file() && p.join("result.json").is_file())
        // The tamper suite edits a probe-floor bundle (its rules, e.g. no boot ids, are
        // written for that contract); other committed bundles are checked elsewhere.
        .filter(|p| {
            std::fs::read(p.join("result.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v["contract"]["kind"] == "probe")
        })
        .collect();
    dirs.sort();
    dirs.pop()
        .unwrap_or_else(|| panic!("no committed probe bundle with SHA256SUMS under {results:?}"))
}

/// A copy of the committed real bundle at `parent/name`.
pub fn real_bundle(parent: &Path, name: &str) -> PathBuf {
    let dst = parent.join(name);
    copy_dir(&real_bundle_source(), &dst);
    dst
}

/// A forger's edit: parses the bundle, applies `f` to the result and the rows, then writes
/// result.json, samples.csv, every generated file and SHA256SUMS exactly as the writer
/// would (statistics recomputed), so only a check that sees through the edit can catch it.
/// A forger who also rewrites `reports.jsonl` to agree with the forged rows (so each test
/// shows that its own check catches the forgery even when the evidence was forged too).
pub fn forge(dir: &Path, f: impl FnOnce(&mut ResultJson, &mut Vec<Sample>)) {
    forge_with(dir, true, f)
}

/// [`forge`], rewriting `reports.jsonl` from the forged rows only when `evidence`.
pub fn forge_with(dir: &Path, evidence: bool, f: impl FnOnce(&mut ResultJson, &mut Vec<Sample>)) {
    let (mut r, mut s) = truecold_proof::read_bundle(dir).unwrap();
    f(&mut r, &mut s);
    if evidence {
        std::fs::write(
            dir.join(truecold_proof::names::REPORTS_FILE),
            reports_jsonl_for(&s, &r),
        )
        .unwrap();
    }
    // Written in the bundle's own schema (the committed bundle is schema 5).
    r.summary = truecold_proof::Summaries::compute_for(&r.contract, &s, r.schema_version);
    std::fs::write(
        dir.join("result.json"),
        truecold_proof::bundle::result_bytes(&r).unwrap(),
    )
    .unwrap();
    let mut csv = Vec::new();
    truecold_proof::csv::write_schema_samples_to(&mut csv, &s, r.schema_version).unwrap();
    std::fs::write(dir.join("samples.csv"), csv).unwrap();
    for (name, bytes) in truecold_proof::bundle::generated_files(&r, &s) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    resum(dir);
}

/// The kinds of every reason and every warning of `v` (a test of a warning-only forgery
/// says `is_valid` too).
pub fn checks(v: &Verdict) -> std::collections::BTreeSet<truecold_proof::Check> {
    v.reasons
        .iter()
        .chain(&v.warnings)
        .map(|r| r.check)
        .collect()
}

/// `reports.jsonl` for rows of the bundle `r` (vm-exit or serial observer).
pub fn reports_jsonl_for(samples: &[Sample], r: &ResultJson) -> Vec<u8> {
    match r.contract.observer {
        Observer::VmExit => reports_jsonl_platform(
            samples,
            r.contract.deadline_ns,
            r.configuration.ram_layout,
            r.configuration.cpu_platform,
        ),
        Observer::Serial | Observer::Agent => {
            engine_reports_jsonl(samples, r.contract.deadline_ns, r.configuration.engine.kind)
        }
    }
}

/// A row's stamps rebuilt from its stages (the inverse of the tiling).
pub fn stamps_of(s: &Sample) -> truecold_proto::measure::Stamps {
    use truecold_proto::measure::{Boundary, Stamps};
    let mut st = Stamps {
        intended: s.intended_request_ns,
        request: Some(s.actual_request_ns),
        ..Stamps::default()
    };
    let mut t = s.actual_request_ns;
    for d in Stage::TABLE.iter().filter(|d| d.stage != Stage::Queue) {
        if let (Boundary::Host { end }, Some(ns)) = (d.boundary, s.stages.get(d.stage)) {
            t += ns;
            st.set(end, Some(t));
        }
    }
    st
}

/// The guest record of a successful Linux fixture row.
pub fn record_of(s: &Sample) -> Option<truecold_proto::GuestRecord> {
    let t_init = s.stages.get(Stage::GuestKernelToInit).unwrap_or(0);
    (s.contract == ContractKind::Linux && s.ok).then(|| truecold_proto::GuestRecord {
        boot_id: s.boot_id,
        t_init_ns: t_init,
        t_ready_ns: t_init + s.stages.get(Stage::GuestInitToReady).unwrap_or(0),
        t_reply_ns: 0,
        t_record_ns: 0,
        mem_configured: s.host_mem_configured,
        mem_firmware_ram: s.guest_mem_firmware.unwrap_or(0),
        mem_total: s.guest_mem_total.unwrap_or(0),
        mem_present: s.guest_mem_present.unwrap_or(0),
        mem_managed: s.guest_mem_managed.unwrap_or(0),
        mem_probe: 1 << 20,
        cpus: s.guest_cpus.unwrap_or(0),
        platform: s.guest_platform.clone().unwrap_or_default(),
        workload: truecold_proto::Workload::BenchOk,
        code: truecold_proto::ErrorCode::Ok,
    })
}

/// `reports.jsonl` of an engines-campaign arm: per row the bench's [`EngineRun`] — its
/// stamps rebuilt from the stages, the ready line's and the reply's boot id, the record, the
/// smaps mapping — and, for the truecold engine, the VMM's report inside it (its own marks,
/// the memslot and E820 figures, the deadline it was given).
pub fn engine_reports_jsonl(samples: &[Sample], deadline_ns: u64, engine: Engine) -> Vec<u8> {
    use truecold_proof::reports::{HarnessMarks, ReportLine};
    use truecold_proto::measure::{Mark, Taker};
    use truecold_proto::report::{
        EngineRun, HostMapping, Liveness, LivenessKind, MemoryFigures, Outcome, ReportCore,
    };
    let mut out = Vec::new();
    for s in samples {
        let st = stamps_of(s);
        let mut liveness = Liveness::new(LivenessKind::Binding);
        liveness.verified = s.ok;
        liveness.reply_boot_id = s.boot_id;
        let outcome = Outcome {
            ok: s.ok,
            failure_kind: (!s.ok).then(|| "deadline".into()),
            failure: None,
            guest_exit_code: None,
        };
        let vmm = (engine == Engine::Truecold).then(|| {
            let mut own = st;
            for m in Mark::ALL {
                if m != Mark::Request && m.taker_under(Observer::Serial) == Taker::Bench {
                    own.set(m, None);
                }
            }
            let core = ReportCore {
                schema: truecold_proto::report::REPORT_SCHEMA,
                stamps: own,
                memory_figures: MemoryFigures {
                    configured: s.host_mem_configured,
                    memslots: s.host_memslots.unwrap_or(0),
                    e820_ram: s.host_e820_usable.unwrap_or(0),
                    e820_hole_reserved: 0,
                    guest: s.guest_mem_firmware,
                },
                backing_obtained: truecold_proto::kinds::ObtainedBacking::Thp,
                vmm_rss_bytes: None,
                liveness: Liveness::new(LivenessKind::Binding),
                guest_record: None,
                protocol_error_count: 0,
                protocol_errors: vec![],
                guest_cmdline: Some(GUEST_CMDLINE.into()),
                accounting: None,
                guest_trace: None,
                rip_samples: None,
                containment: None,
                outcome: outcome.clone(),
                transport: truecold_proto::kinds::Transport::Serial,
            };
            let mut v = serde_json::to_value(core).unwrap();
            let origin = s.intended_request_ns.unwrap_or(s.actual_request_ns);
            v["config"] = serde_json::json!({"deadline": {"at-ns": origin + deadline_ns}});
            v
        });
        let run = EngineRun {
            engine,
            stamps: st,
            ready_boot_id: s.boot_id,
            liveness,
            guest_record: record_of(s),
            host_memory: s.host_mapping_bytes.map(|b| HostMapping {
                sizes: vec![b],
                kernel_page_size: s.host_page_size.unwrap_or(0),
                anon_huge_bytes: 0,
            }),
            protocol_error_count: s.protocol_errors,
            protocol_errors: vec![],
            exit: None,
            vmm,
            outcome,
            network: None,
            cleanup: None,
        };
        let line = ReportLine {
            index: s.index,
            harness: HarnessMarks {
                intended: s.intended_request_ns,
                request: s.actual_request_ns,
                reaped: st.reaped,
            },
            vmm: None,
            vmm_missing: None,
            engine: Some(run),
            parallel: None,
            parallel_missing: None,
        };
        out.extend_from_slice(line.to_line().unwrap().as_bytes());
    }
    out
}

/// An engines campaign for tests: its arms, rounds, the order's seed, the host kind.
#[derive(Clone)]
pub struct Campaign {
    pub engines: Vec<Engine>,
    pub rounds: u64,
    pub seed: u64,
    pub host: HostKind,
}

impl Campaign {
    /// All four engines, `rounds` rounds, on a nested-emulated host.
    pub fn four(rounds: u64) -> Self {
        Campaign {
            engines: Engine::ALL.to_vec(),
            rounds,
            seed: 0x5eed,
            host: HostKind::NestedEmulated,
        }
    }

    /// The plan: each round every arm once, shuffled (Fisher–Yates) from the seed.
    pub fn plan(&self) -> truecold_proof::arms::ArmsPlan {
        let mut rng = Rng(self.seed);
        let mut order = Vec::new();
        for r in 0..self.rounds {
            let mut names: Vec<&str> = self.engines.iter().map(|e| e.as_str()).collect();
            for k in (1..names.len()).rev() {
                names.swap(k, (rng.next() % (k as u64 + 1)) as usize);
            }
            order.extend(names.into_iter().map(|n| (r, n.to_string())));
        }
        truecold_proof::arms::ArmsPlan {
            seed: self.seed,
            rounds: self.rounds,
            arms: self
                .engines
                .iter()
                .map(|&e| truecold_proof::arms::ArmRef::engine(e))
                .collect(),
            order,
        }
    }

    /// Each arm's fixture and rows, launched one at a time in the plan's order.
    pub fn arms(&self) -> Vec<(Fixture, Vec<Sample>)> {
        let plan = self.plan();
        let mut arms: Vec<(Fixture, Rng, Vec<Sample>)> = self
            .engines
            .iter()
            .map(|&e| {
                let f = Fixture {
                    host: self.host,
                    ..Fixture::engine(e, self.rounds)
                };
                let rng = Rng(f.seed);
                (f, rng, Vec::new())
            })
            .collect();
        let mut t = START;
        for (_, name) in &plan.order {
            let k = self
                .engines
                .iter()
                .position(|e| e.as_str() == name)
                .unwrap();
            let (f, rng, rows) = &mut arms[k];
            let s = f.sample(rows.len() as u64, rng, t);
            t = last_stamp(&s) + GAP;
            rows.push(s);
        }
        arms.into_iter().map(|(f, _, rows)| (f, rows)).collect()
    }

    /// Writes every arm bundle into `parent/name`, then the multi-arm files
    /// ([`truecold_proof::arms::write_arms`]); panics unless the directory verifies.
    pub fn write(&self, parent: &Path, name: &str) -> PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir(&dir).unwrap();
        let arms = self.arms();
        let all: Vec<Sample> = arms.iter().flat_map(|(_, s)| s.clone()).collect();
        let wall = wall_ns(&all);
        for (f, rows) in &arms {
            let mut r = f.result(rows);
            r.environment.harness.wall_ns = wall;
            let dest = dir.join(f.engine_kind().as_str());
            let w = write_bundle(&dest, &r, rows, &f.inputs_for(rows)).unwrap();
            assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        }
        let v = truecold_proof::arms::write_arms(&dir, &self.plan()).unwrap();
        assert!(v.is_valid(), "{}", v.render(&dir, 50));
        dir
    }
}

/// Copies a multi-arm directory (its arm directories included).
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
}

/// `reports.jsonl` for fixture rows: each row's stamps rebuilt from its stages (the inverse
/// of the tiling), its guest record from its guest columns, the deadline the VMM was given.
pub fn reports_jsonl(samples: &[Sample], deadline_ns: u64) -> Vec<u8> {
    reports_jsonl_layout(
        samples,
        deadline_ns,
        truecold_proto::kinds::RamLayout::AroundHole,
    )
}

/// [`reports_jsonl`] of a VMM run with `layout`: its figures declare the layout's hole and
/// its configuration echoes a layout that is not the default.
pub fn reports_jsonl_layout(
    samples: &[Sample],
    deadline_ns: u64,
    layout: truecold_proto::kinds::RamLayout,
) -> Vec<u8> {
    reports_jsonl_platform(
        samples,
        deadline_ns,
        layout,
        truecold_proto::platform::CpuPlatform::ABSENT,
    )
}

/// [`reports_jsonl_layout`], each report's configuration echoing `platform` too.
pub fn reports_jsonl_platform(
    samples: &[Sample],
    deadline_ns: u64,
    layout: truecold_proto::kinds::RamLayout,
    platform: truecold_proto::platform::CpuPlatform,
) -> Vec<u8> {
    use truecold_proof::reports::{HarnessMarks, ReportLine};
    use truecold_proto::measure::{Boundary, Stamps};
    use truecold_proto::report::{Liveness, LivenessKind, MemoryFigures, Outcome, ReportCore};
    let mut out = Vec::new();
    for s in samples {
        let linux = s.contract == ContractKind::Linux;
        let mut st = Stamps {
            intended: s.intended_request_ns,
            request: Some(s.actual_request_ns),
            ..Stamps::default()
        };
        let mut t = s.actual_request_ns;
        for d in Stage::TABLE.iter().filter(|d| d.stage != Stage::Queue) {
            if let (Boundary::Host { end }, Some(ns)) = (d.boundary, s.stages.get(d.stage)) {
                t += ns;
                st.set(end, Some(t));
            }
        }
        let reaped = st.reaped.take();
        let mut liveness = Liveness::new(if linux {
            LivenessKind::Binding
        } else {
            LivenessKind::ProbeEcho
        });
        liveness.verified = s.ok;
        liveness.reply_boot_id = s.boot_id;
        let guest_record = record_of(s);
        let core = ReportCore {
            schema: truecold_proto::report::REPORT_SCHEMA,
            transport: truecold_proto::kinds::Transport::Ports,
            stamps: st,
            memory_figures: MemoryFigures {
                configured: s.host_mem_configured,
                memslots: s.host_memslots.unwrap_or(0),
                e820_ram: s.host_e820_usable.unwrap_or(0),
                e820_hole_reserved: layout.hole().map_or(0, |h| h.len()),
                guest: s.guest_mem_firmware,
            },
            backing_obtained: truecold_proto::kinds::ObtainedBacking::Thp,
            vmm_rss_bytes: None,
            liveness,
            guest_record,
            protocol_error_count: s.protocol_errors,
            protocol_errors: vec![],
            guest_cmdline: None,
            accounting: None,
            guest_trace: None,
            rip_samples: None,
            containment: None,
            outcome: Outcome {
                ok: s.ok,
                failure_kind: (!s.ok).then(|| "deadline".into()),
                failure: None,
                guest_exit_code: None,
            },
        };
        let mut vmm = serde_json::to_value(core).unwrap();
        let origin = s.intended_request_ns.unwrap_or(s.actual_request_ns);
        vmm["config"] = serde_json::json!({"deadline": {"at-ns": origin + deadline_ns}});
        if !layout.is_absent() {
            vmm["config"]["ram_layout"] = serde_json::json!(layout.as_str());
        }
        if !platform.is_absent() {
            vmm["config"]["cpu_platform"] = serde_json::to_value(platform).unwrap();
        }
        let line = ReportLine::new(
            s.index,
            HarnessMarks {
                intended: s.intended_request_ns,
                request: s.actual_request_ns,
                reaped,
            },
            vmm.to_string().as_bytes(),
            false,
        );
        out.extend_from_slice(line.to_line().unwrap().as_bytes());
    }
    out
}

/// Runs the `truecold-proof` binary: (exit code, stdout, stderr).
pub fn run_cli(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_truecold-proof"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Rewrites a multi-arm directory's top SHA256SUMS over every file (arm files as
/// `<arm>/<file>`), so only a semantic check can catch a change.
pub fn resum_arms(dir: &Path) {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            for f in std::fs::read_dir(e.path()).unwrap() {
                let f = f.unwrap();
                let file = std::fs::File::open(f.path()).unwrap();
                entries.push((
                    format!("{name}/{}", f.file_name().to_string_lossy()),
                    truecold_proof::digest::sha256_reader(file).unwrap().0,
                ));
            }
        } else if name != "SHA256SUMS" && name != "SHA256SUMS.sig" {
            let file = std::fs::File::open(e.path()).unwrap();
            entries.push((name, truecold_proof::digest::sha256_reader(file).unwrap().0));
        }
    }
    std::fs::write(
        dir.join("SHA256SUMS"),
        truecold_proof::sums::format_sums(&entries),
    )
    .unwrap();
}

/// An edit of a bundle's result.json.
pub type ClockEdit = fn(&mut ResultJson);

/// One edit per thing that makes a virtual clock (docs/virtual-clock.md: the L0 QEMU, the L1
/// kernel, the CPUs L1 brought up), each named as the verifier's reason names it: applied to
/// one bundle of a nested fixture, that bundle is on another clock than the rest.
pub fn other_virtual_clocks() -> [(&'static str, ClockEdit); 3] {
    [
        ("L0 QEMU", |r| {
            r.environment.nested.as_mut().unwrap().l0_qemu = "QEMU emulator version 7.2.22".into()
        }),
        ("L1 kernel", |r| {
            r.environment.nested.as_mut().unwrap().l1_kernel_sha256 = Some("2".repeat(64))
        }),
        ("L1 CPUs", |r| r.environment.cores += 1),
    ]
}

/// Rewrites every report line's `vmm` object with `f`, then SHA256SUMS.
pub fn edit_reports(dir: &Path, f: impl Fn(&mut serde_json::Value)) {
    let p = dir.join(truecold_proof::names::REPORTS_FILE);
    let text = std::fs::read_to_string(&p).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        f(&mut v["vmm"]);
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(&p, out).unwrap();
    resum(dir);
}

/// `dir` verifies INVALID (exit 1) with a `c` reason whose text holds `needle`.
pub fn invalid_with(dir: &Path, c: truecold_proof::Check, needle: &str) {
    let v = truecold_proof::verify_dir(dir);
    let text = v.render(dir, 50);
    assert_eq!(v.exit_code(), 1, "expected invalid:\n{text}");
    assert!(v.has(c), "expected a {c:?} reason:\n{text}");
    assert!(text.contains(needle), "want `{needle}`:\n{text}");
}
