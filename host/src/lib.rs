//! What the VMM and the bench both do to the host, once: create a tap device for a
//! microVM's virtio-net ([`tap`]) and detect the host's kind ([`kind`]). The bench uses it
//! without linking the VMM; proto stays free of file I/O.

pub mod kind;
pub mod tap;

pub use tap::{Tap, TapError, VNET_HDR_LEN};
