use super::*;

#[test]
fn report_regenerates_the_readme_and_each_shards_generated_files_only() {
    assert!(is_regenerated("README.md"));
    assert!(is_regenerated("shards/000/README.md"));
    assert!(is_regenerated("shards/000/SHA256SUMS"));
    assert!(is_regenerated("shards/pin-vcpus/comparison.json"));
    for kept in [
        "fleet.json",
        "tasks/000.json",
        "logs/000.12.out",
        "shards/000/samples.csv",
        "shards/000/result.json",
        "submit.sh",
    ] {
        assert!(!is_regenerated(kept), "{kept}");
    }
}

#[test]
fn shard_names_are_indexes_or_knobs() {
    assert_eq!(shard_name(7, None), "007");
    let k = truecold_proto::tune::Knob::ALL[0];
    assert_eq!(shard_name(7, Some(k)), k.as_str());
}
