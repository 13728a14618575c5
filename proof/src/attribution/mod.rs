//! Attribution: where one boot's time goes, on one clock (pure).
//!
//! An attribution campaign (`truecold run … --attribution K`) boots K more times after the
//! measured rows, never a measured row, measured by an [`Instrument`]: `rip` (the default)
//! has the VMM sample each vCPU's RIP from outside the guest; `initcall` adds
//! [`truecold_proto::cmdline::ATTRIBUTION_CMDLINE`] to the guest's command line
//! (`initcall_debug` and the larger log buffer change the boot). Each launch is one line of
//! [`JSONL_FILE`] ([`AttributionLine`]: the launch's `reports.jsonl`-style line and the
//! bench's symbol map). From those lines and the measured rows this module makes
//! [`CSV_FILE`] and [`SVG_FILE`]; `verify` recomputes both byte for byte ([`check_bundle`])
//! and holds the lines to the instrument the campaign's record asks for
//! ([`instrument_disagreements`]).
//!
//! # One timeline
//! - Host stages: the representative launch's stamps through the one tiling rule, each with
//!   the VMM's exits by reason and page faults over the same span
//!   (`truecold_proto::report::Accounting::stages`). Times are ns after its request stamp.
//! - Guest clock → host clock: the guest reads its CLOCK_MONOTONIC (`t_ready_ns` of its
//!   record) right before it writes the ready doorbell, whose VM exit the VMM stamps
//!   (`ready_doorbell`); `offset = ready_doorbell − t_ready_ns` (the doorbell's own exit cost,
//!   a few µs, is the error).
//! - Kernel log → guest clock: guest-init wrote one line to `/dev/kmsg` right after reading
//!   its monotonic time (`ksync`), so `mono = printk_us × 1000 − (kmsg_us × 1000 − mono_ns)`
//!   (µs resolution). Records logged before the kernel's printk clock ran carry time 0
//!   ([`PRINTK_ZERO_NOTE`]); the guest lane starts at the host's `first_run`, so the phase
//!   from it to the first kernel mark holds that early boot.
//!
//! # RIP samples (`--attribution-instrument rip`)
//! When the launches were sampled by the VMM (`truecold_proto::rip`: no guest-side
//! instrumentation), the shown launch's samples give a flat profile per vCPU
//! ([`Lane::Rip`] rows): each function's sampled time is its samples × the period (an
//! estimate: the function held the vCPU at those instants), halted samples (the guest's
//! idle) and an AP's samples before its start apart, the functions past the top
//! [`TOP_FUNCTIONS`] together. The bench names each RIP's function from vmlinux's symbol
//! table ([`AttributionLine::functions`]). The samples are on the host clock already: the
//! SVG draws one strip per vCPU, coloured by function, on the timeline of the host stages.
//! The [`Lane::Overhead`] row is the attribution launches' p50 against the measured rows'
//! p50: what the sampling cost the boot.
//!
//! # Representative launch and reconciliation
//! The launch shown is the successful one whose request → strict-ready is the nearest-rank
//! median of the successful launches (lowest index among equals). Its total is compared with
//! the measured rows' p50: within [`RECONCILE_BOUND_PPM`] the CSV says
//! `represents the measured boot`, else `does not represent the measured boot`.

mod check;
mod diff;
mod flame;
mod model;
mod profile;
mod render;
mod rip;
mod timeline;

pub use check::*;
pub use diff::*;
pub use flame::*;
pub use model::*;
pub use profile::*;
pub use render::*;
pub use rip::rate_obtained;
pub use timeline::*;
