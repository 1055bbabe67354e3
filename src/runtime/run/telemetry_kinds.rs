//! Which telemetry entries the store keeps of a run, and which a child protocol tells its parent.

/// Whether entries of `kind` are kept in the store: those `logs`, `stats` and the inspector's
/// timeline read (log lines, effects' attempts and ends, the steps, starts, resumes and
/// finishes that say the states, maps' starts and ends, and the `child` entries that hold a
/// child protocol's own). The others are the journal's already (transitions taken,
/// directives, effects started) or tell a sender what became of its line; `events.jsonl`
/// keeps every kind. Kept once, a durable run's commits grow by its log lines and one entry a
/// step (its children's included), not by a copy of its journal.
pub fn read_by_logs_or_stats(kind: &str) -> bool {
    matches!(
        kind,
        "log"
            | "effect"
            | "attempt"
            | "step"
            | "start"
            | "resume"
            | "finish"
            | "map_started"
            | "map"
            | "child"
    )
}

/// Whether a child protocol's entries of `kind` are told to its parent, which keeps them as
/// `child` entries (`driver::child_entry`): what the inspector's timeline draws of a child
/// inside its parent. Its log lines reach the parent as log lines already.
pub fn kept_of_a_child(kind: &str) -> bool {
    kind != "log" && kind != "child" && read_by_logs_or_stats(kind)
}
