//! `truecold-l1`: runs one command inside the nested harness's L1 (QEMU TCG, emulated SVM,
//! real KVM in L1) and brings back what it wrote under `/out`. For experiments and campaigns
//! that `truecold run --nested` does not cover, e.g. engines side by side:
//!
//! ```sh
//! truecold-l1 --engine firecracker --out /tmp/x -- /bin/truecold-engines \
//!   --engine truecold=/bin/truecold-vmm --engine firecracker=/bin/firecracker \
//!   --kernel /guest/vmlinux --initramfs /guest/platform-initramfs.cpio --vcpus 2 --console
//! ```
//!
//! L1 holds `/bin/truecold-vmm`, `/bin/truecold`, `/bin/truecold-engines`, `/guest/*` and,
//! per `--engine`, the peer engines at [`truecold_nested::engine_l1_path`] (`/bin/firecracker`,
//! `/bin/cloud-hypervisor`, `/usr/bin/qemu-system-x86_64` with its libraries and firmware).
//! Time inside L1 is QEMU's virtual clock.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;
use truecold_nested::{
    engine_files, run_l1, write_initramfs, Engine, EngineBinaries, HarnessFacts, Job, L0Qemu,
    L1File, L1Run, Layout, NestedError,
};

#[derive(Parser)]
#[command(
    name = "truecold-l1",
    about = "Run one command inside the nested harness's L1"
)]
struct Cli {
    /// Put this peer engine into L1 (repeatable): firecracker, cloud-hypervisor, qemu-microvm.
    #[arg(long = "engine", value_parser = Engine::parse)]
    engines: Vec<Engine>,
    /// Firecracker binary (else $TRUECOLD_FIRECRACKER, else ../shared/peers/bin/).
    #[arg(long)]
    firecracker: Option<PathBuf>,
    /// Cloud Hypervisor binary (else $TRUECOLD_CLOUD_HYPERVISOR, else ../shared/peers/bin/).
    #[arg(long)]
    cloud_hypervisor: Option<PathBuf>,
    /// QEMU binary (else $TRUECOLD_QEMU, else PATH).
    #[arg(long)]
    qemu: Option<PathBuf>,
    /// Extra file for L1: `DEST=SRC` (DEST relative, e.g. bin/old-truecold-vmm).
    #[arg(long = "file")]
    files: Vec<String>,
    #[arg(long, default_value_t = 2048)]
    mem_mib: u32,
    /// 2 MiB hugetlb pages L1 reserves at boot (`hugepages=N`, out of --mem-mib).
    #[arg(long, default_value_t = 0)]
    hugepages_2m: u64,
    /// L1's transparent-huge-page mode (always, madvise, never); default: madvise.
    #[arg(long, value_parser = truecold_nested::L1Thp::parse)]
    thp: Option<truecold_nested::L1Thp>,
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    #[arg(long, default_value_t = 3600)]
    timeout_s: u64,
    /// L1's QEMU `-seed` (every guest-visible random number of the run is drawn from it):
    /// decimal or 0x hexadecimal, as `truecold --seed`.
    #[arg(long, default_value_t = truecold_nested::DEFAULT_L1_SEED, value_parser = truecold_proto::seed::parse)]
    seed: u64,
    /// Send the command's stdout to this file (under the output directory) instead of L1's
    /// console.
    #[arg(long)]
    stdout: Option<String>,
    /// Receives L1's files, console.log and stream.log.
    #[arg(long)]
    out: PathBuf,
    /// The command (absolute path inside L1) and its arguments.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(code) => std::process::ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("truecold-l1: {}", truecold_proto::measure::error_chain(&*e));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<i32, Box<dyn std::error::Error>> {
    let layout = Layout::discover();
    layout.check()?;
    let mut files = layout.l1_files();
    let bins = EngineBinaries::locate(
        &cli.engines,
        cli.firecracker.as_deref(),
        cli.cloud_hypervisor.as_deref(),
        cli.qemu.as_deref(),
    )?;
    files.extend(engine_files(&cli.engines, &bins)?);
    for f in &cli.files {
        let (dest, src) = f
            .split_once('=')
            .ok_or_else(|| format!("--file `{f}`: want DEST=SRC"))?;
        files.push(L1File {
            dest: dest.into(),
            src: src.into(),
            executable: true,
        });
    }
    std::fs::create_dir_all(&cli.out)?;
    let initramfs = cli.out.join("l1.cpio");
    let job = Job {
        argv: cli.argv.clone(),
        stdout: cli
            .stdout
            .as_ref()
            .map(|f| format!("{}/{f}", truecold_nested::OUT_DIR)),
        env: truecold_nested::forwarded_env(),
    };
    let l0 = L0Qemu::locate()?;
    let facts =
        HarnessFacts::probe(&l0, &layout.l1_kernel, cli.seed).map_err(NestedError::Facts)?;
    write_initramfs(&initramfs, &layout.l1_init, &job, &facts, &files)?;
    let outcome = run_l1(&L1Run {
        l0,
        kernel: layout.l1_kernel.clone(),
        initramfs: initramfs.clone(),
        mem_mib: cli.mem_mib,
        hugepages_2m: cli.hugepages_2m,
        thp: cli.thp,
        cpus: cli.cpus,
        timeout: Duration::from_secs(cli.timeout_s),
        workdir: cli.out.clone(),
        seed: cli.seed,
    })?;
    std::fs::remove_file(&initramfs)?;
    for (name, data) in &outcome.files {
        let path = cli.out.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, data)?;
    }
    eprintln!(
        "truecold-l1: job exit {}, {} file(s) in {}, {:.0} s wall (emulated)",
        outcome.job_exit,
        outcome.files.len(),
        cli.out.display(),
        outcome.wall.as_secs_f64()
    );
    Ok(outcome.job_exit)
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::Parser;

    #[test]
    fn seed_reads_decimal_or_hex() {
        let seed = |v: &str| {
            Cli::try_parse_from(["x", "--out", "o", "--seed", v, "--", "true"]).map(|c| c.seed)
        };
        assert_eq!(seed("0x10").ok(), Some(16));
        assert_eq!(seed("16").ok(), Some(16));
        assert!(seed("0xg").is_err());
    }
}
