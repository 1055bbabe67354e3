//! Word of runs whose steps or status a process committed (`Store::watch_runs`), so that a reader following a run is woken rather than looking again and again.

use tokio::sync::broadcast;

/// How many run ids a follower that has not looked yet may fall behind by; one further behind
/// is told it lagged (`RunChange::Lagged`) and looks at its run anyway.
const BACKLOG: usize = 1024;

/// The feed of the runs committed to: each message is a run's id. Clones share the feed.
#[derive(Clone)]
pub struct RunChanges(broadcast::Sender<String>);

impl Default for RunChanges {
    fn default() -> RunChanges {
        RunChanges(broadcast::channel(BACKLOG).0)
    }
}

impl RunChanges {
    /// Tells every follower that `run` was committed to (nobody following is no failure).
    pub fn announce(&self, run: &str) {
        let _ = self.0.send(run.to_string());
    }

    /// A follower, told of the runs committed to from now on.
    pub fn follow(&self) -> RunFollower {
        RunFollower(self.0.subscribe())
    }
}

/// One follower of `RunChanges`.
pub struct RunFollower(broadcast::Receiver<String>);

impl RunFollower {
    /// Waits until `run`, or the run that records it as a child (`root/child`), is committed
    /// to, or until some word may have been missed (the follower fell behind): either way the
    /// run is worth looking at again. `false` once the feed has ended (its store is gone).
    /// Word heard since the last call is answered at once, all of it by one look: a run
    /// committing faster than its follower looks costs one look per look, not one per commit.
    pub async fn changed(&mut self, run: &str) -> bool {
        let mut heard = false;
        loop {
            match self.0.try_recv() {
                Ok(changed) => heard |= concerns(&changed, run),
                Err(broadcast::error::TryRecvError::Lagged(_)) => heard = true,
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Closed) => return heard,
            }
        }
        if heard {
            return true;
        }
        loop {
            match self.0.recv().await {
                Ok(changed) if concerns(&changed, run) => return true,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return true,
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    }
}

/// Whether word of `changed` is word of `run`: the run itself, or its root, whose steps write
/// the rows of its children (`root/path`).
fn concerns(changed: &str, run: &str) -> bool {
    run == changed
        || run
            .strip_prefix(changed)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_concerned_by_itself_and_its_root_only() {
        assert!(concerns("a", "a"));
        assert!(concerns("a", "a/child/grandchild"));
        assert!(!concerns("a", "ab"));
        assert!(!concerns("a/child", "a"));
        assert!(!concerns("b", "a"));
    }

    /// Whether `follower` is woken for `run` without waiting.
    async fn woken_at_once(follower: &mut RunFollower, run: &str) -> bool {
        tokio::select! {
            biased;
            woken = follower.changed(run) => woken,
            () = std::future::ready(()) => false,
        }
    }

    #[test]
    fn word_heard_while_looking_is_answered_by_one_look() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let changes = RunChanges::default();
            let mut follower = changes.follow();
            for run in ["mine", "other", "mine/child", "mine"] {
                changes.announce(run);
            }
            assert!(woken_at_once(&mut follower, "mine").await);
            assert!(!woken_at_once(&mut follower, "mine").await);
            changes.announce("other");
            assert!(!woken_at_once(&mut follower, "mine").await);
            changes.announce("mine");
            assert!(woken_at_once(&mut follower, "mine").await);
        });
    }

    #[test]
    fn a_follower_wakes_for_its_run_and_when_it_fell_behind() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let changes = RunChanges::default();
            let mut follower = changes.follow();
            changes.announce("other");
            changes.announce("mine");
            assert!(follower.changed("mine").await);
            for _ in 0..=BACKLOG {
                changes.announce("other");
            }
            assert!(
                follower.changed("mine").await,
                "a lagging follower looks again"
            );
        });
    }
}
