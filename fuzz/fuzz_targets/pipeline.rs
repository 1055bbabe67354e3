//! A protocol file → load → validate → compile → lint, as `validate` and `check` do: no panic, load errors located.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI refuses text that is not UTF-8 before any of this runs.
    if let Ok(text) = std::str::from_utf8(data) {
        protocol_run_fuzz::pipeline(text);
    }
});
