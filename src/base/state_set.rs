//! A set of states as a bit set over state indices: iteration is document order for free.

use crate::base::ids::StateId;

/// A set of states. Ascending iteration is entry order; descending is exit order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateSet {
    words: Vec<u64>,
}

impl StateSet {
    /// An empty set able to hold `capacity` states without growing.
    pub fn with_capacity(capacity: usize) -> StateSet {
        StateSet {
            words: vec![0; capacity.div_ceil(64)],
        }
    }

    pub fn contains(&self, state: StateId) -> bool {
        let index = state.index();
        self.words
            .get(index / 64)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    pub fn insert(&mut self, state: StateId) {
        let index = state.index();
        if index / 64 >= self.words.len() {
            self.words.resize(index / 64 + 1, 0);
        }
        self.words[index / 64] |= 1 << (index % 64);
    }

    pub fn remove(&mut self, state: StateId) {
        let index = state.index();
        if let Some(word) = self.words.get_mut(index / 64) {
            *word &= !(1 << (index % 64));
        }
    }

    pub fn clear(&mut self) {
        // Most machines fit in one word: clearing it in place beats a call to `memset`, which
        // is what the loop becomes (the macrostep clears several sets per event).
        match self.words.as_mut_slice() {
            [word] => *word = 0,
            words => words.fill(0),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|word| *word == 0)
    }

    pub fn len(&self) -> usize {
        self.words
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &StateSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (word, other_word) in self.words.iter_mut().zip(&other.words) {
            *word |= other_word;
        }
    }

    /// Whether the two sets share a member.
    pub fn intersects(&self, other: &StateSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// The member that comes last in document order.
    pub fn last(&self) -> Option<StateId> {
        // Most machines fit in one word.
        if let [word] = self.words.as_slice() {
            return (*word != 0).then(|| StateId(63 - word.leading_zeros()));
        }
        let word_index = self.words.iter().rposition(|word| *word != 0)?;
        let bit = 63 - self.words[word_index].leading_zeros() as usize;
        Some(StateId((word_index * 64 + bit) as u32))
    }

    /// Members in document order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = StateId> + '_ {
        self.words
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
}
