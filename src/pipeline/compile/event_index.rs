//! Which known event types each transition matches, and the candidate table per atomic state and event type, both built in time linear in the protocol.

use std::collections::HashMap;
use std::sync::Arc;

use super::machine::{
    EventDescriptor, EventType, LeafPlan, StateId, StateNode, TransitionId, TransitionNode,
};

/// The known event types a transition's descriptors match. A list is shared by every
/// transition with the same descriptor, so a descriptor matching many types (`a` for `a.1` …
/// `a.50000`) costs its list once, not once per transition.
#[derive(Debug, Default)]
pub struct KnownMatches {
    /// For each prefix descriptor that matches anything, the types it matches, ascending.
    lists: Vec<Arc<[u32]>>,
    /// Present when a descriptor is `*`: which types are private timers, the only ones it
    /// does not match.
    wildcard: Option<Arc<[bool]>>,
}

impl KnownMatches {
    pub fn contains(&self, event_type: EventType) -> bool {
        let index = event_type.0;
        self.lists
            .iter()
            .any(|list| list.binary_search(&index).is_ok())
            || self
                .wildcard
                .as_ref()
                .is_some_and(|private| !private.get(index as usize).copied().unwrap_or(false))
    }

    /// Replaces `types` by the matched types, ascending, each once.
    fn collect_into(&self, types: &mut Vec<u32>) {
        types.clear();
        if let Some(private) = &self.wildcard {
            types.extend((0..private.len() as u32).filter(|index| !private[*index as usize]));
        }
        for list in &self.lists {
            types.extend_from_slice(list);
        }
        // Descriptors overlap (`a` and `a.b` both match `a.b`): the transition is one candidate.
        if self.lists.len() + usize::from(self.wildcard.is_some()) > 1 {
            types.sort_unstable();
            types.dedup();
        }
    }
}

/// Matches descriptors against the known event names by lookup: each name is filed under
/// each of its dot-separated prefixes (`a.b.c` under `a`, `a.b` and `a.b.c`), which is what
/// SCXML prefix matching accepts. A private timer (`after.<state>.<i>`) is filed only under its
/// whole name, so neither `*` nor a prefix swallows a state's own timeouts.
pub struct Matcher<'a> {
    by_prefix: HashMap<&'a str, Arc<[u32]>>,
    private: Arc<[bool]>,
}

impl<'a> Matcher<'a> {
    /// `private[type]` says whether that known event is a private timer.
    pub fn new(event_names: &'a [Arc<str>], private: Vec<bool>) -> Matcher<'a> {
        let mut by_prefix: HashMap<&'a str, Vec<u32>> = HashMap::new();
        for (index, name) in event_names.iter().enumerate() {
            let name: &'a str = name;
            let is_private = private.get(index).copied().unwrap_or(false);
            let prefixes = EventDescriptor::prefixes_matching(name)
                .filter(|prefix| !is_private || prefix.len() == name.len());
            for prefix in prefixes {
                // A name's prefixes differ in length, so each list gets a type once, ascending.
                by_prefix.entry(prefix).or_default().push(index as u32);
            }
        }
        Matcher {
            by_prefix: by_prefix
                .into_iter()
                .map(|(prefix, list)| (prefix, Arc::from(list)))
                .collect(),
            private: Arc::from(private),
        }
    }

    pub fn known_matches(&self, descriptors: &[EventDescriptor]) -> KnownMatches {
        let mut matches = KnownMatches::default();
        for descriptor in descriptors {
            match descriptor {
                EventDescriptor::Any => matches.wildcard = Some(self.private.clone()),
                EventDescriptor::Prefix(prefix) => {
                    if let Some(list) = self.by_prefix.get(&**prefix) {
                        matches.lists.push(list.clone());
                    }
                }
            }
        }
        matches
    }
}

/// One transition an event can trigger from an atomic state.
#[derive(Debug)]
pub struct Candidate {
    pub transition: TransitionId,
    /// Whether the transition has a guard: one without is taken with no look at the transition.
    pub guarded: bool,
    /// What taking it from that state does, worked out by the runtime the first time it is
    /// taken (see `LeafPlan`).
    pub plan: std::sync::OnceLock<LeafPlan>,
}

/// For each atomic state and known event type, the transitions that event triggers from the
/// state, its own first and then each ancestor's, in document order: what `selectTransitions`
/// would find by testing every transition on the way to the root, read as one short slice.
#[derive(Debug)]
pub struct CandidateIndex {
    event_types: usize,
    /// `offsets[state * event_types + type]..offsets[state * event_types + type + 1]` is the
    /// range of `candidates` for that cell.
    offsets: Vec<u32>,
    candidates: Box<[Candidate]>,
    /// For each state, one bit for each of the first 64 event types: set when the cell is empty
    /// and the event is not an error event, so that the event, in that state, is discarded
    /// without a word (see `Instance::ignores`).
    quiet: Vec<u64>,
}

impl CandidateIndex {
    /// Cells (states × event types) and work (transitions visited and entries filed) above which
    /// no table is built: a bigger machine selects by testing transitions, which is slower but
    /// takes no memory.
    const MAX_CELLS: usize = 1 << 20;
    const MAX_WORK: usize = 1 << 22;

    pub fn build(
        states: &[StateNode],
        transitions: &[TransitionNode],
        error_types: &[bool],
    ) -> Option<CandidateIndex> {
        let event_types = error_types.len();
        let cells = states.len().checked_mul(event_types)?;
        if cells > Self::MAX_CELLS {
            return None;
        }
        let mut offsets = Vec::with_capacity(cells + 1);
        let mut found = Vec::new();
        let mut quiet = vec![0u64; states.len()];
        // One state's (event type, transition) pairs, in selection order, then by type.
        let mut filed: Vec<(u32, TransitionId)> = Vec::new();
        let mut types = Vec::new();
        let mut work = 0usize;
        offsets.push(0);
        for (index, state) in states.iter().enumerate() {
            filed.clear();
            if state.is_atomic() {
                let chain =
                    std::iter::once(StateId(index as u32)).chain(state.ancestors.iter().copied());
                for owner in chain {
                    for &transition in &states[owner.index()].transitions {
                        transitions[transition.index()]
                            .known_matches
                            .collect_into(&mut types);
                        work += 1 + types.len();
                        if work > Self::MAX_WORK {
                            return None;
                        }
                        filed.extend(types.iter().map(|event_type| (*event_type, transition)));
                    }
                }
                // Stable, so each type keeps the selection order.
                filed.sort_by_key(|(event_type, _)| *event_type);
            }
            let mut pending = filed.iter().peekable();
            for (type_index, is_error) in error_types.iter().enumerate() {
                while let Some((_, transition)) =
                    pending.next_if(|(event_type, _)| *event_type as usize == type_index)
                {
                    found.push(*transition);
                }
                let end = u32::try_from(found.len()).ok()?;
                if state.is_atomic() && type_index < 64 && offsets.last() == Some(&end) && !is_error
                {
                    quiet[index] |= 1 << type_index;
                }
                offsets.push(end);
            }
        }
        Some(CandidateIndex {
            event_types,
            offsets,
            candidates: found
                .into_iter()
                .map(|transition| Candidate {
                    transition,
                    guarded: transitions[transition.0 as usize].guard.is_some(),
                    plan: std::sync::OnceLock::new(),
                })
                .collect(),
            quiet,
        })
    }

    /// The event types (of the first 64) that trigger no transition from the atomic `state`
    /// and are not error events, as a bit set.
    pub fn quiet_events(&self, state: StateId) -> u64 {
        self.quiet.get(state.index()).copied().unwrap_or(0)
    }

    /// The transitions `event_type` can trigger from the atomic state `state`, in selection
    /// order, each with its plan from `state`.
    #[inline]
    pub fn candidates(&self, state: StateId, event_type: EventType) -> &[Candidate] {
        let cell = state.index() * self.event_types + event_type.0 as usize;
        // One bounds check for both ends of the cell.
        match self.offsets.get(cell..cell + 2) {
            Some(&[start, end]) => &self.candidates[start as usize..end as usize],
            _ => &[],
        }
    }
}
