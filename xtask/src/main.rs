//! `cargo run -p xtask -- <command>`: builds truecold's guest artifacts.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use truecold_proto::path_io::PathIoError;

#[derive(Parser)]
#[command(about = "Builds truecold's guest artifacts")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Variant {
    Base,
    Debug,
    NestedHost,
    Parity,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Base => "base",
            Variant::Debug => "debug",
            Variant::NestedHost => "nested-host",
            Variant::Parity => "parity",
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a kernel variant (kernel-config/build.sh): vmlinux, bzImage, config, manifest.json.
    Kernel {
        #[arg(long, value_enum, default_value = "base")]
        variant: Variant,
        #[arg(long)]
        out: PathBuf,
    },
    /// Build the static truecold-init; copy it to --out when given.
    Init {
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write the deterministic initramfs (newc cpio) around an init binary.
    Initramfs {
        #[arg(long)]
        init: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// The parity contract's workspace disk (ext4, reproducible; needs e2fsprogs).
    Workspace {
        #[arg(long, default_value = "out/guest/workspace.img")]
        out: PathBuf,
    },
    /// Kernel + init + initramfs + the parity kernel (parity/) + workspace.img + manifest
    /// into one directory.
    Guest {
        #[arg(long, default_value = "out/guest")]
        out: PathBuf,
    },
    /// The nested-host (L1) kernel for the nested harness.
    L1 {
        #[arg(long, default_value = "out/l1")]
        out: PathBuf,
    },
    /// Build twice and compare bytes (the kernel part takes minutes).
    ReproCheck {
        /// Only check init and initramfs.
        #[arg(long)]
        skip_kernel: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Kernel { variant, out } => xtask::kernel(variant.name(), &out, None),
        Cmd::Init { out } => xtask::init(&xtask::default_target_dir()).and_then(|p| {
            if let Some(o) = out {
                std::fs::copy(&p, &o).map_err(|e| {
                    xtask::XtaskError::Io(PathIoError::at("copy the init to", &o)(e))
                })?;
                println!("{}", o.display());
            } else {
                println!("{}", p.display());
            }
            Ok(())
        }),
        Cmd::Initramfs { init, out } => {
            xtask::initramfs(&init, &out).map(|sha| println!("{sha}  {}", out.display()))
        }
        Cmd::Workspace { out } => xtask::workspace::build(&out).map(|img| {
            println!(
                "{}  {} (e2fsprogs {})",
                img.sha256,
                out.display(),
                img.e2fsprogs
            )
        }),
        Cmd::Guest { out } => xtask::guest(&out),
        Cmd::L1 { out } => xtask::l1(&out),
        Cmd::ReproCheck { skip_kernel } => xtask::repro_check(skip_kernel),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {}", truecold_proto::measure::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
