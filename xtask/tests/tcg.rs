//! Functional boots of the built guest (`out/guest`, or `$TRUECOLD_GUEST_DIR`) under QEMU
//! with software emulation (`-accel tcg`), QEMU devices standing in for the truecold ports:
//!
//! | port | stand-in |
//! |---|---|
//! | 0xf10 doorbell | `isa-debugcon` → file (one byte per phase) |
//! | 0xf11 challenge | `isa-debugcon,readback=<b>`: every `in` reads `<b>`, so the nonce is 16 × `<b>` |
//! | 0xf12 record | `isa-debugcon` → file (the lines) |
//! | 0xf13 exit | `isa-debug-exit`: QEMU exits with status `(code << 1) | 1` |
//!
//! Machine: `-M microvm` (no PCI, no ACPI in the guest, the MP table gives the CPUs). Its
//! firmware map (qboot + QEMU's E820, QEMU 7.2) for `-m M` up to 3 GiB is
//! `[0, 0x9fc00)` + `[1 MiB, M)` System RAM, so the guest must see exactly
//! `M - 1 MiB + 0x9fc00` bytes ([`microvm_ram`]); the mismatch boot cross-checks that figure
//! with what the guest reports. Its kernel's zones hold that RAM less T = 7168 (the zone rule,
//! [`assert_zones`]).
//!
//! The serial-transport boots (`serial_*`) drive the guest the way the bench drives every
//! engine: QEMU's 8250 is `-serial stdio` on pipes, the command line is
//! `truecold_proto::boot_cmdline::cmdline(SerialUse::Transport(engine), M, "")` with
//! `truecold.mem` = the `-m` size, and the host reads `TC1 ready`, writes a fresh nonce,
//! reads the reply and the record; the doorbell and exit stand-ins stay as above. Told
//! `qemu-microvm`, the guest must find exactly `Engine::QemuMicrovm.expected_firmware_ram(M, truecold_proto::kinds::RamLayout::AroundHole)`
//! (the same figure as [`microvm_ram`]).
//!
//! Prerequisites (the tests FAIL without them): `cargo run -p xtask -- guest --out out/guest`
//! and `apt-get install qemu-system-x86`.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use truecold_proto::boot_cmdline::{cmdline, SerialUse};
use truecold_proto::kinds::Engine;
use truecold_proto::limits::GuestMem;
use truecold_proto::{
    BootId, ErrorCode, GuestRecord, LineAssembler, Message, ProtoError, Reply, Workload, NONCE_LEN,
};

const MIB: u64 = 1 << 20;
/// Hang guard only (TCG boots take about a second here); not a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(180);

fn guest_dir() -> PathBuf {
    let dir = std::env::var_os("TRUECOLD_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| xtask::workspace_root().join("out/guest"));
    for f in ["vmlinux", "initramfs.cpio"] {
        assert!(
            dir.join(f).is_file(),
            "{} missing: build the guest first with `cargo run -p xtask -- guest --out out/guest` \
             (or point TRUECOLD_GUEST_DIR at a built guest)",
            dir.join(f).display()
        );
    }
    dir
}

/// RAM the guest's firmware map shows under `-M microvm -m <mib>` (mib ≤ 3072).
fn microvm_ram(mib: u64) -> u64 {
    assert!(
        mib <= 3072,
        "the formula covers RAM below the 3 GiB split only"
    );
    0x9fc00 + mib * MIB - MIB
}

struct Boot {
    status: Option<i32>,
    doorbell: Vec<u8>,
    lines: Vec<Message>,
    nonce: [u8; NONCE_LEN],
    console: String,
}

impl Boot {
    fn context(&self) -> String {
        format!(
            "exit status {:?}, doorbell {:?}, lines {:#?}\n--- console ---\n{}",
            self.status, self.doorbell, self.lines, self.console
        )
    }

    fn reply(&self) -> Option<&Reply> {
        self.lines.iter().find_map(|m| match m {
            Message::Reply(r) => Some(r),
            _ => None,
        })
    }

    fn record(&self) -> &GuestRecord {
        let recs: Vec<&GuestRecord> = self
            .lines
            .iter()
            .filter_map(|m| match m {
                Message::Record(r) => Some(r),
                _ => None,
            })
            .collect();
        assert_eq!(recs.len(), 1, "want exactly one record\n{}", self.context());
        recs[0]
    }
}

/// Boots the guest with `-m mib -smp cpus` and `truecold.mem=<mem>` plus `extra` on the
/// command line; returns what the stand-in devices saw.
fn boot(mib: u64, cpus: u32, mem: u64, extra: &str) -> Boot {
    let dir = guest_dir();
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n);
    let byte: u8 = rand::random();
    let append = format!("truecold.mem={mem} panic=-1 {extra}");
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-M",
        "microvm",
        "-accel",
        "tcg",
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
    ])
    .args(["-m", &mib.to_string(), "-smp", &cpus.to_string()])
    .arg("-kernel")
    .arg(dir.join("vmlinux"))
    .arg("-initrd")
    .arg(dir.join("initramfs.cpio"))
    .args(["-append", &append])
    .arg("-serial")
    .arg(format!("file:{}", p("console").display()))
    .arg("-chardev")
    .arg(format!("file,id=db,path={}", p("doorbell").display()))
    .args(["-device", "isa-debugcon,iobase=0xf10,chardev=db"])
    .args(["-chardev", "null,id=nl"])
    .args([
        "-device",
        &format!("isa-debugcon,iobase=0xf11,chardev=nl,readback={byte:#04x}"),
    ])
    .arg("-chardev")
    .arg(format!("file,id=rc,path={}", p("record").display()))
    .args(["-device", "isa-debugcon,iobase=0xf12,chardev=rc"])
    .args(["-device", "isa-debug-exit,iobase=0xf13,iosize=1"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("cannot start qemu-system-x86_64 ({e}): apt-get install qemu-system-x86")
    });
    let status = wait_guarded(&mut child);
    let read = |n: &str| std::fs::read(p(n)).unwrap_or_default();
    let console = String::from_utf8_lossy(&read("console")).into_owned();
    let raw = read("record");
    let lines = raw
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            Message::decode(l).unwrap_or_else(|e| {
                panic!(
                    "undecodable line {:?}: {e}\n{console}",
                    String::from_utf8_lossy(l)
                )
            })
        })
        .collect();
    let b = Boot {
        status,
        doorbell: read("doorbell"),
        lines,
        nonce: [byte; NONCE_LEN],
        console,
    };
    assert!(
        b.status.is_some(),
        "QEMU hung past the guard and was killed\n{}",
        b.context()
    );
    b
}

/// Waits for QEMU; kills it past [`HANG_GUARD`] and returns `None` then.
fn wait_guarded(child: &mut std::process::Child) -> Option<i32> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if t0.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn exit_status(code: ErrorCode) -> Option<i32> {
    Some(((code as i32) << 1) | 1)
}

/// The zone rule the guest checked, on its record: QEMU microvm's low RAM ends mid-page at
/// 0x9fc00, so the kernel's zones hold its firmware RAM less T = 7168 (page 0 and the 3 KiB of
/// page 0x9f) whatever engine the guest was told, MemTotal is the managed pages, and the
/// kernel keeps some of the present ones.
fn assert_zones(r: &GuestRecord, ctx: &str) {
    let t = Engine::QemuMicrovm.kernel_trim(truecold_proto::kinds::RamLayout::AroundHole);
    assert_eq!(t, 7168);
    assert_eq!(r.mem_present, r.mem_firmware_ram - t, "{ctx}");
    assert_eq!(r.mem_total, r.mem_managed, "{ctx}");
    assert!(
        0 < r.mem_managed && r.mem_managed < r.mem_present,
        "managed {} of {} present\n{ctx}",
        r.mem_managed,
        r.mem_present
    );
}

/// A healthy boot: doorbells, reply bound to the nonce and boot id, memory verified, BENCH_OK.
fn assert_ready(b: &Boot, mib: u64, cpus: u32) {
    let ctx = b.context();
    assert_eq!(b.status, exit_status(ErrorCode::Ok), "{ctx}");
    assert_eq!(b.doorbell, [1, 2], "InitStart then Ready\n{ctx}");
    assert_eq!(b.lines.len(), 2, "{ctx}");
    let reply = b.reply().unwrap_or_else(|| panic!("no reply line\n{ctx}"));
    assert!(
        matches!(b.lines[0], Message::Reply(_)),
        "reply comes first\n{ctx}"
    );
    assert!(reply.verifies(&b.nonce), "reply MAC does not verify\n{ctx}");
    let mut other = b.nonce;
    other[0] ^= 1;
    assert!(!reply.verifies(&other), "MAC must bind the nonce\n{ctx}");
    let r = b.record();
    assert_eq!(r.code, ErrorCode::Ok, "{ctx}");
    assert_eq!(r.workload, Workload::BenchOk, "{ctx}");
    assert_eq!(r.boot_id, Some(reply.boot_id), "{ctx}");
    let ram = microvm_ram(mib);
    assert_eq!(r.mem_configured, ram, "{ctx}");
    assert_eq!(r.mem_firmware_ram, ram, "{ctx}");
    assert_zones(r, &ctx);
    assert_eq!(r.mem_probe, truecold_proto::cmdline::DEFAULT_PROBE, "{ctx}");
    assert_eq!(r.cpus, cpus, "{ctx}");
    assert!(r.t_init_ns > 0, "{ctx}");
    assert!(
        r.t_init_ns <= r.t_ready_ns && r.t_ready_ns <= r.t_reply_ns,
        "{ctx}"
    );
    assert!(r.t_reply_ns <= r.t_record_ns, "{ctx}");
    eprintln!(
        "boot {mib} MiB / {cpus} vCPU: init at {} ns, ready at {} ns of guest uptime (TCG, informational)",
        r.t_init_ns, r.t_ready_ns
    );
}

#[test]
fn ready_at_256_mib_console_off() {
    // The production command line: no console, no UARTs probed.
    let b = boot(256, 1, microvm_ram(256), "8250.nr_uarts=0");
    assert_ready(&b, 256, 1);
}

#[test]
fn ready_at_2_gib_with_2_vcpus() {
    let b = boot(2048, 2, microvm_ram(2048), "console=ttyS0");
    assert_ready(&b, 2048, 2);
}

#[test]
fn announced_ram_the_guest_lacks_is_mem_firmware_mismatch() {
    let ram = microvm_ram(256);
    let b = boot(256, 1, ram + 4096, "console=ttyS0");
    let ctx = b.context();
    assert_eq!(
        b.status,
        exit_status(ErrorCode::MemFirmwareMismatch),
        "{ctx}"
    );
    assert_eq!(
        b.doorbell,
        [1],
        "no Ready doorbell on a failed check\n{ctx}"
    );
    assert!(b.reply().is_none(), "no reply on a failed check\n{ctx}");
    let r = b.record();
    assert_eq!(r.code, ErrorCode::MemFirmwareMismatch, "{ctx}");
    assert_eq!(r.workload, Workload::NotRun, "{ctx}");
    assert_eq!(r.mem_configured, ram + 4096, "{ctx}");
    assert_eq!(
        r.mem_firmware_ram, ram,
        "the guest's own figure matches the microvm layout\n{ctx}"
    );
    assert!(r.boot_id.is_some(), "{ctx}");
    assert!(
        b.console.contains("mem_firmware_mismatch"),
        "error chain on the console\n{ctx}"
    );
}

#[test]
fn malformed_truecold_parameter_is_cmdline_error() {
    // `boot` passes a valid truecold.mem; a second, malformed one makes the line invalid.
    let b = boot(256, 1, microvm_ram(256), "console=ttyS0 truecold.mem=12x");
    let ctx = b.context();
    assert_eq!(b.status, exit_status(ErrorCode::Cmdline), "{ctx}");
    assert_eq!(b.doorbell, [1], "{ctx}");
    let r = b.record();
    assert_eq!(r.code, ErrorCode::Cmdline, "{ctx}");
    assert_eq!(r.workload, Workload::NotRun, "{ctx}");
}

/// The nested-host (L1) kernel in `out/l1` (or `$TRUECOLD_L1_DIR`) boots as the nested
/// harness boots it (`-M q35 -cpu EPYC,+svm,+npt`, TCG) and brings up KVM with nested SVM
/// and nested paging. PID 1 is truecold-init with an impossible `truecold.mem`, so it stops
/// the VM through the exit port with the memory-mismatch code. The TUN driver registers (the
/// parity contract's taps).
#[test]
fn l1_kernel_brings_up_nested_kvm_amd() {
    let dir = std::env::var_os("TRUECOLD_L1_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| xtask::workspace_root().join("out/l1"));
    let kernel = dir.join("bzImage");
    assert!(
        kernel.is_file(),
        "{} missing: build it with `cargo run -p xtask -- l1 --out out/l1` \
         (or point TRUECOLD_L1_DIR at a built one)",
        kernel.display()
    );
    let initrd = guest_dir().join("initramfs.cpio");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("console");
    let mut child = Command::new("qemu-system-x86_64")
        .args([
            "-M",
            "q35",
            "-accel",
            "tcg",
            "-cpu",
            "EPYC,+svm,+npt",
            "-m",
            "1024",
            "-smp",
            "2",
        ])
        .args(["-nodefaults", "-display", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", "console=ttyS0 truecold.mem=1 panic=-1"])
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .args(["-device", "isa-debug-exit,iobase=0xf13,iosize=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start qemu-system-x86_64 ({e}): apt-get install qemu-system-x86")
        });
    let status = wait_guarded(&mut child);
    let console = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    assert_eq!(
        status,
        exit_status(ErrorCode::MemFirmwareMismatch),
        "{console}"
    );
    for want in [
        "kvm_amd: Nested Virtualization enabled",
        "kvm_amd: Nested Paging enabled",
        // CONFIG_TUN: the parity contract's VMM creates its taps in L1.
        "tun: Universal TUN/TAP device driver",
        "Run /init",
    ] {
        assert!(
            console.contains(want),
            "`{want}` not on the L1 console:\n{console}"
        );
    }
}

/// What the host saw of one serial-transport boot.
struct SerialBoot {
    status: Option<i32>,
    doorbell: Vec<u8>,
    /// Bytes on the record port stand-in (the serial transport must not use it).
    record_port: Vec<u8>,
    /// The `TC1` lines on the guest's ttyS0, decoded, in order.
    lines: Vec<Message>,
    /// Lines on ttyS0 that do not start with `TC1 `. ttyS0 is also the kernel's default
    /// console here (no VT, no `console=`), so PID 1's stderr lands there: with `loglevel=0`
    /// a healthy boot writes none, a failing one its error chain.
    noise: Vec<String>,
    /// What the host wrote after the ready line (none when no ready line came).
    written: Option<Vec<u8>>,
    qemu_stderr: String,
}

impl SerialBoot {
    fn context(&self) -> String {
        format!(
            "exit status {:?}, doorbell {:?}, record port {:?}, written {:?}, lines {:#?}\n\
             --- serial noise ---\n{}\n--- qemu stderr ---\n{}",
            self.status,
            self.doorbell,
            String::from_utf8_lossy(&self.record_port),
            self.written.as_deref().map(String::from_utf8_lossy),
            self.lines,
            self.noise.join("\n"),
            self.qemu_stderr
        )
    }
}

/// Boots the guest under `-M microvm -m mib` told `truecold.transport=serial
/// truecold.engine=<engine>` (the bench's command line), with ttyS0 on QEMU's stdio pipes.
/// When the `TC1 ready` line arrives, writes `answer(&ready)` to the guest's serial input.
/// Returns when QEMU has exited (or was killed past [`HANG_GUARD`]).
fn serial_boot(mib: u64, engine: Engine, answer: impl FnOnce(&Message) -> Vec<u8>) -> SerialBoot {
    serial_boot_with(mib, engine, &Extra::default(), answer)
}

/// What a boot adds to [`serial_boot`]'s: machine options after `microvm`, another kernel
/// (`None`: the base `vmlinux`), words for the guest's command line, arguments for QEMU.
#[derive(Default)]
struct Extra {
    machine: &'static str,
    kernel: Option<PathBuf>,
    cmdline: String,
    qemu: Vec<String>,
}

/// [`serial_boot`] with [`Extra`].
fn serial_boot_with(
    mib: u64,
    engine: Engine,
    extra: &Extra,
    answer: impl FnOnce(&Message) -> Vec<u8>,
) -> SerialBoot {
    let dir = guest_dir();
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n);
    let mem = GuestMem::from_mib(mib).expect("a size within the limits");
    let append = cmdline(SerialUse::Transport(engine), mem, &extra.cmdline).unwrap();
    let kernel = extra.kernel.clone().unwrap_or_else(|| dir.join("vmlinux"));
    let machine = format!("microvm{}", extra.machine);
    let mut child = Command::new("qemu-system-x86_64")
        .args(["-M", &machine, "-accel", "tcg", "-nodefaults"])
        .args(["-display", "none", "-no-reboot"])
        .args(["-m", &mib.to_string(), "-smp", "1"])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(dir.join("initramfs.cpio"))
        .args(["-append", &append, "-serial", "stdio"])
        .args(&extra.qemu)
        .arg("-chardev")
        .arg(format!("file,id=db,path={}", p("doorbell").display()))
        .args(["-device", "isa-debugcon,iobase=0xf10,chardev=db"])
        .arg("-chardev")
        .arg(format!("file,id=rc,path={}", p("record").display()))
        .args(["-device", "isa-debugcon,iobase=0xf12,chardev=rc"])
        .args(["-device", "isa-debug-exit,iobase=0xf13,iosize=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(p("stderr")).unwrap())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start qemu-system-x86_64 ({e}): apt-get install qemu-system-x86")
        });
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // The serial output, split into bounded lines on a thread; the channel closes at EOF.
    let (tx, rx) = mpsc::channel::<Result<Vec<u8>, ProtoError>>();
    let reader = std::thread::spawn(move || {
        let mut asm = LineAssembler::default();
        let mut buf = [0u8; 4096];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    for line in asm.push(&buf[..n]) {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    let guard = Instant::now() + HANG_GUARD;
    let (mut lines, mut noise, mut written) = (Vec::new(), Vec::new(), None);
    let mut answer = Some(answer);
    let mut hung = false;
    loop {
        match rx.recv_timeout(guard.saturating_duration_since(Instant::now())) {
            Ok(Ok(line)) if line.starts_with(b"TC1 ") => {
                let m = Message::decode(&line).unwrap_or_else(|e| {
                    panic!(
                        "undecodable TC1 line {:?}: {e}",
                        String::from_utf8_lossy(&line)
                    )
                });
                if let (Message::Ready { .. }, Some(f)) = (&m, answer.take()) {
                    let bytes = f(&m);
                    stdin.write_all(&bytes).unwrap();
                    stdin.flush().unwrap();
                    written = Some(bytes);
                }
                lines.push(m);
            }
            Ok(Ok(line)) => noise.push(String::from_utf8_lossy(&line).into_owned()),
            Ok(Err(e)) => panic!("serial line: {e}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                hung = true;
                break;
            }
        }
    }
    if hung {
        let _ = child.kill();
    }
    let status = wait_guarded(&mut child);
    drop(stdin);
    let _ = reader.join();
    let read = |n: &str| std::fs::read(p(n)).unwrap_or_default();
    let b = SerialBoot {
        status: if hung { None } else { status },
        doorbell: read("doorbell"),
        record_port: read("record"),
        lines,
        noise,
        written,
        qemu_stderr: String::from_utf8_lossy(&read("stderr")).into_owned(),
    };
    assert!(
        b.status.is_some(),
        "QEMU hung past the guard and was killed\n{}",
        b.context()
    );
    b
}

#[test]
fn serial_transport_ready_nonce_reply_record() {
    let mib = 256;
    let nonce: [u8; NONCE_LEN] = rand::random();
    let b = serial_boot(mib, Engine::QemuMicrovm, |_| {
        Message::Nonce(nonce).encode().into_bytes()
    });
    let ctx = b.context();
    assert_eq!(b.status, exit_status(ErrorCode::Ok), "{ctx}");
    assert_eq!(b.doorbell, [1, 2], "InitStart then Ready\n{ctx}");
    assert!(b.record_port.is_empty(), "nothing on the ports\n{ctx}");
    assert!(b.written.is_some(), "the ready line came\n{ctx}");
    assert!(b.noise.is_empty(), "only TC1 lines on ttyS0\n{ctx}");
    let [Message::Ready { boot_id }, Message::Reply(reply), Message::Record(r)] = &b.lines[..]
    else {
        panic!("want exactly ready, reply, record on ttyS0\n{ctx}");
    };
    assert_eq!(reply.boot_id, *boot_id, "{ctx}");
    assert!(
        reply.verifies(&nonce),
        "reply binding does not verify\n{ctx}"
    );
    let mut other = nonce;
    other[15] ^= 0x80;
    assert!(
        !reply.verifies(&other),
        "the binding must bind the nonce\n{ctx}"
    );
    assert_eq!(r.code, ErrorCode::Ok, "{ctx}");
    assert_eq!(r.workload, Workload::BenchOk, "{ctx}");
    assert_eq!(r.boot_id, Some(*boot_id), "{ctx}");
    let ram = Engine::QemuMicrovm
        .expected_firmware_ram(mib * MIB, truecold_proto::kinds::RamLayout::AroundHole);
    assert_eq!(ram, microvm_ram(mib), "the engine's hole is QEMU's layout");
    assert_eq!(r.mem_configured, mib * MIB, "{ctx}");
    assert_eq!(r.mem_firmware_ram, ram, "{ctx}");
    assert_zones(r, &ctx);
    assert_eq!(r.mem_probe, truecold_proto::cmdline::DEFAULT_PROBE, "{ctx}");
    assert_eq!(r.cpus, 1, "{ctx}");
    assert!(
        0 < r.t_init_ns
            && r.t_init_ns <= r.t_ready_ns
            && r.t_ready_ns <= r.t_reply_ns
            && r.t_reply_ns <= r.t_record_ns,
        "{ctx}"
    );
    eprintln!(
        "serial boot {mib} MiB: ready doorbell at {} ns, reply sent at {} ns of guest uptime \
         (TCG, informational); {} noise line(s)",
        r.t_ready_ns,
        r.t_reply_ns,
        b.noise.len()
    );
}

#[test]
fn serial_transport_told_another_engine_is_mem_firmware_mismatch() {
    // QEMU's layout leaves [0x9fc00, 1 MiB) out of RAM; Cloud Hypervisor's rule expects
    // [0xa0000, 1 MiB): 1 KiB apart, and nothing is relaxed.
    let mib = 256;
    let b = serial_boot(mib, Engine::CloudHypervisor, |_| {
        panic!("no ready line may come after a failed memory check")
    });
    let ctx = b.context();
    assert_eq!(
        b.status,
        exit_status(ErrorCode::MemFirmwareMismatch),
        "{ctx}"
    );
    assert_eq!(
        b.doorbell,
        [1],
        "no Ready doorbell on a failed check\n{ctx}"
    );
    assert!(b.record_port.is_empty(), "{ctx}");
    let [Message::Record(r)] = &b.lines[..] else {
        panic!("want only the record on ttyS0\n{ctx}");
    };
    assert_eq!(r.code, ErrorCode::MemFirmwareMismatch, "{ctx}");
    assert_eq!(r.workload, Workload::NotRun, "{ctx}");
    assert!(r.boot_id.is_some(), "{ctx}");
    assert_eq!(r.mem_configured, mib * MIB, "{ctx}");
    let found = Engine::QemuMicrovm
        .expected_firmware_ram(mib * MIB, truecold_proto::kinds::RamLayout::AroundHole);
    assert_eq!(r.mem_firmware_ram, found, "the guest's own figure\n{ctx}");
    assert_eq!(
        Engine::CloudHypervisor
            .expected_firmware_ram(mib * MIB, truecold_proto::kinds::RamLayout::AroundHole)
            - found,
        1024,
        "{ctx}"
    );
    assert_eq!((r.mem_total, r.mem_probe, r.t_ready_ns), (0, 0, 0), "{ctx}");
    let expected = format!(
        "expected {}",
        Engine::CloudHypervisor
            .expected_firmware_ram(mib * MIB, truecold_proto::kinds::RamLayout::AroundHole)
    );
    assert!(
        b.noise
            .iter()
            .any(|l| l.contains("mem_firmware_mismatch") && l.contains(&expected)),
        "the error chain with the figures, on stderr = ttyS0\n{ctx}"
    );
}

#[test]
fn serial_transport_garbage_instead_of_the_nonce_is_bad_nonce() {
    let mib = 256;
    let b = serial_boot(mib, Engine::QemuMicrovm, |_| {
        b"garbage, not a TC1 line\n".to_vec()
    });
    let ctx = b.context();
    assert_eq!(b.status, exit_status(ErrorCode::BadNonce), "{ctx}");
    assert_eq!(b.doorbell, [1, 2], "{ctx}");
    assert!(b.record_port.is_empty(), "{ctx}");
    let [Message::Ready { boot_id }, Message::Record(r)] = &b.lines[..] else {
        panic!("want ready then the record, no reply\n{ctx}");
    };
    assert_eq!(r.code, ErrorCode::BadNonce, "{ctx}");
    assert_eq!(r.workload, Workload::NotRun, "{ctx}");
    assert_eq!(r.boot_id, Some(*boot_id), "{ctx}");
    assert_eq!(
        r.mem_firmware_ram,
        Engine::QemuMicrovm
            .expected_firmware_ram(mib * MIB, truecold_proto::kinds::RamLayout::AroundHole),
        "{ctx}"
    );
    assert_eq!(r.t_reply_ns, 0, "no reply was sent\n{ctx}");
    assert!(
        b.noise.iter().any(|l| l.contains("bad_nonce")),
        "the error chain on stderr = ttyS0\n{ctx}"
    );
}

// --- The parity contract's guest side (kernel-config `parity`, `truecold.workspace=1`,
// `truecold.net`), under the serial transport: QEMU 7.2 has no vsock here (no vhost-vsock),
// so the agent channel is ttyS0, and everything else is the parity path itself
// (guest-init/README.md, "Parity"). QEMU's microvm (`acpi=off`) adds the
// `virtio_mmio.device=` words for its virtio-mmio devices to the command line; its user
// network gives the guest 10.0.2.15/24 and forwards a host port to the guest's TCP_PORT.

/// The guest's address on QEMU's user network.
const SLIRP_GUEST: &str = "eth0,10.0.2.15/24";

/// The parity kernel (`out/guest/parity/vmlinux`) and a private copy of the workspace image
/// (`out/guest/workspace.img`) in `tmp`, patched by `patch`.
fn parity_inputs(tmp: &Path, patch: impl FnOnce(&mut Vec<u8>)) -> (PathBuf, PathBuf) {
    let dir = guest_dir();
    let kernel = dir.join("parity/vmlinux");
    let image = dir.join(xtask::workspace::IMAGE);
    for f in [&kernel, &image] {
        assert!(
            f.is_file(),
            "{} missing: build the guest with `cargo run -p xtask -- guest --out out/guest`",
            f.display()
        );
    }
    let mut bytes = std::fs::read(&image).unwrap();
    patch(&mut bytes);
    let copy = tmp.join("workspace.img");
    std::fs::write(&copy, &bytes).unwrap();
    (kernel, copy)
}

/// QEMU arguments: the image as a virtio-blk-device, a virtio-net-device on user networking
/// forwarding 127.0.0.1:`port` to the guest's TCP_PORT.
fn parity_qemu(image: &Path, port: u16) -> Vec<String> {
    vec![
        "-drive".into(),
        format!("file={},if=none,id=ws,format=raw", image.display()),
        "-device".into(),
        "virtio-blk-device,drive=ws".into(),
        "-netdev".into(),
        format!(
            "user,id=n,hostfwd=tcp:127.0.0.1:{port}-:{}",
            truecold_proto::parity::TCP_PORT
        ),
        "-device".into(),
        "virtio-net-device,netdev=n".into(),
    ]
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The host's side of the TCP proof, on a thread: connect, write the nonce line, read
/// everything the guest sends until it closes.
fn tcp_host(
    port: u16,
    nonce: [u8; NONCE_LEN],
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
        s.set_read_timeout(Some(HANG_GUARD))?;
        s.write_all(Message::Nonce(nonce).encode().as_bytes())?;
        let mut back = Vec::new();
        s.read_to_end(&mut back)?;
        Ok(back)
    })
}

type TcpResult = Arc<Mutex<Option<std::thread::JoinHandle<std::io::Result<Vec<u8>>>>>>;

/// Boots the parity guest; on `ready`, answers the serial nonce and (when `tcp_nonce`)
/// starts the host's TCP round trip. Returns the boot and what the guest sent over TCP.
fn parity_boot(
    image: &Path,
    kernel: PathBuf,
    serial_nonce: [u8; NONCE_LEN],
    tcp_nonce: Option<[u8; NONCE_LEN]>,
) -> (SerialBoot, Option<Vec<u8>>) {
    let port = free_port();
    let extra = Extra {
        // With ACPI, QEMU 7.2 puts the virtio-mmio IRQs on a second IOAPIC that the MP table
        // does not describe and leaves `virtio_mmio.device=` off the command line; without
        // it, the devices sit on IRQs 5.. of the first and are on the command line.
        machine: ",acpi=off",
        kernel: Some(kernel),
        cmdline: format!(
            "{}=1 {}={SLIRP_GUEST}",
            truecold_proto::cmdline::WORKSPACE,
            truecold_proto::cmdline::NET
        ),
        qemu: parity_qemu(image, port),
    };
    let tcp: TcpResult = Arc::default();
    let tcp2 = Arc::clone(&tcp);
    let b = serial_boot_with(256, Engine::QemuMicrovm, &extra, move |_| {
        if let Some(n) = tcp_nonce {
            *tcp2.lock().unwrap() = Some(tcp_host(port, n));
        }
        Message::Nonce(serial_nonce).encode().into_bytes()
    });
    let handle = tcp.lock().unwrap().take();
    let back = handle.map(|h| {
        h.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("host TCP side: {e}\n{}", b.context()))
    });
    (b, back)
}

fn ready_id(b: &SerialBoot) -> BootId {
    match b.lines.first() {
        Some(Message::Ready { boot_id }) => *boot_id,
        _ => panic!("no ready line first\n{}", b.context()),
    }
}

/// The parity guest under TCG: the workspace mounts and its seed verifies, eth0 gets
/// 10.0.2.15/24, the host's TCP nonce comes back bound to the serial ready's boot id through
/// QEMU's port forward, both workloads run (the workspace one on the virtio-blk disk), and
/// the record says so.
#[test]
fn parity_workspace_eth0_and_tcp_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let (kernel, image) = parity_inputs(tmp.path(), |_| {});
    let before = std::fs::read(&image).unwrap();
    let (serial_nonce, tcp_nonce): ([u8; NONCE_LEN], [u8; NONCE_LEN]) =
        (rand::random(), rand::random());
    let (b, back) = parity_boot(&image, kernel, serial_nonce, Some(tcp_nonce));
    let ctx = b.context();
    assert_eq!(b.status, exit_status(ErrorCode::Ok), "{ctx}");
    assert_eq!(b.doorbell, [1, 2], "{ctx}");
    assert!(b.noise.is_empty(), "only TC1 lines on ttyS0\n{ctx}");
    let boot_id = ready_id(&b);
    let [Message::Ready { .. }, Message::Reply(reply), Message::Record(r)] = &b.lines[..] else {
        panic!("want exactly ready, reply, record on ttyS0\n{ctx}");
    };
    assert!(
        reply.verifies(&serial_nonce) && reply.boot_id == boot_id,
        "{ctx}"
    );
    let back = back.expect("the host's TCP side ran");
    let tcp_reply = match Message::decode(&back) {
        Ok(Message::Reply(r)) => r,
        other => panic!(
            "the guest's TCP answer {:?} is not a reply ({other:?})\n{ctx}",
            String::from_utf8_lossy(&back)
        ),
    };
    assert_eq!(
        back.iter().filter(|&&c| c == b'\n').count(),
        1,
        "one line over TCP"
    );
    assert!(
        tcp_reply.verifies(&tcp_nonce),
        "TCP reply bound to the TCP nonce\n{ctx}"
    );
    assert!(!tcp_reply.verifies(&serial_nonce), "{ctx}");
    assert_eq!(
        tcp_reply.boot_id, boot_id,
        "same boot id on both channels\n{ctx}"
    );
    assert_eq!(r.code, ErrorCode::Ok, "{ctx}");
    assert_eq!(r.workload, Workload::BenchOk, "{ctx}");
    assert_eq!(r.boot_id, Some(boot_id), "{ctx}");
    assert!(
        r.t_ready_ns <= r.t_reply_ns && r.t_reply_ns <= r.t_record_ns,
        "{ctx}"
    );
    // The guest wrote its probe file to the disk and deleted it: the image changed (journal,
    // inode and block bitmaps), and the seed is still there.
    let after = std::fs::read(&image).unwrap();
    assert_ne!(
        after, before,
        "the workspace workload wrote to the disk\n{ctx}"
    );
    assert!(
        after
            .windows(truecold_proto::parity::WORKSPACE_SEED.len())
            .any(|w| w == truecold_proto::parity::WORKSPACE_SEED),
        "{ctx}"
    );
}

/// A workspace whose seed file holds other bytes is `workspace_mount`: no Ready, no reply.
#[test]
fn parity_wrong_seed_is_workspace_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = truecold_proto::parity::WORKSPACE_SEED;
    let (kernel, image) = parity_inputs(tmp.path(), |bytes| {
        let at = bytes
            .windows(seed.len())
            .position(|w| w == seed)
            .expect("the seed's bytes are in the image");
        // File data has no checksum in ext4: the filesystem stays valid, the seed does not.
        bytes[at] ^= 0x20;
    });
    let (b, back) = parity_boot(&image, kernel, rand::random(), None);
    let ctx = b.context();
    assert!(back.is_none());
    assert_eq!(b.status, exit_status(ErrorCode::WorkspaceMount), "{ctx}");
    assert_eq!(b.doorbell, [1], "no Ready after a failed workspace\n{ctx}");
    let [Message::Record(r)] = &b.lines[..] else {
        panic!("want only the record\n{ctx}");
    };
    assert_eq!(r.code, ErrorCode::WorkspaceMount, "{ctx}");
    assert_eq!(r.workload, Workload::NotRun, "{ctx}");
    assert!(
        b.noise
            .iter()
            .any(|l| l.contains("workspace_mount") && l.contains("seed")),
        "{ctx}"
    );
}

/// A host that never connects over TCP: after the serial reply the guest waits its bounded
/// 10 s (`truecold_init::exchange::TCP_WAIT`) and reports `tcp`.
#[test]
fn parity_no_tcp_connection_is_tcp_after_the_bounded_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let (kernel, image) = parity_inputs(tmp.path(), |_| {});
    let serial_nonce: [u8; NONCE_LEN] = rand::random();
    let t0 = Instant::now();
    let (b, _) = parity_boot(&image, kernel, serial_nonce, None);
    let ctx = b.context();
    assert_eq!(b.status, exit_status(ErrorCode::Tcp), "{ctx}");
    assert_eq!(b.doorbell, [1, 2], "{ctx}");
    let [Message::Ready { boot_id }, Message::Reply(reply), Message::Record(r)] = &b.lines[..]
    else {
        panic!("want ready, reply, record\n{ctx}");
    };
    assert!(
        reply.verifies(&serial_nonce) && reply.boot_id == *boot_id,
        "{ctx}"
    );
    assert_eq!(r.code, ErrorCode::Tcp, "{ctx}");
    assert_eq!(r.workload, Workload::NotRun, "{ctx}");
    assert!(
        t0.elapsed() >= truecold_init::exchange::TCP_WAIT,
        "the guest waited its bound\n{ctx}"
    );
    assert!(
        b.noise
            .iter()
            .any(|l| l.contains(&format!("{} failed", ErrorCode::Tcp))
                && l.contains("no connection")),
        "{ctx}"
    );
}
