//! An SCXML document → `import::scxml_to_protocol` → YAML → load and compile, as `import scxml` then `validate` do.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI refuses text that is not UTF-8 before any of this runs.
    if let Ok(text) = std::str::from_utf8(data) {
        protocol_run_fuzz::scxml_import(text);
    }
});
