//! The harness's own memory over a long campaign (issue 27): the campaign recording path —
//! [`execute`] with its schedule, rows, evidence and progress display — driven by
//! a fake launcher (no VMM, no KVM) for 10,001 launches. A counting global allocator (this
//! test binary only; one test, so nothing else allocates beside it) reads the bytes the
//! process holds on the heap once 1,000 and once 10,000 launches were recorded, and its
//! `VmRSS` (`/proc/self/status`) at the same two moments.
//!
//! The bound: [`GROWTH_BOUND`] bytes between the two, for 9,000 launches — under 8 bytes per
//! launch, so even one `u64` kept per launch (72,000 bytes) fails it, while the buffers that
//! are allowed (the staging files' write buffers, the progress display's counts, a held row
//! or two) have reached their size long before launch 1,000. Holding every launch's row and
//! evidence (what the harness did before rows were streamed to its staging files) grows by
//! kilobytes per launch.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use truecold_bench::campaign::execute::{execute, Harness};
use truecold_bench::campaign::process_launcher::{Attempt, End};
use truecold_bench::campaign::schedule::{Launcher, Schedule, Slot};
use truecold_bench::campaign::spec::CampaignSpec;
use truecold_bench::terminal::progress::{Progress, Style};
use truecold_proof::schema::{ContractKind, Observer};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::{now_ns, Stamps};

/// Bytes held on the heap now (allocated and not yet freed).
static LIVE: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is forwarded to the system allocator with the caller's own arguments;
// the counter is only arithmetic on the sizes the caller gave.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract; it is passed on unchanged.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by this allocator (hence by `System`) with layout `l`.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `p` was allocated by `System` with layout `l`; the caller upholds the rest.
        let q = unsafe { System.realloc(p, l, new_size) };
        if !q.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The campaign's length, and where it is measured (launches recorded).
const N: u64 = 10_001;
const EARLY: u64 = 1_000;
const LATE: u64 = 10_000;

/// The most the heap may grow between [`EARLY`] and [`LATE`] launches (see the module docs).
const GROWTH_BOUND: usize = 64 * 1024;

/// The most `VmRSS` may grow between [`EARLY`] and [`LATE`] launches, kB: the heap bound
/// rounded up to what the allocator may keep mapped beside it (its arenas grow in 128 KiB
/// steps and are not always given back).
const RSS_BOUND_KB: u64 = 1024;

/// `VmRSS` of this process, kB.
fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Launches nothing: each slot gets the report a probe-floor VMM prints, its strict-ready
/// 0.9–2.9 ms after the request (spread over 2,000 µs by the index), and the heap is read
/// when the launch with index [`EARLY`] or [`LATE`] starts (that many recorded before it).
struct Fake {
    deadline_ns: u64,
    seen: Mutex<Vec<(u64, usize, u64)>>,
}

impl Launcher for Fake {
    type Output = Attempt;

    fn launch(&self, slot: Slot) -> Attempt {
        if slot.index == EARLY || slot.index == LATE {
            let live = LIVE.load(Ordering::Relaxed);
            if let Ok(mut s) = self.seen.lock() {
                s.push((slot.index, live, vm_rss_kb()));
            }
        }
        let r = now_ns();
        // A deterministic spread (an LCG of the index).
        let jitter_us = slot
            .index
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
            >> 33
            & 0x7ff;
        let jitter_us = jitter_us % 2_000;
        let ready_us = 900 + jitter_us;
        Attempt {
            slot,
            request_ns: r,
            reaped_ns: r + (ready_us + 200) * 1000,
            deadline_ns: self.deadline_ns,
            end: End::Exited(0),
            stdout: report(r, ready_us, r + self.deadline_ns),
            stdout_truncated: false,
            stderr_tail: String::new(),
        }
    }
}

/// A probe-floor VMM's boot report for a launch requested at `r`, strict-ready `ready_us`
/// after it.
fn report(r: u64, ready_us: u64, deadline_at: u64) -> Vec<u8> {
    use truecold_proto::report::{Liveness, LivenessKind, MemoryFigures, Outcome, ReportCore};
    const MIB: u64 = 1 << 20;
    let at = |us: u64| Some(r + us * 1000);
    let mut liveness = Liveness::new(LivenessKind::ProbeEcho);
    liveness.verified = true;
    let core = ReportCore {
        schema: truecold_proto::report::REPORT_SCHEMA,
        transport: truecold_proto::kinds::Transport::Ports,
        stamps: Stamps {
            request: Some(r),
            boot_start: at(100),
            kvm_open: at(200),
            vm_created: at(300),
            memory_ready: at(400),
            kernel_loaded: at(500),
            first_run: at(600),
            init_doorbell: at(700),
            ready_doorbell: at(800),
            strict_ready: at(ready_us),
            record: at(ready_us + 100),
            ..Stamps::default()
        },
        memory_figures: MemoryFigures {
            configured: 64 * MIB,
            memslots: 64 * MIB,
            e820_ram: 64 * MIB,
            e820_hole_reserved: 0,
            guest: Some(64 * MIB),
        },
        backing_obtained: truecold_proto::kinds::ObtainedBacking::Anon4k,
        vmm_rss_bytes: None,
        liveness,
        guest_record: None,
        protocol_error_count: 0,
        protocol_errors: vec![],
        guest_cmdline: None,
        accounting: None,
        guest_trace: None,
        rip_samples: None,
        containment: None,
        outcome: Outcome {
            ok: true,
            failure_kind: None,
            failure: None,
            guest_exit_code: Some(0),
        },
    };
    let mut v = serde_json::to_value(core).expect("a report serializes");
    v["config"] = serde_json::json!({ "deadline": { "at-ns": deadline_at } });
    v.to_string().into_bytes()
}

#[test]
fn the_harness_memory_after_10000_launches_is_within_a_small_bound_of_after_1000() {
    let spec = CampaignSpec {
        observer: Observer::VmExit,
        interleaved: false,
        stop_after: None,
        schedule: Schedule::Sequential { n: N },
        contract: ContractKind::Probe,
        vcpus: Vcpus::new(1).unwrap(),
        mem: GuestMem::from_mib(64).unwrap(),
        backing: truecold_proto::kinds::Backing::Anon,
        // The fake report's figures are laid around the hole.
        ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: 1_000_000_000,
        kill_grace_ns: 500_000_000,
    };
    let fake = Fake {
        deadline_ns: spec.deadline_ns,
        seen: Mutex::new(Vec::with_capacity(2)),
    };
    let stop = AtomicBool::new(false);
    let mut progress = Progress::new(std::io::sink(), Style::Plain, "memory", N);
    let ex = execute(
        &spec,
        &fake,
        &truecold_bench::campaign::vmm_output::observe_attempt,
        &stop,
        &mut progress,
        &Harness::plain(),
    )
    .expect("the campaign runs");
    // Every launch is a row, each a success (the fake's reports are well formed).
    assert_eq!(ex.samples.len() as u64, N);
    assert!(ex.samples.iter().all(|s| s.ok), "{:?}", ex.samples.first());
    let seen = fake.seen.into_inner().unwrap();
    let [(EARLY, early, early_rss), (LATE, late, late_rss)] = seen[..] else {
        panic!("the heap was not read at launches {EARLY} and {LATE}: {seen:?}");
    };
    eprintln!(
        "harness heap: {early} bytes after {EARLY} launches, {late} bytes after {LATE} \
         (growth {} bytes); VmRSS {early_rss} kB → {late_rss} kB",
        late as i64 - early as i64
    );
    assert!(
        late <= early + GROWTH_BOUND,
        "the harness's heap grew by {} bytes from {EARLY} to {LATE} launches (bound \
         {GROWTH_BOUND}): {early} → {late}",
        late as i64 - early as i64
    );
    assert!(
        late_rss <= early_rss + RSS_BOUND_KB,
        "the harness's VmRSS grew by {} kB from {EARLY} to {LATE} launches (bound \
         {RSS_BOUND_KB} kB): {early_rss} → {late_rss} kB",
        late_rss as i64 - early_rss as i64
    );
}
