//! The suite on a kernel without Landlock, made by a seccomp filter on this test binary run again (its syscalls fail with `ENOSYS`, as on a kernel built without it): the sandbox tests skip with their line, fail under `PROTOCOL_RUN_REQUIRE_ALL`, and the tests that pin output pass on both kinds of kernel.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

/// Landlock's three system calls on x86-64 (`landlock_create_ruleset`, `_add_rule`,
/// `_restrict_self`).
const LANDLOCK_CALLS: (u32, u32) = (444, 446);

/// `struct sock_filter`.
#[repr(C)]
struct Instruction {
    code: u16,
    jump_true: u8,
    jump_false: u8,
    operand: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct Program {
    length: u16,
    instructions: *const Instruction,
}

/// Installs, in the calling (forked) process, a filter under which Landlock's calls fail with
/// `ENOSYS`; every process it starts inherits it. System calls only.
fn without_landlock() -> std::io::Result<()> {
    const LOAD_WORD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JUMP_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JUMP_GREATER_EQUAL: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const JUMP_GREATER: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    const ARCH_X86_64: u32 = 0xc000_003e;
    let instruction = |code, jump_true, jump_false, operand| Instruction {
        code,
        jump_true,
        jump_false,
        operand,
    };
    let filter = [
        instruction(LOAD_WORD, 0, 0, 4), // seccomp_data.arch
        instruction(JUMP_EQUAL, 1, 0, ARCH_X86_64),
        instruction(RETURN, 0, 0, ALLOW),
        instruction(LOAD_WORD, 0, 0, 0), // seccomp_data.nr
        instruction(JUMP_GREATER_EQUAL, 0, 2, LANDLOCK_CALLS.0),
        instruction(JUMP_GREATER, 1, 0, LANDLOCK_CALLS.1),
        instruction(RETURN, 0, 0, ERRNO | nix::libc::ENOSYS as u32),
        instruction(RETURN, 0, 0, ALLOW),
    ];
    let program = Program {
        length: filter.len() as u16,
        instructions: filter.as_ptr(),
    };
    // SAFETY: prctl with a filter program that outlives the call.
    unsafe {
        if nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || nix::libc::prctl(
                nix::libc::PR_SET_SECCOMP,
                nix::libc::SECCOMP_MODE_FILTER,
                &program as *const Program,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// This test binary run again without Landlock on `filters` (exact test names), with or
/// without `PROTOCOL_RUN_REQUIRE_ALL`.
pub fn run_without_landlock(filters: &[&str], require_all: bool) -> Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(filters)
        .args(["--exact", "--test-threads=2"])
        .env_remove(crate::support::requirement::REQUIRE_ALL);
    if require_all {
        command.env(crate::support::requirement::REQUIRE_ALL, "1");
    }
    // SAFETY: the filter is installed with system calls only, between fork and exec.
    unsafe {
        command.pre_exec(without_landlock);
    }
    command.output().unwrap()
}

#[test]
#[ignore = "the whole suite again, 70 s: `cargo test --test integration -- --ignored survey`"]
fn survey_the_whole_suite_without_landlock() {
    let output = run_without_landlock(&[], false);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{text}");
}

/// The sandbox tests, and the tests that pin output a kernel without Landlock adds a warning to.
const KERNEL_TESTS: [&str; 6] = [
    "sandbox::a_granted_program_cannot_read_outside_read",
    "exec_routes::git_runs_under_its_grants",
    "cli::json_logs_carry_tags_as_an_array",
    "cli_conventions::stats_prints_a_table_and_sums_the_runs_of_a_protocol",
    "defaults::run_and_check_warn_when_a_protocol_declares_no_permissions",
    "mcp_telemetry::a_runs_telemetry_is_a_resource_bounded_to_its_latest_records",
];

/// The filter names x86-64's system calls: elsewhere the test cannot make Landlock fail.
#[cfg(target_arch = "x86_64")]
#[test]
fn without_landlock_the_kernel_tests_skip_saying_so_or_fail_where_all_must_run() {
    if !crate::support::requirement::landlock("without_landlock") {
        // Already without it: the suite at large shows the same.
        return;
    }
    let skipped = run_without_landlock(&KERNEL_TESTS, false);
    let stderr = String::from_utf8_lossy(&skipped.stderr);
    let stdout = String::from_utf8_lossy(&skipped.stdout);
    assert!(skipped.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("SKIPPED cat: needs Landlock: this kernel is built without Landlock")
            && stderr.contains("SKIPPED git under grants: needs Landlock"),
        "{stdout}{stderr}"
    );
    assert!(stdout.contains("6 passed"), "{stdout}");

    let required = run_without_landlock(&KERNEL_TESTS, true);
    let stdout = String::from_utf8_lossy(&required.stdout);
    assert!(!required.status.success(), "{stdout}");
    // The two kernel tests fail, naming what is missing; the four that pin output pass.
    assert!(
        stdout.contains("2 failed") && stdout.contains("4 passed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("needs Landlock, which is missing (PROTOCOL_RUN_REQUIRE_ALL is set)"),
        "{stdout}"
    );
}
