//! A run's durable inbox: events any host accepted for a run another host holds, kept in arrival order until the holder applies each once.

/// How many times a holder may take an entry without the step that applies it committing
/// (its host died, or the store refused the step each time) before it is set aside.
pub const MAX_TRIES: u32 = 5;

/// What an inbox entry asks of the run's holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// Take an event, admitted as every sender's is.
    Event,
    /// Cancel the run (`protocol-run cancel`, the inspector): its effects and children stopped,
    /// it finishes with `CANCELLED_EXIT_CODE`. Its own kind, not an event name, so that no
    /// event a protocol may declare can stand for it.
    Cancel,
}

impl EntryKind {
    /// As the `inbox.request` column keeps it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EntryKind::Event => "event",
            EntryKind::Cancel => "cancel",
        }
    }

    /// From the `inbox.request` column (its CHECK allows only these).
    pub(crate) fn parse(text: &str) -> EntryKind {
        match text {
            "cancel" => EntryKind::Cancel,
            _ => EntryKind::Event,
        }
    }
}

/// The name a cancel request is listed under, in the place of an event's.
pub const CANCEL_REQUEST: &str = "cancel";

/// An event, or a cancel request, waiting in a run's inbox for the run's holder.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxEntry {
    pub run: String,
    /// Its number in the run's inbox: 1 for the first, in the order hosts stored them.
    pub entry: u64,
    pub kind: EntryKind,
    /// The event's name (`CANCEL_REQUEST` for a cancel).
    pub event: String,
    pub data: serde_json::Value,
    /// How many times a holder has taken it, this time included.
    pub tries: u32,
}

/// Whose inboxes a take looks at, among the runs its holder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxScope<'a> {
    /// The runs of the protocol at this path (a `serve` host, one fleet for all its runs).
    Protocol(&'a str),
    /// This run alone (an `mcp` server, a fleet for each run).
    Run(&'a str),
}

impl<'a> InboxScope<'a> {
    /// The `runs` column the scope's value is compared with.
    pub(crate) fn column(self) -> &'static str {
        match self {
            InboxScope::Protocol(_) => "protocol_path",
            InboxScope::Run(_) => "id",
        }
    }

    /// The protocol's path or the run's id.
    pub(crate) fn value(self) -> &'a str {
        match self {
            InboxScope::Protocol(value) | InboxScope::Run(value) => value,
        }
    }
}

/// What a holder took from the inboxes of its runs (`Store::take_inbox`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TakenInbox {
    /// To apply, by run and then in arrival order.
    pub entries: Vec<InboxEntry>,
    /// Taken `MAX_TRIES` times without being applied: set aside for good, reported, never
    /// taken again.
    pub set_aside: Vec<InboxEntry>,
}

/// What became of an inbox entry, as its sender reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxState {
    /// Still waiting for the run's holder.
    Pending,
    /// The holder applied it: the outcome (`{"event", "outcome", "reason"?}`), the output
    /// lines its step wrote, and the journal step that consumed it (none when no step was
    /// recorded, as for an event discarded where nothing changed).
    Applied {
        outcome: serde_json::Value,
        output: String,
        step: Option<u64>,
    },
    /// Taken too many times without being applied (`MAX_TRIES`).
    SetAside,
}

/// An entry and what became of it (`Store::inbox_states`).
#[derive(Debug, Clone, PartialEq)]
pub struct InboxRecord {
    pub run: String,
    pub entry: u64,
    pub kind: EntryKind,
    pub event: String,
    /// How many times a holder took it.
    pub tries: u32,
    pub state: InboxState,
}

/// Why an entry was set aside, as a sender and the holder's stderr say it.
pub fn set_aside_reason(tries: u32) -> String {
    format!(
        "set aside after {tries} tries: a holder took it {tries} times and no step applying it \
         was committed (the host died or the store refused the step each time); it will not be \
         taken again"
    )
}
