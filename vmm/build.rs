//! Builds the probe guest (vmm/probe/probe.S) with the system's GNU `as` and `ld` into
//! `$OUT_DIR/probe.elf` (PVH), a variant that never rings, `$OUT_DIR/probe-silent.elf`, and
//! one without the PVH note entered through the 64-bit boot protocol, `probe-linux64.elf`, one
//! that touches a byte per GiB instead of per 2 MiB, `probe-sparse.elf`, and the hostile guest of `probe/hostile.S`, `probe-hostile.elf` (vmm/tests/hostile.rs).
use std::path::Path;
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("cannot run {cmd:?}: {e} (install binutils: apt-get install binutils)")
    });
    assert!(status.success(), "{cmd:?} failed with {status}");
}

fn build(out: &Path, name: &str, defsyms: &[&str], entry: &str) {
    let obj = out.join(format!("{name}.o"));
    let elf = out.join(format!("{name}.elf"));
    let mut asm = Command::new("as");
    asm.arg("--64").args(["-I", "probe"]);
    for d in defsyms {
        asm.arg("--defsym").arg(d);
    }
    asm.arg("-o").arg(&obj).arg("probe/probe.S");
    run(&mut asm);
    run(Command::new("ld")
        .args([
            "-nostdlib",
            "-static",
            "-z",
            "max-page-size=4096",
            "--no-warn-rwx-segments",
        ])
        .args(["--build-id=none", "-e", entry, "-T", "probe/probe.ld", "-o"])
        .arg(&elf)
        .arg(&obj));
}

fn main() {
    println!("cargo:rerun-if-changed=probe/probe.S");
    println!("cargo:rerun-if-changed=probe/probe.ld");
    println!("cargo:rerun-if-changed=probe/hostile.S");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out);
    build(out, "probe", &[], "pvh_start32");
    build(out, "probe-silent", &["SILENT=1"], "pvh_start32");
    build(out, "probe-linux64", &["LINUX64=1"], "start64");
    build(out, "probe-sparse", &["SPARSE=1"], "pvh_start32");
    build(out, "probe-hostile", &["HOSTILE=1"], "pvh_start32");
}
