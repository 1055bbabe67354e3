//! Bounds on how long a command may take, stated in the time the same machine takes, at the same moment, to validate a one-state protocol: a loaded machine slows both alike, so only work that grows out of proportion fails them.

use std::time::{Duration, Instant};

const TINY: &str = "id: tiny\nstates:\n  only: { type: final }\n";

/// How long `protocol-run validate` of a one-state protocol takes now: the median of three runs
/// (process start, load, compile).
pub fn reference() -> Duration {
    // Made once: tests running at once share it.
    static DIRECTORY: std::sync::OnceLock<crate::support::TemporaryDirectory> =
        std::sync::OnceLock::new();
    let directory = DIRECTORY.get_or_init(|| {
        let directory = crate::support::temporary_directory("timing", "reference");
        std::fs::write(directory.join("tiny.yaml"), TINY).unwrap();
        directory
    });
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let started = Instant::now();
            let (code, _, stderr) =
                crate::support::run_binary(directory, &["validate", "tiny.yaml"]);
            assert_eq!(code, 0, "{stderr}");
            started.elapsed()
        })
        .collect();
    times.sort();
    times[1]
}

/// Runs `work` and checks it took at most `times` the reference measured just before it (a
/// reference of at least 10 ms, so a fast machine's few milliseconds do not make the bound
/// tighter than the work's own noise).
pub fn within<T>(what: &str, times: u32, work: impl FnOnce() -> T) -> T {
    let reference = reference().max(Duration::from_millis(10));
    let started = Instant::now();
    let result = work();
    let elapsed = started.elapsed();
    assert!(
        elapsed <= reference * times,
        "{what} took {elapsed:?}, more than {times} times a one-state validate here now \
         ({reference:?})"
    );
    result
}
