//! A tune phase's knobs applied ([`check_applied`]): each arm's guest command line, kernel
//! `config` and VMM command are the baseline's with exactly its knobs' changes
//! ([`truecold_proto::tune`]), so a knob that did nothing, an arm that ran a word no knob
//! names, or a VMM knob missing from the command that ran is a reason
//! ([`Check::KnobApplied`]).

use std::collections::BTreeMap;
use std::path::Path;

use truecold_proto::tune::{apply, Change, Knob, VmmChange};

use super::model::*;
use super::stats::ArmData;
use crate::cmdline::{parse_cmdline_txt, Recorded};
use crate::fsio::{read_capped, MAX_PARSED_BYTES};
use crate::names::{CMDLINE_FILE, CONFIG_FILE};
use crate::schema::{ContractKind, Sample};
use crate::verdict::{Check, Verdict};

/// What an arm's bundle says it ran, beyond `result.json`.
struct Ran {
    cmdline: Option<Recorded>,
    config: Option<String>,
}

fn read_ran(dir: &Path, arm: &str) -> Ran {
    let d = dir.join(arm);
    let read = |name: &str| read_capped(&d.join(name), MAX_PARSED_BYTES).ok().flatten();
    Ran {
        // An unparsable cmdline.txt is the arm bundle's own reason.
        cmdline: read(CMDLINE_FILE).and_then(|b| parse_cmdline_txt(&b).ok()),
        config: read(CONFIG_FILE).and_then(|b| String::from_utf8(b).ok()),
    }
}

/// The words of a command line, counted.
fn words(line: &str) -> BTreeMap<&str, i64> {
    let mut m = BTreeMap::new();
    for w in line.split_whitespace() {
        *m.entry(w).or_insert(0) += 1;
    }
    m
}

/// The command line `base` with `knobs` applied, as counted words: each knob's words added
/// and removed ([`Knob::cmdline_delta`]).
fn want_words<'a>(base: &'a str, knobs: &[Knob]) -> BTreeMap<&'a str, i64> {
    let mut m = words(base);
    for k in knobs {
        let (add, remove) = k.cmdline_delta();
        for w in add {
            *m.entry(w).or_insert(0) += 1;
        }
        for w in remove {
            *m.entry(w).or_insert(0) -= 1;
        }
    }
    // Removing a word the baseline does not have leaves nothing to remove.
    m.retain(|_, n| *n > 0);
    m
}

/// The difference `got − want` of two counted word sets, as `+word` / `-word`.
fn word_diff(got: &BTreeMap<&str, i64>, want: &BTreeMap<&str, i64>) -> Vec<String> {
    let mut out = Vec::new();
    for (w, n) in got {
        let d = n - want.get(w).copied().unwrap_or(0);
        for _ in 0..d.max(0) {
            out.push(format!("+{w}"));
        }
    }
    for (w, n) in want {
        let d = n - got.get(w).copied().unwrap_or(0);
        for _ in 0..d.max(0) {
            out.push(format!("-{w}"));
        }
    }
    out
}

/// One line of a Kconfig fragment: the symbol and the value it sets (`None`: not set).
fn fragment_settings(text: &str) -> Vec<(&str, Option<&str>)> {
    text.lines()
        .filter_map(|l| {
            if let Some(rest) = l.strip_prefix("# ") {
                rest.strip_suffix(" is not set").map(|s| (s, None))
            } else {
                l.split_once('=').map(|(s, v)| (s, Some(v)))
            }
        })
        .collect()
}

/// What `config` sets `symbol` to (`None`: unset, or `# … is not set`).
fn config_value<'a>(config: &'a str, symbol: &str) -> Option<&'a str> {
    config.lines().find_map(|l| {
        l.strip_prefix(symbol)
            .and_then(|r| r.strip_prefix('='))
            .filter(|v| *v != "n")
    })
}

/// The file name of the VMM command's `--kernel`.
fn kernel_name(r: &Recorded) -> Option<&str> {
    r.vmm
        .get("--kernel")
        .map(|k| k.rsplit('/').next().unwrap_or(k))
}

/// Each arm of a tune phase against the phase's `baseline`: its guest command line is the
/// baseline's plus (and minus) exactly its knobs' words; its kernel `config` sets what each
/// of its Kconfig knobs' fragments sets, and each such knob changes at least one symbol of
/// the baseline's (the symbols Kconfig derives from them are held by the kernel-digest rule
/// of the phase: arms with the same Kconfig knobs have one config); its VMM command runs the
/// baseline's backing with its knobs applied, `--console` exactly when `console` is one of
/// them, `--pin-vcpus` exactly when `pin-vcpus` is, the `bzImage` exactly when `bzimage` is,
/// and `--ram-layout` as its layout knob sets it (absent: the default).
pub(super) fn check_applied(
    v: &mut Verdict,
    dir: &Path,
    plan: &ArmsPlan,
    arms: &[(ArmData, Vec<Sample>)],
) {
    if !is_tune_phase(plan) {
        return;
    }
    let Some((base, _)) = arms.iter().find(|(a, _)| a.arm.name == BASELINE_ARM) else {
        return;
    };
    let base_ran = read_ran(dir, BASELINE_ARM);
    let linux = base.result.contract.kind == ContractKind::Linux;
    let mut add = |arm: &str, d: String| v.add(Check::KnobApplied, format!("arm `{arm}`: {d}"));
    if !base.arm.knobs.is_empty() {
        return; // the plan's own reason (`baseline` applies no knob).
    }
    if let Some(r) = &base_ran.cmdline {
        for flag in ["--console", "--pin-vcpus"] {
            if r.vmm.has(flag) {
                add(
                    BASELINE_ARM,
                    format!("the baseline's VMM command has `{flag}`"),
                );
            }
        }
        if kernel_name(r) == Some("bzImage") {
            add(BASELINE_ARM, "the baseline boots the bzImage".into());
        }
    }
    for (a, _) in arms {
        let name = a.arm.name.as_str();
        let knobs = a.arm.knobs.as_slice();
        if name == BASELINE_ARM {
            continue;
        }
        let ran = read_ran(dir, name);
        // The guest command line.
        if linux {
            let want = want_words(&base.result.configuration.cmdline, knobs);
            let got = words(&a.result.configuration.cmdline);
            let diff = word_diff(&got, &want);
            if !diff.is_empty() {
                add(
                    name,
                    format!(
                        "its guest command line is not the baseline's with its knobs' words \
                         [{}]: {} against that",
                        knob_list(knobs),
                        diff.join(" ")
                    ),
                );
            }
        }
        // The kernel config.
        if let (Some(bc), Some(ac)) = (&base_ran.config, &ran.config) {
            for k in knobs {
                let Change::Kconfig(text) = k.change() else {
                    continue;
                };
                let settings = fragment_settings(text);
                for (sym, val) in &settings {
                    let got = config_value(ac, sym);
                    if got != *val {
                        add(
                            name,
                            format!(
                                "knob `{k}` sets {sym}={}; the arm's config has {}",
                                val.unwrap_or("(not set)"),
                                got.unwrap_or("(not set)")
                            ),
                        );
                    }
                }
                if settings.iter().all(|(s, val)| config_value(bc, s) == *val) {
                    add(
                        name,
                        format!(
                            "knob `{k}` did nothing: the baseline's config already sets every \
                             symbol of its fragment"
                        ),
                    );
                }
            }
        }
        // The VMM command.
        if let Some(r) = &ran.cmdline {
            if let Some(bb) = base.result.configuration.backing_kind() {
                let want = apply(knobs, bb).backing;
                if r.vmm.get("--backing") != Some(want.as_str()) {
                    add(
                        name,
                        format!(
                            "its VMM command runs `--backing {}`; the baseline's with its knobs \
                             applied is `{}`",
                            r.vmm.get("--backing").unwrap_or("(none)"),
                            want.as_str()
                        ),
                    );
                }
            }
            // The VMM switches a knob sets: there exactly when the knob is.
            for (k, flag) in [
                (Knob::Console, "--console"),
                (Knob::PinVcpus, "--pin-vcpus"),
            ] {
                let on = knobs.contains(&k);
                if r.vmm.has(flag) != on {
                    add(
                        name,
                        if on {
                            format!("knob `{k}`: its VMM command has no `{flag}`")
                        } else {
                            format!("its VMM command has `{flag}`, which no knob of it asks for")
                        },
                    );
                }
            }
            // The RAM layout: `--ram-layout` as the knobs set it (absent: `RamLayout::ABSENT`).
            let layout = apply(knobs, truecold_proto::kinds::Backing::Anon).ram_layout;
            let ran_layout = r
                .vmm
                .get("--ram-layout")
                .unwrap_or(truecold_proto::kinds::RamLayout::ABSENT.as_str());
            if ran_layout != layout.as_str() {
                add(
                    name,
                    format!(
                        "its VMM command runs `--ram-layout {ran_layout}`; its knobs lay RAM \
                         out `{layout}`"
                    ),
                );
            }
            let bz = knobs
                .iter()
                .any(|k| k.change() == Change::Vmm(VmmChange::BzImage));
            if linux && (kernel_name(r) == Some("bzImage")) != bz {
                add(
                    name,
                    if bz {
                        format!(
                            "knob `bzimage`: its VMM command boots `{}`, not the bzImage",
                            r.vmm.get("--kernel").unwrap_or("(no --kernel)")
                        )
                    } else {
                        "its VMM command boots the bzImage, which no knob of it asks for".into()
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_fragments() {
        let want = want_words("a b quiet", &[Knob::TscReliable]);
        assert_eq!(
            word_diff(&words("b a quiet tsc=reliable"), &want),
            Vec::<String>::new()
        );
        assert_eq!(
            word_diff(&words("a b quiet tsc=reliable x"), &want),
            vec!["+x".to_string()]
        );
        assert_eq!(word_diff(&words("a b quiet"), &want), vec!["-tsc=reliable"]);
        assert_eq!(
            fragment_settings("CONFIG_HZ_100=y\n# CONFIG_HZ_250 is not set\n"),
            vec![("CONFIG_HZ_100", Some("y")), ("CONFIG_HZ_250", None)]
        );
        let c = "CONFIG_HZ_100=y\n# CONFIG_HZ_250 is not set\nCONFIG_HZ=100\n";
        assert_eq!(config_value(c, "CONFIG_HZ_100"), Some("y"));
        assert_eq!(config_value(c, "CONFIG_HZ_250"), None);
        assert_eq!(config_value(c, "CONFIG_HZ"), Some("100"));
        assert_eq!(config_value(c, "CONFIG_H"), None);
    }
}
