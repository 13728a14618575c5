//! Multi-arm directories: one engines campaign or one tune phase ([`crate::tune`]), one
//! complete bundle per arm, compared.
//!
//! ```text
//! <dir>/README.md        host kind, clock, contract, arms, comparison table, cdf.svg
//! <dir>/arms.json        schema, seed, rounds, arms [{name, engine[, knobs]}],
//!                        order [[round, arm], …]
//! <dir>/comparison.json  per pair of arms: n, p50/p99, ratios b/a with bootstrap CIs, p, verdict
//! <dir>/cdf.svg          every arm's headline CDF (successes) on one axis
//! <dir>/<arm>/           a complete bundle per arm (its own SHA256SUMS; it verifies alone)
//! <dir>/SHA256SUMS       every file under <dir>, arm files as `<arm>/<file>`, itself excluded
//! ```
//!
//! The bench writes every arm bundle inside `dir`, then calls [`write_arms`], which writes the
//! top files from the arms' rows and returns the verifier's [`Verdict`] on the whole
//! directory. [`crate::verify_dir`] recognises `arms.json` and checks ([`verify_arms_dir`]):
//! SHA256SUMS over every file; each arm bundle valid on its own (its reasons are reported with
//! the arm's name in front, under their own [`Check`] kinds); every arm on the same host kind
//! (so the same clock), vCPUs, memory, backing, kernel/initramfs/guest-init/config digests,
//! deadline, contract, mode and count, each marked `contract.interleaved`, under the serial
//! observer, running the engine its name says (a tune phase: every arm truecold under the
//! vm-exit observer, its knobs what its name says, and alike except what its knobs change;
//! [`plan_problems`], `check_same`); the order consistent with the rows (the `i`-th appearance of an arm is its row `i`,
//! rows for a prefix of the order only) and sequential along it as one bundle's rows are
//! (request stamps strictly increasing, each after the previous launch's last stamp; an idle
//! gap as long as the shortest launch or 10 ms is a warning, `Check::ArmGap`: an interleaved
//! arm's bundle leaves its gaps to this check, the other arms' launches fill them); and `comparison.json`,
//! `README.md` and `cdf.svg` byte for byte what [`generated_files`] makes of the verified
//! rows.
//!
//! # The comparison (one definition, [`compare_arms`])
//! For every unordered pair, `a` before `b` in the plan's arm order, over each arm's
//! successful rows (the headline, request → strict-ready): `n`, p50 and p99 (nearest rank,
//! [`crate::stats::percentile_sorted`]); the ratio `b / a` of the p50s and of the p99s in
//! parts per million, `floor(1e6 · b / a)` (integers: nothing stored is a float); a
//! percentile-bootstrap 95 % interval of each ratio ([`RESAMPLES`] resamples of both arms,
//! each resample's ratio computed the same way, the interval the nearest-rank 2.5th and
//! 97.5th of the sorted ratios), drawn from SplitMix64 seeded with `seed + k` for the `k`-th
//! pair (0-based, in `comparison.json` order; `seed` from `arms.json`); the two-sided
//! Mann–Whitney p and the verdict of [`crate::compare`]'s rule (b against a, lower is
//! better; its own bootstrap seeded with `seed`), the p written as text with three
//! significant digits ([`crate::fmt::p_text`]).

mod applied;
mod check;
mod model;
mod readme;
mod stats;
mod write;

use std::path::Path;

use crate::kind::{DirKind, Kind};
use crate::verdict::{Verdict, VerifyOptions};

pub use check::*;
pub use model::*;
pub use readme::*;
pub use stats::*;
pub use write::*;

/// A multi-arm directory: its implementation of [`DirKind`], which [`crate::verify`] dispatches to.
pub struct ArmsDir;

impl DirKind for ArmsDir {
    const KIND: Kind = Kind::Arms;
    type Error = ArmsError;

    fn verify(dir: &Path, opts: &VerifyOptions) -> Verdict {
        verify_arms_dir(dir, opts)
    }

    fn is_generated(_dir: &Path, name: &str) -> bool {
        is_regenerated(name)
    }

    fn regenerate(dir: &Path) -> Result<Vec<String>, ArmsError> {
        regenerate_arms(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Engine;
    use truecold_proto::tune::Knob;

    fn plan(order: &[(u64, &str)]) -> ArmsPlan {
        ArmsPlan {
            seed: 7,
            rounds: 2,
            arms: vec![
                ArmRef::engine(Engine::Truecold),
                ArmRef::engine(Engine::Firecracker),
            ],
            order: order.iter().map(|(r, n)| (*r, n.to_string())).collect(),
        }
    }

    #[test]
    fn plans_round_trip_and_bad_plans_say_why() {
        let p = plan(&[
            (0, "firecracker"),
            (0, "truecold"),
            (1, "truecold"),
            (1, "firecracker"),
        ]);
        assert!(plan_problems(&p).is_empty());
        assert_eq!(parse_arms(&arms_bytes(&p)).unwrap(), p);
        let twice = plan(&[
            (0, "truecold"),
            (0, "truecold"),
            (1, "truecold"),
            (1, "firecracker"),
        ]);
        assert!(plan_problems(&twice).iter().any(|m| m.contains("twice")));
        let short = plan(&[(0, "truecold"), (0, "firecracker")]);
        assert!(plan_problems(&short).iter().any(|m| m.contains("launches")));
        let mut misnamed = p.clone();
        misnamed.arms[1].name = "fc".into();
        assert!(plan_problems(&misnamed)
            .iter()
            .any(|m| m.contains("named by its engine")));
    }

    fn tune_plan(arms: Vec<ArmRef>) -> ArmsPlan {
        let order = arms.iter().map(|a| (0, a.name.clone())).collect();
        ArmsPlan {
            seed: 1,
            rounds: 1,
            arms,
            order,
        }
    }

    #[test]
    fn an_engines_plan_is_written_as_before() {
        let p = plan(&[
            (0, "firecracker"),
            (0, "truecold"),
            (1, "truecold"),
            (1, "firecracker"),
        ]);
        let text = String::from_utf8(arms_bytes(&p)).unwrap();
        assert!(!text.contains("knobs"), "{text}");
        assert!(!is_tune_phase(&p));
        // An engine arm with knobs makes it a tune phase, judged by the tune rules.
        let mut k = p.clone();
        k.arms[0].knobs = vec![Knob::Console];
        assert!(is_tune_phase(&k));
        assert!(plan_problems(&k)
            .iter()
            .any(|m| m.contains("runs truecold")));
    }

    #[test]
    fn tune_phase_plans() {
        let screen = tune_plan(vec![
            ArmRef::tune(BASELINE_ARM, vec![]),
            ArmRef::tune("console", vec![Knob::Console]),
            ArmRef::tune("backing-thp", vec![Knob::BackingThp]),
            ArmRef::tune("backing-hugetlb", vec![Knob::BackingHugetlb]),
        ]);
        assert!(is_tune_phase(&screen));
        assert_eq!(plan_problems(&screen), Vec::<String>::new());
        assert_eq!(parse_arms(&arms_bytes(&screen)).unwrap(), screen);
        let rec = vec![Knob::RcuExpedited, Knob::NoPrintk, Knob::Console];
        let confirm = tune_plan(vec![
            ArmRef::tune(BASELINE_ARM, vec![]),
            ArmRef::tune(RECOMMENDED_ARM, rec.clone()),
            ArmRef::tune(
                "recommended-minus-no-printk",
                vec![Knob::RcuExpedited, Knob::Console],
            ),
            ArmRef::tune(
                "recommended-minus-rcu-expedited",
                vec![Knob::NoPrintk, Knob::Console],
            ),
        ]);
        assert_eq!(plan_problems(&confirm), Vec::<String>::new());
        let bad = |arms: Vec<ArmRef>, what: &str| {
            let p = plan_problems(&tune_plan(arms.clone()));
            assert!(p.iter().any(|m| m.contains(what)), "{what}: {p:?} {arms:?}");
        };
        let base = ArmRef::tune(BASELINE_ARM, vec![]);
        bad(
            vec![base.clone(), ArmRef::tune("console", vec![Knob::NoSmp])],
            "its name says [console]",
        );
        bad(
            vec![ArmRef::tune(BASELINE_ARM, vec![Knob::NoSmp])],
            "its name says []",
        );
        bad(
            vec![base.clone(), ArmRef::tune("fast", vec![Knob::NoSmp])],
            "not a tune arm's name",
        );
        bad(
            vec![ArmRef::tune("console", vec![Knob::Console])],
            "no `baseline` arm",
        );
        bad(vec![base.clone(), base.clone()], "appears twice");
        bad(
            vec![
                base.clone(),
                ArmRef {
                    engine: Engine::Firecracker,
                    ..ArmRef::tune("console", vec![Knob::Console])
                },
            ],
            "runs truecold",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, vec![Knob::Hz100, Knob::Hz1000]),
            ],
            "change the same thing",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, vec![Knob::Console, Knob::NoPrintk]),
            ],
            "catalogue order",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, rec.clone()),
                ArmRef::tune("recommended-minus-no-smp", vec![]),
            ],
            "not a tune arm's name",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, rec.clone()),
                ArmRef::tune("recommended-minus-console", vec![Knob::RcuExpedited]),
            ],
            "its name says [rcu-expedited, no-printk]",
        );
        bad(
            vec![base, ArmRef::tune(RECOMMENDED_ARM, vec![])],
            "has no knobs",
        );
        // Unknown knobs do not parse.
        let text = String::from_utf8(arms_bytes(&screen))
            .unwrap()
            .replace("\"console\"\n", "\"turbo\"\n");
        assert!(parse_arms(text.as_bytes()).unwrap_err().contains("turbo"));
    }

    #[test]
    fn ratios_are_integer_ppm_and_the_bootstrap_is_deterministic() {
        assert_eq!(ratio_ppm(3, 1), Some(333_333));
        assert_eq!(ratio_ppm(2, 4), Some(2_000_000));
        assert_eq!(ratio_ppm(0, 4), None);
        let a: Vec<u64> = (1..=50).map(|x| x * 1000).collect();
        let b: Vec<u64> = a.iter().map(|x| x * 2).collect();
        let one = bootstrap_ratio_ci(&a, &b, 500, 3);
        assert_eq!(one, bootstrap_ratio_ci(&a, &b, 500, 3));
        let [lo, hi] = one.0.unwrap();
        assert!(lo <= 2_000_000 && 2_000_000 <= hi, "{lo} {hi}");
        // Identical arms scaled by exactly 2: every resampled p99 ratio is near 2.
        assert!(one.1.unwrap()[0] > 1_000_000);
        assert_eq!(bootstrap_ratio_ci(&[], &b, 10, 1), (None, None));
    }

    #[test]
    fn sums_names_may_name_an_arm_file() {
        assert!(is_valid_arms_path("truecold/samples.csv"));
        assert!(is_valid_arms_path("comparison.json"));
        assert!(!is_valid_arms_path("a/b/c"));
        assert!(!is_valid_arms_path("../x"));
        assert!(!is_valid_arms_path("/x"));
    }
}
