//! What a campaign launches: the VMM and the guest's files, found and hashed for the bundle
//! ([`guest_files`]), and the kernels `truecold` builds itself — a tune arm's or a bisect
//! step's ([`kernel_build`]) and the user's own (`--kernel-config`, [`own_kernel`]), each in a
//! complete guest directory beside the base guest's init and initramfs.

pub mod guest_files;
pub mod kernel_build;
pub mod own_kernel;
