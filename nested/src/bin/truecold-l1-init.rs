//! PID 1 of the nested harness's L1 VM. It first leaves the initramfs's root for a mount of
//! it ([`leave_rootfs`]: pivot_root(2), and so truecold-vmm's jail, refuses rootfs), then
//! mounts what a VMM needs (`/dev/kvm` comes from devtmpfs), runs the one job the host put
//! in [`JOB_FILE`], streams every file the job left under `/out` back over the second serial
//! port, and reboots — QEMU runs with `-no-reboot`, so that ends QEMU. It never waits for
//! anything without a bound: the host kills QEMU at its own deadline too.

use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use truecold_nested::{stream, Job, JOB_FILE, KVM_CHECK, OUT_DIR, STREAM_TTY};

fn main() {
    let code = match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("truecold-l1-init: {e}");
            let _ = send(&[], 255);
            255
        }
    };
    eprintln!("truecold-l1-init: job exit {code}, rebooting");
    // SAFETY: sync() and reboot() take no pointers; as PID 1 we own the machine's fate.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_AUTOBOOT);
    }
    // reboot() returns only on failure; PID 1 must not exit (that panics the kernel, which
    // with panic=-1 also ends QEMU, so this is only a last resort).
    loop {
        // SAFETY: pause() takes no arguments.
        unsafe { libc::pause() };
    }
}

/// The host's THP mode.
const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

fn run() -> io::Result<i32> {
    leave_rootfs()?;
    mount("proc", "/proc", "proc")?;
    mount("sysfs", "/sys", "sysfs")?;
    mount("devtmpfs", "/dev", "devtmpfs")?;
    mount("devpts", "/dev/pts", "devpts")?;
    mount("tmpfs", "/tmp", "tmpfs")?;
    // THP only where asked (`madvise`, this workplace's hosts' mode), not the kernel's default
    // `always`: under `always` the peer engines' guest memory silently got transparent huge
    // pages while truecold-vmm's `anon` backing asks for 4 KiB pages, so engines arms did not
    // run on the same backing (seen in smaps: AnonHugePages 40-44 MiB against 0).
    // A mode L1's command line names (`truecold run --nested --l1-thp`) is the kernel's
    // already: left as it is.
    let cmdline = fs::read_to_string("/proc/cmdline").map_err(ctx("/proc/cmdline"))?;
    let named = cmdline
        .split_whitespace()
        .any(|w| w.starts_with(&format!("{}=", truecold_nested::L1_THP_KEY)));
    if !named {
        fs::write(THP_ENABLED, "madvise").map_err(ctx(THP_ENABLED))?;
    }
    fs::create_dir_all(OUT_DIR).map_err(ctx(OUT_DIR))?;
    wait_for_settled_clock()?;
    let job = Job::decode(&fs::read_to_string(JOB_FILE).map_err(ctx(JOB_FILE))?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let stdout = match &job.stdout {
        Some(p) => Stdio::from(File::create(p).map_err(ctx(p))?),
        None => Stdio::inherit(),
    };
    let code = if job.argv[0] == KVM_CHECK {
        kvm_check()?
    } else {
        let status = Command::new(&job.argv[0])
            .args(&job.argv[1..])
            // Everything in L1 runs under the nested harness; say so to truecold's
            // host-kind detection (an emulated SVM CPU otherwise looks like hardware).
            .env("TRUECOLD_HOST_KIND", "nested-emulated")
            .envs(job.env.iter().map(|(k, v)| (k, v)))
            .stdout(stdout)
            .status()
            .map_err(ctx(&job.argv[0]))?;
        status.code().unwrap_or(128)
    };
    let mut files = Vec::new();
    collect(Path::new(OUT_DIR), "", &mut files)?;
    send(&files, code)?;
    Ok(code)
}

/// Where [`leave_rootfs`] mounts the root before it moves it onto `/` (removed after).
const NEW_ROOT: &str = "/.root";

/// Makes this process's root a mount point that pivot_root(2) accepts, as switch_root does
/// for an initramfs: the initramfs is rootfs (a tmpfs here: the command line names no
/// `root=`), the absolute root of the mount tree, which pivot_root refuses with EINVAL (the
/// root must be a mount with a parent) — and truecold-vmm's jail pivots into its own tmpfs
/// (docs/security.md). So rootfs is bind-mounted onto a directory of itself, that mount moved
/// onto `/` and the process chrooted into it: the same files (nothing copied), now a mount
/// stacked on rootfs. Every process started afterwards inherits that root.
fn leave_rootfs() -> io::Result<()> {
    fs::create_dir_all(NEW_ROOT).map_err(ctx(NEW_ROOT))?;
    mount_flags("/", NEW_ROOT, None, libc::MS_BIND)?;
    let check = |what: &str, rc: libc::c_int| {
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        Err(io::Error::new(
            e.kind(),
            format!("leaving rootfs: {what}: {e}"),
        ))
    };
    let (dot, root, new_root) = (cstring(".")?, cstring("/")?, cstring(NEW_ROOT)?);
    // SAFETY: a NUL-terminated path that outlives the call.
    check("chdir", unsafe { libc::chdir(new_root.as_ptr()) })?;
    // SAFETY: NUL-terminated paths that outlive the call; null type and data (a move).
    let moved = unsafe {
        libc::mount(
            dot.as_ptr(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_MOVE,
            std::ptr::null(),
        )
    };
    check("mount --move . /", moved)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check("chroot .", unsafe { libc::chroot(dot.as_ptr()) })?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check("chdir /", unsafe { libc::chdir(root.as_ptr()) })?;
    // The bind's mount point, seen from the new root: the same directory of the same files.
    fs::remove_dir(NEW_ROOT).map_err(ctx(NEW_ROOT))
}

/// Waits (bounded, in L1's time) until L1's clocksource is the TSC, so the job never runs
/// while L1 is still on `tsc-early`, before the kernel's refined TSC calibration (about 1.5 s
/// after boot) changes L1's TSC frequency and clocksource under a running guest. With a
/// 2-CPU L1 a guest booted then took 1.1 s of virtual time to strict-ready instead of
/// ~0.15 s, and for some `-seed`s both of its vCPUs spun for good in the guest's spinlock
/// loop (docs/virtual-clock.md). A clock that does not settle is an error, not a slower run.
fn wait_for_settled_clock() -> io::Result<()> {
    use truecold_nested::{clock_settled, CLOCKSOURCE, CLOCK_SETTLE_LIMIT};
    let step = std::time::Duration::from_millis(10);
    let mut waited = std::time::Duration::ZERO;
    loop {
        let current = fs::read_to_string(CLOCKSOURCE).map_err(ctx(CLOCKSOURCE))?;
        if clock_settled(&current) {
            return Ok(());
        }
        if waited >= CLOCK_SETTLE_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "L1's clocksource is still `{}` {} s after the job was due (want `tsc`)",
                    current.trim(),
                    CLOCK_SETTLE_LIMIT.as_secs()
                ),
            ));
        }
        std::thread::sleep(step);
        waited += step;
    }
}

/// Every regular file under `dir`, as (relative path, content), in a stable order.
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ty = e.file_type()?;
        if ty.is_dir() {
            collect(&e.path(), &rel, out)?;
        } else if ty.is_file() {
            out.push((rel, fs::read(e.path())?));
        }
    }
    Ok(())
}

fn send(files: &[(String, Vec<u8>)], code: i32) -> io::Result<()> {
    let tty = fs::OpenOptions::new()
        .write(true)
        .open(STREAM_TTY)
        .map_err(ctx(STREAM_TTY))?;
    let mut tty = BufWriter::new(tty);
    for (path, data) in files {
        stream::write_file(&mut tty, path, data)?;
    }
    stream::write_exit(&mut tty, code)?;
    tty.flush()?;
    // Wait until the UART has sent everything (a tty has no fsync).
    // SAFETY: tcdrain takes an open fd and no pointers.
    unsafe { libc::tcdrain(std::os::fd::AsRawFd::as_raw_fd(tty.get_ref())) };
    Ok(())
}

/// Names the path an I/O error is about.
fn ctx(what: &str) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn cstring(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

fn mount(src: &str, target: &str, fstype: &str) -> io::Result<()> {
    fs::create_dir_all(target)?;
    mount_flags(src, target, Some(fstype), 0)
}

/// mount(2) of `src` on `target` (a filesystem of type `fstype`, or none: a bind, a move).
fn mount_flags(
    src: &str,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let (src, target_c) = (cstring(src)?, cstring(target)?);
    let fstype = fstype.map(cstring).transpose()?;
    // SAFETY: all pointers are null or valid NUL-terminated strings that outlive the call;
    // data is null.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()),
            flags,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("mount {target}: {e}")));
    }
    Ok(())
}

/// The built-in job [`KVM_CHECK`]: opens L1's `/dev/kvm`, asks the API version and creates
/// (and drops) a VM, then measures how L1's clock counts work on two CPUs at once
/// ([`clock_check`]); writes what it saw to `/out/kvm-check.txt`. Exit 0 when KVM worked (the
/// clock's figures are for the host to judge).
fn kvm_check() -> io::Result<i32> {
    const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
    const KVM_CREATE_VM: libc::c_ulong = 0xAE01;
    let kvm = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(ctx("/dev/kvm"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: KVM_GET_API_VERSION takes no argument and only returns an integer.
    let version = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_GET_API_VERSION, 0) };
    // SAFETY: KVM_CREATE_VM takes the machine type by value (0) and returns a new fd or -1.
    let vm = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_CREATE_VM, 0) };
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let svm = cpuinfo.split_whitespace().any(|w| w == "svm");
    let clock = clock_check()?;
    fs::write(
        format!("{OUT_DIR}/kvm-check.txt"),
        format!(
            "api_version={version}\ncreate_vm={}\nsvm_flag={svm}\n{clock}",
            vm >= 0
        ),
    )?;
    if vm >= 0 {
        // SAFETY: vm is a file descriptor this function just got and owns.
        unsafe { libc::close(vm) };
    }
    Ok(if version == 12 && vm >= 0 { 0 } else { 1 })
}

/// How L1's clock counts parallel work (docs/virtual-clock.md, finding 8): the same busy loop
/// ([`truecold_nested::CLOCK_CHECK_ITERS`] iterations) timed on L1's CLOCK_MONOTONIC alone on
/// CPU 0, then on CPUs 0 and 1 at once. Under `-icount` QEMU runs every L1 CPU on one host
/// thread and charges each CPU's instructions to the one virtual clock, so the second time is
/// about twice the first: the two CPUs' work adds instead of overlapping. Returns the lines
/// `cpus_online=`, `clock_one_cpu_ns=`, `clock_two_cpus_ns=`.
fn clock_check() -> io::Result<String> {
    use std::time::Instant;
    let iters = truecold_nested::CLOCK_CHECK_ITERS;
    let spin = move || {
        let mut x = 0u64;
        for i in 0..iters {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        std::hint::black_box(x);
    };
    // SAFETY: sysconf takes an integer name and returns an integer.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let parallel = truecold_nested::parallel::ParallelClock::detect();
    let now = truecold_proto::measure::now_ns;
    pin(Some(0))?;
    let t = Instant::now();
    let m0 = now();
    spin();
    let m1 = now();
    let one = t.elapsed();
    let start = std::sync::Barrier::new(2);
    let t = Instant::now();
    let m2 = now();
    std::thread::scope(|s| -> io::Result<()> {
        let workers: Vec<_> = [0usize, 1]
            .into_iter()
            .map(|cpu| {
                let start = &start;
                s.spawn(move || -> io::Result<()> {
                    pin(Some(cpu))?;
                    start.wait();
                    spin();
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| io::Error::other("a clock-check thread panicked"))??;
        }
        Ok(())
    })?;
    let m3 = now();
    let two = t.elapsed();
    pin(None)?;
    let mut text = format!(
        "cpus_online={online}\nclock_one_cpu_ns={}\nclock_two_cpus_ns={}\n",
        one.as_nanos(),
        two.as_nanos()
    );
    // The same two spans on the parallel clock, where the L0 keeps one: about equal, since
    // the two CPUs' loops overlap there.
    if let Some(p) = parallel {
        let span = |a, b| p.duration_ns(a, b).map_err(io::Error::other);
        text.push_str(&format!(
            "parallel_one_cpu_ns={}\nparallel_two_cpus_ns={}\n",
            span(m0, m1)?,
            span(m2, m3)?
        ));
    }
    Ok(text)
}

/// Pins the calling thread to one CPU, or (None) lets it run on every CPU again.
fn pin(cpu: Option<usize>) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let cpus = match cpu {
        Some(c) => c..c + 1,
        None => 0..libc::CPU_SETSIZE as usize,
    };
    for c in cpus {
        // SAFETY: c < CPU_SETSIZE, the set's capacity.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: a valid set of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("sched_setaffinity({cpu:?}): {e}"),
        ));
    }
    Ok(())
}
