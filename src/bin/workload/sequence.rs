//! What `workload-bench` and `workload-baseline` share of WORKLOAD.md: its event sequence and hash.

/// The number of events in a pass (WORKLOAD.md's `N`).
pub const EVENTS: usize = 1_000_000;

pub const FNV_OFFSET: u32 = 0x811c_9dc5;

/// One byte into an FNV-1a-32 hash.
pub fn fnv1a(hash: u32, byte: u8) -> u32 {
    (hash ^ u32::from(byte)).wrapping_mul(16_777_619)
}

/// WORKLOAD.md's event sequence, as indices into `[call, ok, fail, ack, healthy]`, and its
/// FNV-1a hash (`ev=` in the checksum line).
pub fn event_sequence() -> (Vec<u8>, u32) {
    let mut seed: u32 = 42;
    let mut event_hash = FNV_OFFSET;
    let sequence = (0..EVENTS)
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let index = ((seed >> 16) % 5) as u8;
            event_hash = fnv1a(event_hash, index);
            index
        })
        .collect();
    (sequence, event_hash)
}
