//! W3C trace context (`TRACEPARENT`): its parsing, and the span ids an exported run gives its effect attempts, so the program an attempt starts can join the span that stands for it.

/// The environment variable that carries a trace context into a run and into its effects.
pub const TRACEPARENT_VARIABLE: &str = "TRACEPARENT";

/// A parent span named by a `traceparent` value (`00-TRACE-SPAN-FLAGS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
}

impl TraceParent {
    /// Reads a `traceparent` value as W3C Trace Context version 00 writes it; `None` for
    /// anything else (an all-zero id included), which the specification says to ignore.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || !is_hex(version) {
            return None;
        }
        // Version 00 has exactly four fields; a later version may add more after them.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let trace_id: [u8; 16] = from_hex(trace)?;
        let span_id: [u8; 8] = from_hex(span)?;
        let [flags]: [u8; 1] = from_hex(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The `traceparent` value naming this span.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            to_hex(&self.trace_id),
            to_hex(&self.span_id),
            u8::from(self.sampled)
        )
    }
}

/// What an effect needs to name its attempts' spans: the run's trace, and the seed of the
/// exporting session's span ids with the effect's invocation. The attempt is set before each
/// attempt starts (`run_with_plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectTrace {
    pub trace_id: [u8; 16],
    pub seed: u64,
    pub invocation: u64,
    pub attempt: u32,
}

impl EffectTrace {
    /// The `traceparent` of this attempt's span.
    pub fn traceparent(&self) -> String {
        TraceParent {
            trace_id: self.trace_id,
            span_id: attempt_span_id(self.seed, self.invocation, self.attempt),
            sampled: true,
        }
        .header()
    }
}

/// The span id of an effect's attempt: computed alike by the exporter and by the effect's task,
/// which never talk to each other before the program starts. Never zero (an invalid id).
pub fn attempt_span_id(seed: u64, invocation: u64, attempt: u32) -> [u8; 8] {
    let mixed = mix(mix(seed ^ invocation.rotate_left(17)) ^ u64::from(attempt));
    let id = if mixed == 0 { 1 } else { mixed };
    id.to_be_bytes()
}

/// The seed of child protocol `id`'s attempt span ids, from its parent's `seed`: the child's
/// effects name their attempts' spans from it, as its parent's trace does (a child's effects
/// are numbered apart from its parent's).
pub fn child_seed(seed: u64, id: &str) -> u64 {
    id.bytes()
        .fold(mix(seed ^ 0x6368_696c_6400_0000), |hash, byte| {
            mix(hash ^ u64::from(byte))
        })
}

/// The trace a child protocol's effects join: its run's trace, and the child's seed
/// (`child_seed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildTrace {
    pub trace_id: [u8; 16],
    pub seed: u64,
}

impl ChildTrace {
    /// The trace of child `id` of this one.
    pub fn child(&self, id: &str) -> ChildTrace {
        ChildTrace {
            trace_id: self.trace_id,
            seed: child_seed(self.seed, id),
        }
    }

    /// The trace the effect `invocation` of this child joins.
    pub fn effect(&self, invocation: u64) -> EffectTrace {
        EffectTrace {
            trace_id: self.trace_id,
            seed: self.seed,
            invocation,
            attempt: 1,
        }
    }
}

/// SplitMix64's finalizer: spreads every input bit over the whole word.
fn mix(mut value: u64) -> u64 {
    value = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

fn is_hex(text: &str) -> bool {
    text.bytes()
        .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// Lower-case hex of exactly `N` bytes, as W3C Trace Context requires.
pub fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !is_hex(text) {
        return None;
    }
    let mut bytes = [0; N];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16).ok()?;
    }
    Some(bytes)
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_round_trips_and_bad_ones_are_ignored() {
        let text = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let parent = TraceParent::parse(text).expect("a valid traceparent");
        assert_eq!(parent.header(), text);
        for bad in [
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn attempts_get_distinct_ids() {
        let first = attempt_span_id(7, 1, 1);
        assert_ne!(first, attempt_span_id(7, 1, 2));
        assert_ne!(first, attempt_span_id(7, 2, 1));
        assert_ne!(first, attempt_span_id(8, 1, 1));
    }
}
