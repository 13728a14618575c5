//! A multi-arm directory's generated files: `README.md`, `comparison.json` and `cdf.svg`.

use std::fmt::Write as _;

use crate::fmt::{clock_caption, ms};
use crate::names::{README_FILE, SUMS_FILE};
use crate::plot::arms_cdf_svg;
use crate::schema::{Observer, HEADLINE};

/// The plan's file; its presence makes a directory a multi-arm directory.
use super::model::*;
use super::stats::*;

pub(super) fn ratio_text(r: Option<u64>, ci: Option<[u64; 2]>) -> String {
    let x = |p: u64| format!("{}.{:03}", p / 1_000_000, (p / 1_000) % 1_000);
    match (r, ci) {
        (Some(r), Some([lo, hi])) => format!("{} [{}, {}]", x(r), x(lo), x(hi)),
        (Some(r), None) => x(r),
        _ => "–".into(),
    }
}

pub(super) use crate::fmt::opt_ms;
use crate::names::ARMS_FILE;

/// The directory's `README.md`.
pub fn readme(plan: &ArmsPlan, arms: &[ArmData], c: &ArmsComparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# truecold engines campaign: {} arm(s), {} round(s)\n",
        plan.arms.len(),
        plan.rounds
    );
    let first = arms.first().map(|a| &a.result);
    let per_arm_backing = plan.arms.iter().any(|a| a.backing.is_some());
    let per_arm_kernel = plan.arms.iter().any(|a| a.kernel.is_some());
    if let Some(r) = first {
        let host = r.environment.host_kind;
        let _ = writeln!(s, "- host kind: {}", host.as_str());
        let _ = writeln!(s, "- clock: {}", host.clock().describe());
        if r.contract.observer == Observer::Agent {
            let _ = writeln!(
                s,
                "- contract: parity (docs/parity.md): every sample is request → strict-ready \
                 when both the guest agent's verified answer on vsock and a verified TCP \
                 round trip to the guest over the launch's tap are in; each launch has its \
                 own workspace clone (virtio-blk), its lifecycle committed to SQLite \
                 (state.csv) and its cleanup verified; the same guest (parity kernel, \
                 initramfs, guest-init) for every arm"
            );
        } else {
            let _ = writeln!(
                s,
                "- contract: every sample is request → strict-ready observed on serial: the \
                 bench stamps the request before it spawns the engine, writes a fresh nonce \
                 on the engine's serial input after the guest's ready line, and stamps \
                 strict-ready when the verified answer arrives on the engine's serial output; \
                 {}",
                if per_arm_kernel {
                    "the same initramfs and guest-init for every arm, the kernel per arm (the \
                     table below: an arm marked `own` boots the kernel its config digest names, \
                     the others the campaign's)"
                } else {
                    "the same guest (kernel, initramfs, guest-init) for every arm"
                }
            );
        }
        let cfg = &r.configuration;
        let backing = if per_arm_backing {
            "per arm (the table below: each engine's own default unless `--arm-backing` set it; \
             the arms compare VMM and memory backing together)"
                .to_string()
        } else {
            cfg.backing_kind().map_or("?", |b| b.as_str()).to_string()
        };
        let _ = writeln!(
            s,
            "- each arm: {} vCPU, {}, backing {backing}, {}, deadline {} ms",
            cfg.vcpus,
            crate::fmt::mem_text(cfg.mem_bytes),
            r.contract.mode.describe(),
            ms(r.contract.deadline_ns)
        );
    }
    let _ = writeln!(
        s,
        "- interleaving: each round launches every arm once, in an order shuffled from seed \
         {} ({ARMS_FILE})\n",
        crate::seed::hex(plan.seed)
    );
    let _ = writeln!(s, "## Arms\n");
    let (mut head, mut rule) = (String::new(), String::new());
    if per_arm_kernel {
        head.push_str("| kernel ");
        rule.push_str("|---");
    }
    if per_arm_backing {
        head.push_str("| backing ");
        rule.push_str("|---");
    }
    let _ = writeln!(
        s,
        "| arm | engine version {head}| attempts | ok | p50 ms | p99 ms |\n|---|---{rule}|---|---|---|---|"
    );
    for a in &c.arms {
        let declared = plan.arms.iter().find(|x| x.name == a.name);
        let mut backing = String::new();
        if per_arm_kernel {
            match declared.and_then(|x| x.kernel.as_deref()) {
                Some(k) => {
                    let short: String = k.chars().take(12).collect();
                    let _ = write!(backing, "own (config sha256 {short}…) | ");
                }
                None => backing.push_str("the campaign's | "),
            }
        }
        if let Some(b) = declared.and_then(|x| x.backing) {
            let _ = write!(backing, "{b} | ");
        }
        let _ = writeln!(
            s,
            "| [{n}]({n}/README.md) | `{}` | {backing}{} | {} | {} | {} |",
            a.version.replace('|', "\\|").replace('`', "'"),
            a.attempts,
            a.n,
            opt_ms(a.p50_ns),
            opt_ms(a.p99_ns),
            n = a.name,
        );
    }
    let _ = writeln!(
        s,
        "\n## Comparison ({HEADLINE}, successes)\n\nRatios are b / a with a bootstrap 95 % \
         interval; the verdict is `truecold-proof compare`'s rule applied to b against a, \
         said in words (b faster or slower than a by its p50 difference, or no difference above \
         the rule's threshold). Exact figures in {COMPARISON_FILE}.\n"
    );
    let _ = writeln!(
        s,
        "| a | b | n a | n b | p50 a ms | p50 b ms | p50 b/a [95 % CI] | p99 b/a [95 % CI] | \
         Mann–Whitney p | verdict |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &c.pairs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.a,
            p.b,
            p.n_a,
            p.n_b,
            opt_ms(p.p50_a_ns),
            opt_ms(p.p50_b_ns),
            ratio_text(p.ratio_p50_ppm, p.ratio_p50_ci95_ppm),
            ratio_text(p.ratio_p99_ppm, p.ratio_p99_ci95_ppm),
            p.mann_whitney_p.as_deref().unwrap_or("–"),
            verdict_words(p)
        );
    }
    let _ = writeln!(
        s,
        "\n![every arm's CDF]({ARMS_CDF_FILE})\n\nEach arm's directory is a complete bundle \
         (`truecold-proof verify <dir>/<arm>`); `truecold-proof verify <dir>` checks them all, \
         the order against their request stamps and this comparison; `sha256sum -c --strict \
         {SUMS_FILE}` checks every file."
    );
    s
}

/// A pair's verdict in words, naming the arms: `firecracker 4.3 % slower than truecold` for
/// compare's `regressed`, `… faster than …` for `improved`, else the verdict as it is.
fn verdict_words(p: &PairComparison) -> String {
    let pct = |r: u64| {
        let d = r.abs_diff(1_000_000);
        format!("{}.{} %", d / 10_000, (d % 10_000) / 1_000)
    };
    match (p.verdict.as_str(), p.ratio_p50_ppm) {
        ("regressed", Some(r)) => format!("{} {} slower than {}", p.b, pct(r), p.a),
        ("improved", Some(r)) => format!("{} {} faster than {}", p.b, pct(r), p.a),
        (v, _) => v.to_string(),
    }
}

/// `comparison.json`, `README.md` and `cdf.svg` for `plan` and its arms' data.
pub fn generated_files(plan: &ArmsPlan, arms: &[ArmData]) -> Vec<(String, Vec<u8>)> {
    let c = compare_arms(plan.seed, arms);
    // Integers, strings and options only: serialisation cannot fail.
    let mut json = serde_json::to_vec_pretty(&c).unwrap_or_default();
    json.push(b'\n');
    let clock = c.clock.map_or("no arm", clock_caption);
    let curves: Vec<(String, Vec<u64>)> = arms
        .iter()
        .map(|a| (a.arm.name.clone(), a.ok.clone()))
        .collect();
    let svg = arms_cdf_svg(
        &format!("{HEADLINE}: {} arm(s), successes", arms.len()),
        clock,
        &curves,
    );
    vec![
        (COMPARISON_FILE.to_string(), json),
        (README_FILE.to_string(), readme(plan, arms, &c).into_bytes()),
        (ARMS_CDF_FILE.to_string(), svg.into_bytes()),
    ]
}
