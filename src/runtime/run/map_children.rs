//! A map's items that are child protocols: started, finished, cancelled and resumed through the same machinery as a state's invoke.

use std::sync::Arc;

use super::fan_out::{ItemOutcome, ItemStatus};
use super::host::DriverHost;
use crate::base::durable::TimerPolicy;
use crate::base::event::Event;
use crate::base::snapshot::ChildSnapshot;
use crate::base::value::Value;
use crate::effects::mock::MockOutcome;

impl DriverHost<'_> {
    /// Starts item `index` of the map of `invocation`: its effect or its child protocol, whose
    /// invocation is returned; or how the item ended at once (its effect refused, its
    /// protocol unknown).
    pub(super) fn start_item(&mut self, invocation: u64, index: usize) -> Result<u64, ItemOutcome> {
        let Some(map) = self.map(invocation) else {
            return Err(item_failure("the map is gone".into()));
        };
        if map.request.children.is_empty() {
            let item = map.request.items[index].clone();
            return self
                .spawn_effect(item, None)
                .map_err(|refused| ItemOutcome {
                    status: ItemStatus::Error,
                    data: Value::Map(Arc::new(self.refusal(&refused.0, &refused.1))).to_json(),
                });
        }
        let item_id = format!("{}[{index}]", map.request.id);
        if let Some(scripted) = self.scripted_child_item(&item_id) {
            return Err(scripted);
        }
        let Some(map) = self.map(invocation) else {
            return Err(item_failure("the map is gone".into()));
        };
        let Some(request) = map.request.child_request(index) else {
            return Err(item_failure(format!(
                "the child protocol of the map `{}` is no longer in this protocol",
                map.request.id
            )));
        };
        // Numbered like an effect, so the map follows its items alike.
        let item_invocation = self.state.running.allocate_invocation();
        self.spawn_child(request, None);
        Ok(item_invocation)
    }

    /// A child protocol ended: when it is a map's item, its map keeps the outcome (its final
    /// output, or the failure) instead of it being delivered. False for any other child.
    pub(super) fn map_child_finished(&mut self, id: &str, event: &Event) -> bool {
        let Some((map, item_invocation)) = self.child_item(id) else {
            return false;
        };
        let invocation = self.state.running.maps[map].invocation;
        let status = ItemStatus::of(event);
        self.record_item(item_invocation, status, &event.data);
        let time = self.now_text();
        let fields = serde_json::json!({"id": id, "map_item": status.name()});
        self.observer.record(&time, "invoke", fields);
        self.advance_map(invocation);
        true
    }

    /// The map (its index among the maps) and the item invocation of the running child `id`.
    fn child_item(&self, id: &str) -> Option<(usize, u64)> {
        self.state
            .running
            .maps
            .iter()
            .enumerate()
            .find_map(|(position, map)| {
                map.running
                    .iter()
                    .find(|(index, _)| {
                        map.request
                            .children
                            .get(*index)
                            .is_some_and(|child| *child.id == *id)
                    })
                    .map(|(_, item_invocation)| (position, *item_invocation))
            })
    }

    /// A resumed run: each map of child protocols finds its protocol again by its id.
    pub(super) fn relink_map_children(&mut self) {
        let machine = self.machine.clone();
        for map in &mut self.state.running.maps {
            if map.request.children.is_empty() {
                continue;
            }
            map.request.child_machine.0 = machine
                .map_children
                .iter()
                .find(|(id, _)| *id == map.request.id)
                .map(|(_, child)| child.clone());
        }
    }

    /// A resumed run's child `child` continues where its last committed step left it when it
    /// is a running map item. False when it is not one.
    pub(super) fn resume_map_child(&mut self, child: &ChildSnapshot, timers: TimerPolicy) -> bool {
        let Some((map, _)) = self.child_item(&child.id) else {
            return false;
        };
        let request = &self.state.running.maps[map].request;
        let index = request
            .children
            .iter()
            .position(|item| *item.id == *child.id);
        match index.and_then(|index| request.child_request(index)) {
            Some(request) => self.spawn_child(request, Some((child.clone(), timers))),
            None => self.fail_unknown_child(&child.id),
        }
        true
    }

    /// After a resume: a map's child item that was running with no step committed yet starts
    /// again from the beginning (it had not finished, so it is run, once).
    pub(super) fn restart_map_children(&mut self) {
        let mut waiting = Vec::new();
        for map in &self.state.running.maps {
            for (index, _) in &map.running {
                if let Some(item) = map.request.children.get(*index)
                    && !self.state.running.has_child(&item.id)
                {
                    waiting.push((map.invocation, *index, item.id.clone()));
                }
            }
        }
        for (invocation, index, id) in waiting {
            let request = self
                .map(invocation)
                .and_then(|map| map.request.child_request(index));
            match request {
                Some(request) => self.spawn_child(request, None),
                None => self.fail_unknown_child(&id),
            }
        }
    }

    /// A resumed map's child item whose protocol is no longer there: a failed item.
    fn fail_unknown_child(&mut self, id: &str) {
        let Some((map, item_invocation)) = self.child_item(id) else {
            return;
        };
        let invocation = self.state.running.maps[map].invocation;
        let outcome = item_failure(format!(
            "the child protocol of `{id}` is no longer in this protocol"
        ));
        let data = Value::from_json(&outcome.data);
        self.record_item(item_invocation, ItemStatus::Error, &data);
        self.advance_map(invocation);
    }
}

impl DriverHost<'_> {
    /// The scripted ending of child item `id` (`--mock review[1]=...`, or the map's id for every
    /// item), standing for the child's: `ok:JSON` is its final output (text when not JSON), an
    /// exit code other than 0 or an error is a failed item, `timeout` a timed-out one. Nothing
    /// runs; the item ends at once.
    fn scripted_child_item(&mut self, id: &str) -> Option<ItemOutcome> {
        let mocked = self
            .mocks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .next(id)?;
        let (status, data) = match mocked {
            MockOutcome::Ok(text) | MockOutcome::Truncated(text) => (
                ItemStatus::Ok,
                serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
            ),
            MockOutcome::Exit(0) => (ItemStatus::Ok, serde_json::Value::Null),
            MockOutcome::Exit(code) => (
                ItemStatus::Error,
                serde_json::json!({
                    "id": id,
                    "message": format!("the child protocol ended with exit code {code} (mocked)"),
                    "exit_code": code,
                }),
            ),
            MockOutcome::Error(message) => (
                ItemStatus::Error,
                serde_json::json!({ "id": id, "message": message }),
            ),
            MockOutcome::Timeout => (
                ItemStatus::Timeout,
                serde_json::json!({ "id": id, "message": "the child protocol timed out (mocked)" }),
            ),
        };
        let time = self.now_text();
        let fields = serde_json::json!({"id": id, "map_item": status.name(), "mocked": true});
        self.observer.record(&time, "invoke", fields);
        Some(ItemOutcome { status, data })
    }
}

/// An item that failed before anything ran, with why.
fn item_failure(message: String) -> ItemOutcome {
    ItemOutcome {
        status: ItemStatus::Error,
        data: serde_json::json!({ "message": message }),
    }
}
