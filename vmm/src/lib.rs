//! truecold's in-process VMM: boots a guest (a PVH/ELF vmlinux, a bzImage, or the embedded
//! probe guest) from nothing to a verified ready state and reports a per-stage timeline.
//!
//! The recipe is [`boot::run`]; each stage lives in its own module:
//! [`kvm`] → [`vm`] → [`memory`] → [`loader`] (+ [`boot_params`], [`mptable`]) → [`cpu`] → [`devices`] →
//! [`run`]; [`judge`] finds a boot's first failure, [`report`] is the JSON the CLI prints; [`sandbox`] confines the CLI's process
//! (seccomp filter installed between the kernel load and the vCPUs).
pub mod boot;
pub mod boot_params;
pub mod config;
pub mod cpu;
pub mod cpuid;
pub mod devices;
pub mod fault;
pub mod host;
pub mod jail;
pub mod judge;
pub mod kvm;
pub mod loader;
pub mod memory;
pub mod mptable;
pub mod pin;
pub mod probe;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod timeline;
pub mod unwind;
pub mod virtio;
pub mod vm;

pub use boot::{run as boot, Error};
pub use config::BootConfig;
pub use report::BootReport;
