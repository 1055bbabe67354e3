//! A set of states as a bit set over state indices: iteration is document order for free.

use crate::base::ids::StateId;

/// A set of states. Ascending iteration is entry order; descending is exit order.
#[derive(Clone, Default)]
pub struct StateSet {
    words: Words,
}

/// The words of a set: one, in place, for a machine of at most 64 states (nearly all), so
/// that an instance's configuration is no allocation of its own; more on the heap.
#[derive(Clone)]
enum Words {
    One(u64),
    Many(Vec<u64>),
}

impl Default for Words {
    fn default() -> Self {
        Words::One(0)
    }
}

impl PartialEq for StateSet {
    fn eq(&self, other: &Self) -> bool {
        self.words() == other.words()
    }
}

impl Eq for StateSet {}

impl std::fmt::Debug for StateSet {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StateSet")
            .field("words", &self.words())
            .finish()
    }
}

impl StateSet {
    /// An empty set able to hold `capacity` states without growing.
    pub fn with_capacity(capacity: usize) -> StateSet {
        let words = match capacity.div_ceil(64) {
            0 | 1 => Words::One(0),
            count => Words::Many(vec![0; count]),
        };
        StateSet { words }
    }

    #[inline]
    fn words(&self) -> &[u64] {
        match &self.words {
            Words::One(word) => std::slice::from_ref(word),
            Words::Many(words) => words,
        }
    }

    #[inline]
    fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.words {
            Words::One(word) => std::slice::from_mut(word),
            Words::Many(words) => words,
        }
    }

    /// Makes room for `count` words.
    #[cold]
    fn grow(&mut self, count: usize) {
        let mut words = self.words().to_vec();
        words.resize(count, 0);
        self.words = Words::Many(words);
    }

    // The one-word set, the common case, is answered first without a slice or a bounds check.

    pub fn contains(&self, state: StateId) -> bool {
        let index = state.index();
        if let Words::One(word) = &self.words {
            return index < 64 && word & (1 << index) != 0;
        }
        self.words()
            .get(index / 64)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    pub fn insert(&mut self, state: StateId) {
        let index = state.index();
        if let Words::One(word) = &mut self.words
            && index < 64
        {
            *word |= 1 << index;
            return;
        }
        if index / 64 >= self.words().len() {
            self.grow(index / 64 + 1);
        }
        self.words_mut()[index / 64] |= 1 << (index % 64);
    }

    pub fn remove(&mut self, state: StateId) {
        let index = state.index();
        if let Words::One(word) = &mut self.words {
            if index < 64 {
                *word &= !(1 << index);
            }
            return;
        }
        if let Some(word) = self.words_mut().get_mut(index / 64) {
            *word &= !(1 << (index % 64));
        }
    }

    /// Takes away the states of `remove`'s bits and adds those of `insert`'s in one step, if
    /// the set is one word (a state in both stays); says whether it was.
    #[inline]
    pub fn change_one_word(&mut self, remove: u64, insert: u64) -> bool {
        if let Words::One(word) = &mut self.words {
            *word = *word & !remove | insert;
            return true;
        }
        false
    }

    pub fn clear(&mut self) {
        // Most machines fit in one word: clearing it in place beats a call to `memset`, which
        // is what the loop becomes (the macrostep clears several sets per event).
        match &mut self.words {
            Words::One(word) => *word = 0,
            Words::Many(words) => words.fill(0),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.words().iter().all(|word| *word == 0)
    }

    pub fn len(&self) -> usize {
        self.words()
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &StateSet) {
        if other.words().len() > self.words().len() {
            self.grow(other.words().len());
        }
        for (word, other_word) in self.words_mut().iter_mut().zip(other.words()) {
            *word |= other_word;
        }
    }

    /// Whether the two sets share a member.
    pub fn intersects(&self, other: &StateSet) -> bool {
        self.words()
            .iter()
            .zip(other.words())
            .any(|(a, b)| a & b != 0)
    }

    /// The member that comes last in document order.
    pub fn last(&self) -> Option<StateId> {
        // Most machines fit in one word.
        let words = match &self.words {
            Words::One(word) => return (*word != 0).then(|| StateId(63 - word.leading_zeros())),
            Words::Many(words) => words,
        };
        let word_index = words.iter().rposition(|word| *word != 0)?;
        let bit = 63 - words[word_index].leading_zeros() as usize;
        Some(StateId((word_index * 64 + bit) as u32))
    }

    /// Members in document order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = StateId> + '_ {
        self.words()
            .iter()
            .enumerate()
            .flat_map(|(word_index, word)| {
                Bits(*word).map(move |bit| StateId((word_index * 64 + bit) as u32))
            })
    }

    /// Members in reverse document order (exit order).
    pub fn iter_reverse(&self) -> impl Iterator<Item = StateId> + '_ {
        self.iter().rev()
    }
}

/// The set bits of one word, lowest first (or highest first from the back).
struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let bit = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(bit)
    }
}

impl DoubleEndedIterator for Bits {
    fn next_back(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let bit = 63 - self.0.leading_zeros() as usize;
        self.0 &= !(1 << bit);
        Some(bit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterates_in_both_orders_across_words() {
        let mut set = StateSet::with_capacity(130);
        for index in [129, 3, 64, 0, 70] {
            set.insert(StateId(index));
        }
        let forward: Vec<u32> = set.iter().map(|s| s.0).collect();
        assert_eq!(forward, [0, 3, 64, 70, 129]);
        let backward: Vec<u32> = set.iter_reverse().map(|s| s.0).collect();
        assert_eq!(backward, [129, 70, 64, 3, 0]);
        assert_eq!(set.last(), Some(StateId(129)));
        set.remove(StateId(64));
        assert!(!set.contains(StateId(64)) && set.contains(StateId(70)));
        assert_eq!(set.len(), 4);
        assert_eq!(StateSet::with_capacity(130).last(), None);
    }

    /// A one-word set takes away and adds states by their bits in one step (a state in both
    /// stays); a set of several words says it is not one and is left as it was.
    #[test]
    fn a_one_word_set_changes_in_one_step() {
        let mut set = StateSet::with_capacity(10);
        set.insert(StateId(1));
        set.insert(StateId(2));
        assert!(set.change_one_word(1 << 2 | 1 << 3, 1 << 3 | 1 << 5));
        assert_eq!(set.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 3, 5]);
        let mut large = StateSet::with_capacity(130);
        large.insert(StateId(100));
        assert!(!large.change_one_word(u64::MAX, 1));
        assert_eq!(large.iter().map(|s| s.0).collect::<Vec<_>>(), [100]);
    }

    /// A one-word set grows onto the heap when a state past the first 64 joins it, and keeps
    /// its members; a union with a larger set does the same.
    #[test]
    fn a_one_word_set_grows_past_64_states() {
        let mut set = StateSet::with_capacity(10);
        set.insert(StateId(5));
        set.insert(StateId(100));
        assert_eq!(set.iter().map(|s| s.0).collect::<Vec<_>>(), [5, 100]);
        assert_eq!(set.last(), Some(StateId(100)));
        set.remove(StateId(100));
        assert_eq!(set.last(), Some(StateId(5)));
        let mut small = StateSet::default();
        small.insert(StateId(1));
        let mut large = StateSet::with_capacity(200);
        large.insert(StateId(150));
        small.union_with(&large);
        assert!(small.contains(StateId(1)) && small.contains(StateId(150)));
        assert!(!small.contains(StateId(64)) && small.len() == 2);
        assert!(small.intersects(&large));
        small.clear();
        assert!(small.is_empty() && !small.contains(StateId(1)));
    }
}
