//! Where each node of a YAML document starts, by JSON pointer: every pointer in one text, found through a hash table.

use std::hash::BuildHasher;

use crate::base::diagnostic::Position;

/// Where a node's value starts and, for a mapping entry, where its key starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePosition {
    pub value: Position,
    pub key: Option<Position>,
}

/// Positions of every node, by JSON pointer.
///
/// The pointers are written one after another into one text, and an open-addressing table of
/// entry numbers finds them: recording a node allocates nothing of its own. A map of `String`s
/// cost an allocation per node, a second for each collection (the copy its children extend),
/// the formatting of each pointer and as many frees at the end: a fifth of reading ITTW.
#[derive(Debug, Clone, Default)]
pub struct Positions {
    /// Every recorded pointer (and the pointers of duplicate keys, which are not recorded),
    /// each written once.
    pointers: String,
    entries: Vec<Entry>,
    /// Entry number + 1 in each slot, 0 when empty; a power of two long and at most half full,
    /// so a probe ends at an empty slot.
    slots: Vec<usize>,
    /// Seeded per process, so a file cannot be written to make every pointer collide.
    hasher: foldhash::fast::RandomState,
}

/// Where one pointer lies in `Positions::pointers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PointerSpan {
    start: usize,
    end: usize,
}

impl PointerSpan {
    pub(crate) fn len(self) -> usize {
        self.end - self.start
    }
}

#[derive(Debug, Clone)]
struct Entry {
    pointer: PointerSpan,
    hash: u64,
    node: NodePosition,
}

/// Line 1, column 1: where a problem without a node of its own is placed.
pub(crate) const START_OF_FILE: Position = Position {
    line: 1,
    column: 1,
    offset: 0,
};

impl Positions {
    /// Room for about `nodes` nodes whose pointers total about `pointer_bytes`, so that reading
    /// a file rarely grows the table.
    pub(crate) fn with_capacity(nodes: usize, pointer_bytes: usize) -> Self {
        Positions {
            pointers: String::with_capacity(pointer_bytes),
            entries: Vec::with_capacity(nodes),
            slots: vec![0; (nodes * 2).next_power_of_two().max(16)],
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    pub fn get(&self, pointer: &str) -> Option<NodePosition> {
        let hash = self.hasher.hash_one(pointer);
        self.find(pointer, hash)
            .ok()
            .map(|entry| self.entries[entry].node)
    }

    /// The text of a pointer written by `root_pointer`, `item_pointer` or `entry_pointer`.
    pub(crate) fn pointer(&self, span: PointerSpan) -> &str {
        &self.pointers[span.start..span.end]
    }

    /// The root's pointer, the empty one.
    pub(crate) fn root_pointer(&self) -> PointerSpan {
        let end = self.pointers.len();
        PointerSpan { start: end, end }
    }

    /// Writes the pointer of the item at `index` of the sequence at `parent`.
    pub(crate) fn item_pointer(&mut self, parent: PointerSpan, index: usize) -> PointerSpan {
        let start = self.start_child(parent);
        push_decimal(&mut self.pointers, index);
        PointerSpan {
            start,
            end: self.pointers.len(),
        }
    }

    /// Writes the pointer of the entry `key` of the mapping at `parent`, escaping the key as a
    /// pointer token (`~` → `~0`, `/` → `~1`).
    pub(crate) fn entry_pointer(&mut self, parent: PointerSpan, key: &str) -> PointerSpan {
        let start = self.start_child(parent);
        self.pointers
            .push_str(&super::yaml::escape_pointer_token(key));
        PointerSpan {
            start,
            end: self.pointers.len(),
        }
    }

    /// Copies the parent's pointer and a `/` to the end of the text; returns where they start.
    fn start_child(&mut self, parent: PointerSpan) -> usize {
        let start = self.pointers.len();
        self.pointers.extend_from_within(parent.start..parent.end);
        self.pointers.push('/');
        start
    }

    /// Records the node at `pointer` unless that pointer has a node already: on a duplicate key
    /// the first occurrence keeps its positions. Returns whether it was recorded.
    pub(crate) fn insert(&mut self, pointer: PointerSpan, node: NodePosition) -> bool {
        if (self.entries.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let text = self.pointer(pointer);
        let hash = self.hasher.hash_one(text);
        let Err(slot) = self.find(text, hash) else {
            return false;
        };
        self.entries.push(Entry {
            pointer,
            hash,
            node,
        });
        self.slots[slot] = self.entries.len();
        true
    }

    /// The entry holding `pointer`, or the empty slot where it would go.
    fn find(&self, pointer: &str, hash: u64) -> Result<usize, usize> {
        if self.slots.is_empty() {
            return Err(0);
        }
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            match self.slots[slot] {
                0 => return Err(slot),
                number => {
                    let entry = &self.entries[number - 1];
                    if entry.hash == hash && self.pointer(entry.pointer) == pointer {
                        return Ok(number - 1);
                    }
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Doubles the table and puts every entry back in it.
    fn grow(&mut self) {
        let length = (self.slots.len() * 2).max(16);
        self.slots = vec![0; length];
        let mask = length - 1;
        for (index, entry) in self.entries.iter().enumerate() {
            let mut slot = entry.hash as usize & mask;
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = index + 1;
        }
    }

    /// Every recorded pointer with its node, in the order they were recorded.
    fn iter(&self) -> impl Iterator<Item = (&str, NodePosition)> {
        self.entries
            .iter()
            .map(|entry| (self.pointer(entry.pointer), entry.node))
    }

    /// Forgets the item at `index` of the list at `list` and moves each later item (with its
    /// descendants) up one place, as removing it from the document does.
    pub fn remove_list_item(&mut self, list: &str, index: usize) {
        let prefix = format!("{list}/");
        let mut moved = Positions::with_capacity(self.entries.len(), self.pointers.len());
        let mut renamed = String::new();
        for (pointer, node) in self.iter() {
            let pointer = match pointer.strip_prefix(&prefix).map(|rest| {
                rest.find('/')
                    .map_or((rest, ""), |slash| (&rest[..slash], &rest[slash..]))
            }) {
                Some((token, below)) => match token.parse::<usize>() {
                    Ok(position) if position == index => continue,
                    Ok(position) if position > index => {
                        renamed.clear();
                        renamed.push_str(&prefix);
                        push_decimal(&mut renamed, position - 1);
                        renamed.push_str(below);
                        renamed.as_str()
                    }
                    _ => pointer,
                },
                None => pointer,
            };
            let start = moved.pointers.len();
            moved.pointers.push_str(pointer);
            let span = PointerSpan {
                start,
                end: moved.pointers.len(),
            };
            moved.insert(span, node);
        }
        *self = moved;
    }

    /// The first and last offsets at which the node at `pointer` or one of its descendants
    /// starts (a key or a value); `None` when nothing there is located.
    pub fn extent(&self, pointer: &str) -> Option<(usize, usize)> {
        let inside = |candidate: &str| {
            candidate == pointer
                || candidate
                    .strip_prefix(pointer)
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        self.iter()
            .filter(|(candidate, _)| inside(candidate))
            .flat_map(|(_, node)| node.key.into_iter().chain([node.value]))
            .map(|position| position.offset)
            .fold(None, |extent, offset| match extent {
                None => Some((offset, offset)),
                Some((first, last)) => Some((first.min(offset), last.max(offset))),
            })
    }

    /// The position of the node, or of its nearest ancestor that has one (walk up the pointer); root at 1:1 if nothing matches.
    pub fn nearest(&self, pointer: &str) -> NodePosition {
        let mut current = pointer;
        loop {
            if let Some(found) = self.get(current) {
                return found;
            }
            match current.rsplit_once('/') {
                Some((parent, _)) => current = parent,
                None if !current.is_empty() => current = "",
                None => break,
            }
        }
        NodePosition {
            value: START_OF_FILE,
            key: None,
        }
    }
}

/// Appends `number` in decimal, without going through `fmt`.
fn push_decimal(text: &mut String, number: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = number;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[at..] {
        text.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::load::yaml::{YamlLimits, escape_pointer_token, parse};
    use serde_json::Value;

    /// Block and flow collections, keys needing escapes, text that is not ASCII, a line break
    /// of each kind, block and quoted scalars, empty values, a list of mappings, deep nesting.
    const VARIED: &str = "id: varied\r\nstates:\n  idle:\n    on: {go: [a, 'b', \"c\"], \
        stop: {}}\n    'a/b~c': \u{e9}\u{2192}\n    empty:\n  busy:\n    - x: 1\n      y: [1, \
        [2, [3, {z: ~}]]]\n    - |\n      block\n      text\n    - >-\n      folded\n    - []\n\
        \u{e9}t\u{e9}: \"d\u{e9}j\u{e0}\"\rlast:\n- - - deep\n";

    /// Every node's pointer, the root's first, in document order.
    fn pointers_of(value: &Value, pointer: String, into: &mut Vec<String>) {
        into.push(pointer.clone());
        match value {
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    pointers_of(item, format!("{pointer}/{index}"), into);
                }
            }
            Value::Object(entries) => {
                for (key, item) in entries {
                    pointers_of(
                        item,
                        format!("{pointer}/{}", escape_pointer_token(key)),
                        into,
                    );
                }
            }
            _ => {}
        }
    }

    /// The line and column of a byte offset, counting characters, with `\n`, `\r\n` and `\r`
    /// as breaks.
    fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
        let before = &text[..offset];
        let line_start = before.rfind(['\n', '\r']).map_or(0, |at| at + 1);
        let lines = before.matches("\r\n").count()
            + before.matches('\n').count()
            + before.matches('\r').count()
            - 2 * before.matches("\r\n").count();
        (lines + 1, before[line_start..].chars().count() + 1)
    }

    #[test]
    fn every_node_is_found_at_its_key_and_value() {
        let document = parse(VARIED, &YamlLimits::default()).unwrap();
        let positions = &document.positions;
        let mut pointers = Vec::new();
        pointers_of(&document.value, String::new(), &mut pointers);
        // Exactly the document's nodes, in document order.
        let recorded: Vec<&str> = positions.iter().map(|(pointer, _)| pointer).collect();
        assert_eq!(recorded, pointers);
        for pointer in &pointers {
            let node = positions.get(pointer).unwrap();
            for position in node.key.into_iter().chain([node.value]) {
                assert_eq!(
                    line_and_column(VARIED, position.offset),
                    (position.line, position.column),
                    "{pointer}"
                );
            }
            // A key is found at its text; the root and items have none.
            let (_, last) = pointer.rsplit_once('/').unwrap_or(("", ""));
            match node.key {
                Some(key) => {
                    let token = last.replace("~1", "/").replace("~0", "~");
                    let at = &VARIED[key.offset..];
                    assert!(
                        at.starts_with(&token) || at.starts_with(&format!("'{token}'")),
                        "{pointer}: {at:?}"
                    );
                }
                None => assert!(pointer.is_empty() || last.parse::<usize>().is_ok()),
            }
        }
        let at = |pointer: &str| {
            let node = positions.get(pointer).unwrap();
            (
                node.key.map(|key| (key.line, key.column, key.offset)),
                (node.value.line, node.value.column, node.value.offset),
            )
        };
        assert_eq!(at(""), (None, (1, 1, 0)));
        assert_eq!(at("/id"), (Some((1, 1, 0)), (1, 5, 4)));
        assert_eq!(at("/states/idle/on/go/1"), (None, (4, 18, 45)));
        assert_eq!(at("/states/idle/a~1b~0c"), (Some((5, 5, 70)), (5, 14, 79)));
        assert_eq!(at("/states/idle/empty").0, Some((6, 5, 89)));
        assert_eq!(
            at("/states/busy/0/y/1/1/1/z"),
            (Some((9, 23, 137)), (9, 26, 140))
        );
        // saphyr starts a block scalar at its text, not at its `|`.
        assert_eq!(at("/states/busy/1"), (None, (11, 7, 160)));
        assert_eq!(at("/states/busy/3"), (None, (15, 7, 205)));
        assert_eq!(at("/\u{e9}t\u{e9}"), (Some((16, 1, 208)), (16, 6, 215)));
        assert_eq!(at("/last/0/0/0"), (None, (18, 7, 236)));
        assert_eq!(positions.get("/states/busy/4"), None);
        assert_eq!(positions.get("/states/idle/a/b~c"), None);
    }

    #[test]
    fn a_table_grown_many_times_finds_every_pointer() {
        // One line, so the first guess of the table's size is far too small.
        let items: Vec<String> = (0..5000)
            .map(|item| format!("{{k{item}: {item}}}"))
            .collect();
        let text = format!("[{}]", items.join(", "));
        let document = parse(&text, &YamlLimits::default()).unwrap();
        for item in 0..5000 {
            let node = document.positions.get(&format!("/{item}/k{item}")).unwrap();
            let key = node.key.unwrap();
            assert!(text[key.offset..].starts_with(&format!("k{item}:")));
            assert!(
                document
                    .positions
                    .get(&format!("/{item}/k{}", item + 1))
                    .is_none()
            );
        }
        assert_eq!(document.positions.iter().count(), 1 + 2 * 5000);
    }

    #[test]
    fn removing_a_list_item_moves_the_later_ones_up() {
        let mut positions = parse(VARIED, &YamlLimits::default()).unwrap().positions;
        let before = positions.clone();
        positions.remove_list_item("/states/busy", 1);
        assert_eq!(
            positions.get("/states/busy/0/y/1/0"),
            before.get("/states/busy/0/y/1/0")
        );
        assert_eq!(
            positions.get("/states/busy/1"),
            before.get("/states/busy/2")
        );
        assert_eq!(
            positions.get("/states/busy/2"),
            before.get("/states/busy/3")
        );
        assert_eq!(positions.get("/states/busy/3"), None);
        assert_eq!(positions.get("/last/0/0/0"), before.get("/last/0/0/0"));
        assert_eq!(positions.iter().count(), before.iter().count() - 1);
        // The nodes of the list are where they were, less the removed item.
        let offset = |positions: &Positions, pointer| positions.get(pointer).unwrap().value.offset;
        assert_eq!(
            positions.extent("/states/busy"),
            Some((
                before.get("/states/busy").unwrap().key.unwrap().offset,
                offset(&before, "/states/busy/3")
            ))
        );
        assert_eq!(positions.extent("/nothing"), None);
    }
}
