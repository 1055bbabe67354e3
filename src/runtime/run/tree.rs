//! How many child protocols a run tree has alive: one count that a run and all its children (theirs included) share, bounded by `--max-children`, so no protocol can grow a tree that takes the process down.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The live children of one run tree.
#[derive(Debug, Default)]
pub(crate) struct TreeChildren {
    live: AtomicUsize,
    /// The context and pending event data its instances hold, as each last reported it.
    held: AtomicUsize,
}

/// One live child's place in its tree's count, given back when it is dropped (the child ended,
/// was cancelled, or its parent went).
#[derive(Debug)]
pub(crate) struct ChildSlot(Arc<TreeChildren>);

impl TreeChildren {
    /// A place for one more child, or, when `max` are alive, how many are.
    pub(crate) fn take(self: &Arc<Self>, max: usize) -> Result<ChildSlot, usize> {
        let mut live = self.live.load(Ordering::Relaxed);
        loop {
            if live >= max {
                return Err(live);
            }
            match self.live.compare_exchange_weak(
                live,
                live + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(ChildSlot(self.clone())),
                Err(now) => live = now,
            }
        }
    }
}

impl TreeChildren {
    /// Replaces an instance's share of the tree's data, `before`, by `now`; the tree's total.
    pub(crate) fn hold(&self, before: usize, now: usize) -> usize {
        if now >= before {
            self.held.fetch_add(now - before, Ordering::AcqRel) + (now - before)
        } else {
            self.held.fetch_sub(before - now, Ordering::AcqRel) - (before - now)
        }
    }
}

impl Drop for ChildSlot {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_holds_at_most_its_limit_and_a_dropped_child_frees_its_place() {
        let tree = Arc::new(TreeChildren::default());
        let first = tree.take(2).unwrap();
        let _second = tree.take(2).unwrap();
        assert_eq!(tree.take(2).unwrap_err(), 2);
        drop(first);
        assert!(tree.take(2).is_ok());
    }
}
