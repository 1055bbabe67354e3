//! An expression → `Expression::compile` → `evaluate` and `evaluate_with_cel` (which must agree when the fast path answers), and the same text as a `Template`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI refuses text that is not UTF-8 before any of this runs.
    if let Ok(text) = std::str::from_utf8(data) {
        protocol_run_fuzz::expressions(text);
    }
});
