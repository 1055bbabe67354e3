//! A test that needs something of the machine (Landlock, mount namespaces, root, Neovim) and finds it missing: it fails under `PROTOCOL_RUN_REQUIRE_ALL=1` (as `.ci/run` sets), and elsewhere skips with a line on the terminal naming what is missing and how to get it.

use std::io::Write;

/// Set (to anything but empty or `0`) where every test must run: a missing requirement fails.
pub const REQUIRE_ALL: &str = "PROTOCOL_RUN_REQUIRE_ALL";

/// Whether `test` may go on: `present` says whether `what` is here. When it is not, under
/// `REQUIRE_ALL` the test fails naming `what` and `remedy`; otherwise the skip is written to the
/// terminal directly (the harness swallows a passing test's `eprintln!`) and the test returns.
pub fn met(test: &str, what: &str, remedy: &str, present: bool) -> bool {
    if present {
        return true;
    }
    let required = std::env::var(REQUIRE_ALL).is_ok_and(|value| !value.is_empty() && value != "0");
    assert!(
        !required,
        "{test} needs {what}, which is missing ({REQUIRE_ALL} is set): {remedy}"
    );
    let line = format!("SKIPPED {test}: needs {what}: {remedy}\n");
    // Straight to the process's standard error, past the harness's capture.
    match std::fs::OpenOptions::new().write(true).open("/dev/stderr") {
        Ok(mut stderr) => {
            let _ = stderr.write_all(line.as_bytes());
        }
        Err(_) => eprint!("{line}"),
    }
    false
}

/// Landlock: the kernel's sandbox, which several tests check at work.
pub fn landlock(test: &str) -> bool {
    let reason = match protocol_run::effects::sandbox::support() {
        protocol_run::effects::sandbox::Support::Unavailable(reason) => reason.clone(),
        _ => return true,
    };
    met(
        test,
        "Landlock",
        &format!(
            "{reason}; run on Linux 5.13 or later with `landlock` in the boot's `lsm=` list \
             (CONFIG_SECURITY_LANDLOCK)"
        ),
        false,
    )
}

/// Landlock, and a mount namespace for an effect (root, or user namespaces allowed).
pub fn landlock_and_namespaces(test: &str) -> bool {
    landlock(test)
        && met(
            test,
            "mount namespaces",
            "run as root, or where unprivileged user namespaces are allowed \
             (`sysctl kernel.unprivileged_userns_clone=1`, or AppArmor's \
             `kernel.apparmor_restrict_unprivileged_userns=0`)",
            protocol_run::effects::sandbox::maps_only_granted_code(),
        )
}
