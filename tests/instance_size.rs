//! `workload-bench mem` (100,000 instances of the reference workload created and started) grows the process by at most 256 bytes per instance.

/// Issue 29's bound on what a created and started instance costs in memory: its own size and
/// what it allocates, measured as the real benchmark measures it (the growth of the resident
/// set over 100,000 instances).
#[test]
fn an_instance_of_the_reference_workload_costs_at_most_256_bytes() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workload-bench"))
        .arg("mem")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bytes = report["bytes_per_instance"].as_f64().unwrap();
    let size = report["size_of_instance"].as_u64().unwrap();
    assert!(
        bytes > size as f64,
        "{report}: less than the instance itself"
    );
    assert!(bytes <= 256.0, "{report}: more than 256 bytes per instance");
}
