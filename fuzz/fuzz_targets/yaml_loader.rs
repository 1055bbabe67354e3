//! YAML text → the reader (`load::yaml::parse`) and the whole loader (`load::load_text`): no panic, every error located.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI refuses text that is not UTF-8 before any of this runs.
    if let Ok(text) = std::str::from_utf8(data) {
        protocol_run_fuzz::yaml_loader(text);
    }
});
