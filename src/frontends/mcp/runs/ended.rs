//! The runs that ended in this server, their last views kept for `get_run`, `get_logs` and `get_diagram`: the newest `MAX_ENDED_VIEWS`, older ones answered from the store.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use crate::frontends::mcp::runs::report::RunView;
use crate::pipeline::compile::machine::Machine;

/// The most ended runs whose views a server keeps: a view holds up to a thousand log lines and
/// directives, so a server that ran many runs answers the older ones from the store.
pub const MAX_ENDED_VIEWS: usize = 100;

/// An ended run's protocol and what its output said.
pub(in crate::frontends::mcp) struct EndedRun {
    pub(in crate::frontends::mcp) machine: Arc<Machine>,
    pub(in crate::frontends::mcp) view: Rc<RefCell<RunView>>,
}

/// The newest ended runs, by run id.
#[derive(Default)]
pub(in crate::frontends::mcp) struct EndedRuns {
    /// Oldest first: the one forgotten when the cache is full.
    order: VecDeque<String>,
    runs: HashMap<String, EndedRun>,
}

impl EndedRuns {
    /// Keeps `run`'s view, forgetting the oldest past `MAX_ENDED_VIEWS`.
    pub(in crate::frontends::mcp) fn keep(&mut self, run: String, ended: EndedRun) {
        if self.runs.insert(run.clone(), ended).is_none() {
            self.order.push_back(run);
        }
        while self.order.len() > MAX_ENDED_VIEWS {
            if let Some(oldest) = self.order.pop_front() {
                self.runs.remove(&oldest);
            }
        }
    }

    pub(in crate::frontends::mcp) fn get(&self, run: &str) -> Option<&EndedRun> {
        self.runs.get(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_the_oldest_view_is_forgotten() {
        let yaml = "id: waiter\nstates:\n  waiting: {}\n";
        let loaded = crate::pipeline::load::load_text("waiter.yaml", yaml.to_string()).unwrap();
        let machine = Arc::new(crate::pipeline::compile::compile(&loaded).unwrap());
        let mut ended = EndedRuns::default();
        for index in 0..=MAX_ENDED_VIEWS {
            let run = EndedRun {
                machine: machine.clone(),
                view: Rc::default(),
            };
            ended.keep(format!("waiter:{index}"), run);
        }
        assert!(ended.get("waiter:0").is_none(), "the oldest is forgotten");
        assert!(ended.get("waiter:1").is_some());
        assert!(ended.get(&format!("waiter:{MAX_ENDED_VIEWS}")).is_some());
        assert_eq!(ended.runs.len(), MAX_ENDED_VIEWS);
        assert_eq!(ended.order.len(), MAX_ENDED_VIEWS);
    }
}
