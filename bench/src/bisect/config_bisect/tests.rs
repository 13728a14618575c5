use super::*;

/// A ddmin test whose slowdown is caused by `culprits` together (every one needed), counting
/// its calls; `unresolved` candidates say neither.
fn oracle<'a>(
    culprits: &'a [&'a str],
    unresolved: &'a [&'a str],
    calls: &'a mut Vec<Vec<String>>,
) -> impl FnMut(&[String]) -> Result<Probe, BisectRunError> + 'a {
    move |s: &[String]| {
        calls.push(s.to_vec());
        if s.iter().any(|x| unresolved.contains(&x.as_str())) {
            return Ok(Probe::Unresolved);
        }
        Ok(if culprits.iter().all(|c| s.iter().any(|x| x == c)) {
            Probe::Fails
        } else {
            Probe::Passes
        })
    }
}

fn syms(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("CONFIG_S{i:02}=y")).collect()
}

#[test]
fn ddmin_finds_one_culprit_among_many_in_few_tests() {
    for n in [2, 3, 4, 5, 8, 13, 32] {
        for k in 0..n {
            let all = syms(n);
            let c = all[k].clone();
            let mut calls = Vec::new();
            let got = ddmin(all, &mut oracle(&[c.as_str()], &[], &mut calls)).unwrap();
            assert_eq!(got, vec![c.clone()], "n {n} culprit {k}");
            // Binary search in effect: about 2·log2(n) tests.
            let bound = 2 * (usize::BITS - (n - 1).leading_zeros()) as usize + 2;
            assert!(calls.len() <= bound, "n {n}: {} tests", calls.len());
        }
    }
}

#[test]
fn ddmin_finds_an_interaction_and_survives_unresolved_candidates() {
    // Two symbols that only slow the boot together (e.g. SMP × a per-CPU cost).
    let all = syms(8);
    let (a, b) = (all[1].clone(), all[6].clone());
    let mut calls = Vec::new();
    let got = ddmin(
        all.clone(),
        &mut oracle(&[a.as_str(), b.as_str()], &[], &mut calls),
    )
    .unwrap();
    assert_eq!(got, vec![a.clone(), b.clone()]);
    // A symbol whose candidates never build: the culprit is still found.
    let mut calls = Vec::new();
    let got = ddmin(
        all.clone(),
        &mut oracle(&[all[5].as_str()], &[all[2].as_str()], &mut calls),
    )
    .unwrap();
    assert_eq!(got, vec![all[5].clone()]);
    // One element: nothing to test.
    let mut calls = Vec::new();
    let got = ddmin(vec![a.clone()], &mut oracle(&[a.as_str()], &[], &mut calls)).unwrap();
    assert_eq!((got, calls.len()), (vec![a], 0));
}

#[test]
fn split_cuts_into_contiguous_near_equal_chunks() {
    let v: Vec<u32> = (0..7).collect();
    assert_eq!(split(&v, 2), vec![vec![0, 1, 2], vec![3, 4, 5, 6]]);
    assert_eq!(split(&v, 3), vec![vec![0, 1], vec![2, 3], vec![4, 5, 6]]);
    assert_eq!(split(&v, 9).len(), 7);
    assert_eq!(split(&v, 7).concat(), v);
}

const GOOD: &str =
    "# comment\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_HZ=250\nCONFIG_S=\"x=y\"\n";
const BAD: &str = "CONFIG_A=y\nCONFIG_B=y\nCONFIG_HZ=1000\nCONFIG_S=\"x=y\"\nCONFIG_NEW=m\n";

#[test]
fn config_diff_lists_the_bad_sides_assignments_and_apply_puts_them_on_the_good_config() {
    let p = parse_config(GOOD);
    assert_eq!(p.get("CONFIG_B").map(String::as_str), Some("n"));
    assert_eq!(p.get("CONFIG_S").map(String::as_str), Some("\"x=y\""));
    let d = config_diff(GOOD, BAD);
    assert_eq!(d, ["CONFIG_B=y", "CONFIG_HZ=1000", "CONFIG_NEW=m"]);
    // The reverse direction: unset is `=n`.
    assert_eq!(
        config_diff(BAD, GOOD),
        ["CONFIG_B=n", "CONFIG_HZ=250", "CONFIG_NEW=n"]
    );
    let all = apply_assignments(GOOD, &d);
    assert!(config_diff(&all, BAD).is_empty(), "{all}");
    let one = apply_assignments(GOOD, &["CONFIG_HZ=1000".to_string()]);
    assert_eq!(config_diff(GOOD, &one), ["CONFIG_HZ=1000"]);
    assert!(one.starts_with("# comment\n"), "{one}");
    let unset = apply_assignments(BAD, &["CONFIG_B=n".to_string()]);
    assert!(unset.contains("# CONFIG_B is not set\n"), "{unset}");
    assert!(apply_assignments(GOOD, &[]) == GOOD);
}
