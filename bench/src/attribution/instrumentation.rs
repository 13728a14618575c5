//! What the attribution launches measure the boot with (`--attribution-instrument`, and for
//! `rip` its period): [`Instrumentation`], a value of a campaign's and a tune's plan, and
//! what it changes in a launch (the VMM's flags, the guest's command line).

use crate::campaign::process_launcher::VmmCommand;
use std::path::Path;
use truecold_proto::rip::SamplePeriod;

/// What the attribution launches measure the boot with (`--attribution-instrument`): one
/// definition, the verifier's, with its default ([`Instrument::default`], `rip`) and what a
/// record that names none means ([`Instrument::ABSENT`], `initcall`).
pub use truecold_proof::attribution::Instrument;

/// The attribution launches' instrument and, for [`Instrument::Rip`], its period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Instrumentation {
    pub instrument: Instrument,
    pub period: SamplePeriod,
}

impl Default for Instrumentation {
    /// [`Instrument::default`] at [`default_period`].
    fn default() -> Self {
        Instrumentation {
            instrument: Instrument::default(),
            period: default_period(),
        }
    }
}

/// [`SamplePeriod::DEFAULT`].
pub fn default_period() -> SamplePeriod {
    SamplePeriod::DEFAULT
}

impl Instrumentation {
    /// What a record that names no instrumentation means ([`Instrument::ABSENT`]; its period
    /// unused): a serde `default` function.
    pub fn absent() -> Self {
        Instrumentation {
            instrument: Instrument::ABSENT,
            period: default_period(),
        }
    }

    /// The attribution launches' guest command line extra, from the measured one's.
    pub fn cmdline_extra(&self, extra: &str) -> String {
        match self.instrument {
            Instrument::Initcall => cmdline_extra(extra),
            Instrument::Rip => extra.to_string(),
        }
    }

    /// The measured launches' VMM command, instrumented. With `rip`, the samples also walk
    /// the guest's call stacks (`--sample-stacks`) when its kernel's `.config`
    /// (`kernel_config`, a Linux guest's) builds frame pointers ([`frame_pointers`]):
    /// without them the walk would follow whatever RBP holds.
    pub fn command(&self, mut command: VmmCommand, kernel_config: Option<&Path>) -> VmmCommand {
        if self.instrument == Instrument::Rip {
            command.args.push("--sample-rip-us".into());
            command.args.push(self.period.to_string().into());
            if kernel_config.is_some_and(frame_pointers) {
                command.args.push("--sample-stacks".into());
            }
        }
        command
    }

    /// The `truecold run` / `tune` flags that give this instrumentation, every one spelt out
    /// whatever the defaults (`--attribution-instrument`, and with `rip` its
    /// `--attribution-sample-us`): a line without them means [`Instrument::ABSENT`], not
    /// today's default, so a recorded line runs and reads the same whatever a later default
    /// is.
    pub fn flags(&self) -> Vec<String> {
        let mut v = vec![
            "--attribution-instrument".to_string(),
            self.instrument.as_str().to_string(),
        ];
        if self.instrument == Instrument::Rip {
            v.push("--attribution-sample-us".into());
            v.push(self.period.to_string());
        }
        v
    }
}

/// Whether the kernel `.config` at `path` builds frame pointers (`CONFIG_FRAME_POINTER=y`,
/// which x86's `UNWINDER_FRAME_POINTER` selects). A file that cannot be read says no, on
/// stderr: the profile then stays flat, as the attribution says.
pub fn frame_pointers(path: &Path) -> bool {
    match std::fs::read(path) {
        Ok(c) => config_has_frame_pointers(&c),
        Err(e) => {
            crate::note!(
                "truecold: attribution: warning: cannot read {} ({e}): no call stacks are walked",
                path.display()
            );
            false
        }
    }
}

/// Whether a `.config`'s bytes set `CONFIG_FRAME_POINTER=y`.
pub fn config_has_frame_pointers(config: &[u8]) -> bool {
    config
        .split(|b| *b == b'\n')
        .any(|l| l.trim_ascii() == b"CONFIG_FRAME_POINTER=y")
}

/// The attribution command line added to `extra` (space-separated; `extra` may be empty).
pub fn cmdline_extra(extra: &str) -> String {
    let a = truecold_proto::cmdline::ATTRIBUTION_CMDLINE;
    if extra.trim().is_empty() {
        a.to_string()
    } else {
        format!("{} {a}", extra.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_is_added_once_to_the_extra() {
        assert_eq!(
            cmdline_extra(""),
            truecold_proto::cmdline::ATTRIBUTION_CMDLINE
        );
        assert_eq!(
            cmdline_extra("quiet "),
            format!("quiet {}", truecold_proto::cmdline::ATTRIBUTION_CMDLINE)
        );
    }

    /// `rip` is the default instrument (`--attribution-instrument`'s, a plan's, a tune's);
    /// a record that names none means `initcall`, the default it was written under.
    #[test]
    fn the_default_is_rip_and_an_absent_instrument_is_initcall() {
        assert_eq!(Instrument::default(), Instrument::Rip);
        assert_eq!(Instrumentation::default().instrument, Instrument::Rip);
        assert_eq!(Instrumentation::default().period, SamplePeriod::DEFAULT);
        assert_eq!(Instrument::ABSENT, Instrument::Initcall);
        assert_eq!(Instrumentation::absent().instrument, Instrument::Initcall);
        assert_eq!(Instrument::or_absent(None), Instrument::Initcall);
        assert_eq!(
            Instrument::or_absent(Some(Instrument::Rip)),
            Instrument::Rip
        );
        for i in Instrument::ALL {
            assert_eq!(Instrument::parse(i.as_str()), Ok(i));
            assert_eq!(
                serde_json::to_string(&i).unwrap(),
                format!("\"{}\"", i.as_str())
            );
        }
        assert!(Instrument::parse("Rip").is_err());
    }

    #[test]
    fn instrumentation_changes_only_what_its_instrument_needs() {
        let base = VmmCommand {
            program: "/vmm".into(),
            args: vec!["boot".into()],
        };
        let initcall = Instrumentation {
            instrument: Instrument::Initcall,
            period: default_period(),
        };
        assert_eq!(initcall.command(base.clone(), None).args, base.args);
        assert_eq!(initcall.flags(), ["--attribution-instrument", "initcall"]);
        assert_eq!(initcall.cmdline_extra("quiet"), cmdline_extra("quiet"));
        // The default spelt out too: a line without the flags means `initcall`.
        assert_eq!(
            Instrumentation::default().flags(),
            [
                "--attribution-instrument",
                "rip",
                "--attribution-sample-us",
                "100"
            ]
        );
        let rip = Instrumentation {
            instrument: Instrument::Rip,
            period: SamplePeriod::from_us(250).unwrap(),
        };
        assert_eq!(
            rip.command(base.clone(), None).args,
            vec!["boot", "--sample-rip-us", "250"]
        );
        // A kernel built with frame pointers: the samples walk its call stacks too.
        let d = tempfile::tempdir().unwrap();
        let fp = d.path().join("fp.config");
        std::fs::write(&fp, "CONFIG_X=y\nCONFIG_FRAME_POINTER=y\n").unwrap();
        let flat = d.path().join("flat.config");
        std::fs::write(&flat, "# CONFIG_FRAME_POINTER is not set\n").unwrap();
        assert_eq!(
            rip.command(base.clone(), Some(&fp)).args,
            vec!["boot", "--sample-rip-us", "250", "--sample-stacks"]
        );
        assert_eq!(rip.command(base.clone(), Some(&flat)).args.len(), 3);
        assert_eq!(
            rip.command(base.clone(), Some(&d.path().join("none")))
                .args
                .len(),
            3
        );
        assert_eq!(initcall.command(base, Some(&fp)).args.len(), 1);
        assert!(!config_has_frame_pointers(b"CONFIG_FRAME_POINTER=n\n"));
        assert_eq!(rip.cmdline_extra("quiet"), "quiet", "no initcall_debug");
        assert_eq!(
            rip.flags(),
            vec![
                "--attribution-instrument",
                "rip",
                "--attribution-sample-us",
                "250"
            ]
        );
        assert_eq!(default_period().us(), SamplePeriod::DEFAULT_US);
    }
}
