//! truecold-vmm under the serial transport: `boot --transport serial --report-file F …`. Its
//! 8250 is its stdio (the bench's serial line); its JSON report, with its own marks (VM exits
//! included), goes to `F`. It builds the same command line itself
//! (`boot_params::cmdline(SerialUse::Transport(Truecold), …)`) from `--mem-mib` and
//! `--cmdline-extra`. Per sample it gets `--request-ns` and `--deadline-at-ns` like every
//! truecold campaign. It ends by itself at the guest's exit-port write.

use crate::{utf8, EngineError, Guest, Launch};
use std::path::Path;
use truecold_proto::kinds::{Engine, HostKind};

/// The environment variable that opts the bench's truecold-vmm launches out of the VMM's
/// jail (docs/security.md): `off` passes `--no-jail`. Unset, empty or any other value: the
/// VMM's default (jailed when it runs as root).
pub const JAIL_ENV: &str = "TRUECOLD_VMM_JAIL";

/// The VMM's jail flags, with [`JAIL_ENV`] read from the environment: `--no-jail` when the
/// operator opts out. Otherwise none: the VMM jails itself as root, on every host kind —
/// inside the nested harness's L1 too (its kernel has the namespaces, its init a root that
/// pivot_root accepts and its /etc/passwd the jail user: docs/security.md).
pub fn jail_args() -> Vec<String> {
    jail_args_for(std::env::var(JAIL_ENV).ok().as_deref())
}

/// [`jail_args`] with the variable's value given (pure).
pub fn jail_args_for(env: Option<&str>) -> Vec<String> {
    if env == Some("off") {
        vec!["--no-jail".into()]
    } else {
        Vec::new()
    }
}

/// The report file's name in the arm's work directory.
pub const REPORT_FILE: &str = "truecold-report.json";

/// The arm's launch.
pub fn launch(
    program: &Path,
    g: &Guest,
    work: &Path,
    host: HostKind,
) -> Result<Launch, EngineError> {
    let e = Engine::Truecold;
    let report = work.join(REPORT_FILE);
    let mut args: Vec<String> = vec!["boot".into()];
    for (k, v) in [
        ("--kernel", utf8(e, "the kernel path", &g.kernel)?),
        ("--initramfs", utf8(e, "the initramfs path", &g.initramfs)?),
        ("--vcpus", g.vcpus.to_string()),
        ("--mem-mib", g.mem.mib().to_string()),
        ("--backing", g.backing.as_str().to_string()),
        ("--host-kind", host.as_str().to_string()),
        ("--transport", "serial".to_string()),
        ("--report-file", utf8(e, "the report path", &report)?),
    ] {
        args.push(k.into());
        args.push(v);
    }
    // Always spelt out (the VMM's default is not what a line without it means).
    args.push("--ram-layout".into());
    args.push(g.layout_of(e).as_str().into());
    if !g.cmdline_extra.is_empty() {
        args.push("--cmdline-extra".into());
        args.push(g.cmdline_extra.clone());
    }
    args.extend(jail_args());
    Ok(Launch {
        engine: e,
        program: program.to_path_buf(),
        args,
        files: Vec::new(),
        report_file: Some(report),
        per_sample_stamps: true,
        agent: None,
        ram_layout: g.layout_of(e),
    })
}

/// Whether `line` (the first line of `--version`) is truecold-vmm's: `truecold-vmm 0.1.0`.
pub fn is_version_line(line: &str) -> bool {
    line.strip_prefix("truecold-vmm ")
        .is_some_and(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jail_is_the_vmm_default_unless_opted_out() {
        assert!(jail_args_for(None).is_empty());
        assert!(jail_args_for(Some("on")).is_empty());
        assert!(jail_args_for(Some("")).is_empty());
        assert!(jail_args_for(Some("OFF")).is_empty());
        assert_eq!(jail_args_for(Some("off")), ["--no-jail"]);
    }
}
