//! The benchmark guard's baseline (`workload-baseline`) computes the reference workload's checksum.

/// WORKLOAD.md's expected checksum line (v1), which `workload-bench` prints too.
const EXPECTED: &str = "v1 n=1000000 ev=34d01784 entries=11639,164747,82637,11638,11638,11638 \
                        attempts=2 failures=70472 final=succeeded trace=52a61c27";

#[test]
fn plain_match_and_statig_baselines_compute_the_workloads_checksum() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workload-baseline"))
        .arg("check")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, [EXPECTED, EXPECTED], "plain match, then statig");
}

#[test]
fn an_unknown_mode_is_refused_with_its_usage() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workload-baseline"))
        .arg("fast")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "usage: workload-baseline [bench|check] (not fast)\n"
    );
}
