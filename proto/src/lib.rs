//! truecold's one vocabulary, used by every other crate: the guest↔host wire protocol
//! ([`wire`], its items re-exported here), the guest kernel's command line (the keys and the
//! guest's parser in [`cmdline`], the host's builder in [`boot_cmdline`]), the limits and the
//! one memory quantity ([`limits`]), the kinds ([`kinds`]) and what they mean for guest
//! memory ([`layout`]), marks, stamps and the stage table ([`measure`]), the VMM report core
//! ([`report`]), the tune knobs ([`tune`]), the nested harness's parallel clock ([`parallel`]), the CPU platform truecold-vmm
//! presents ([`platform`]), the parity
//! contract's constants ([`parity`]), the
//! attribution trace ([`trace`]) and RIP samples ([`rip`]), seeds ([`seed`]), the kernel's
//! zone sums ([`zoneinfo`], the parser of `/proc/zoneinfo`), the one
//! path-I/O error ([`path_io`]) and the cpio writer ([`cpio`]). No KVM, no file I/O (the
//! clock is its one syscall).
#![deny(unsafe_code)]

pub mod boot_cmdline;
pub mod cmdline;
pub mod cpio;
pub mod kinds;
pub mod layout;
pub mod limits;
pub mod measure;
pub mod parallel;
pub mod parity;
pub mod path_io;
pub mod platform;
pub mod report;
pub mod rip;
pub mod seed;
pub mod trace;
pub mod tune;
pub mod wire;
pub mod zoneinfo;

pub use cmdline::{GuestConfig, GuestFault};
pub use layout::{memtotal_bounds, memtotal_bounds_for};
pub use wire::{
    hex, liveness_binding, unhex, BootId, Clocksource, ErrorCode, GuestPlatform, GuestRecord,
    LineAssembler, Message, Phase, ProtoError, Reply, Workload, LINE_TAG, MAX_LINE, NONCE_LEN,
    PORT_CHALLENGE, PORT_DOORBELL, PORT_EXIT, PORT_FIRST, PORT_LAST, PORT_RECORD,
};

#[cfg(test)]
mod tests;
