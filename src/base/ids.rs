//! The indices a compiled machine numbers its states, transitions and known event names by.

/// A state's index. States are numbered in document order (pre-order), with the root at 0,
/// so `a < b` means `a` comes first in the document and descendants form a contiguous range.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct StateId(pub u32);

impl StateId {
    pub const ROOT: StateId = StateId(0);

    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A transition's index, in document order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransitionId(pub u32);

impl TransitionId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An event name known when the machine was compiled, as an index. Events with other names
/// are matched by string (slower, still correct).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct EventType(pub u32);
