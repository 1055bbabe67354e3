//! Maps at run time: each map's items started as ordinary effects up to its concurrency, their outcomes kept in item order, and one completion event, `done.map.<id>` or `error.map.<id>`.

use std::sync::Arc;

use indexmap::IndexMap;

use super::host::DriverHost;
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::effects::EffectScope;
use crate::pipeline::actions::Host;
use crate::pipeline::actions::map::MapRequest;
use crate::pipeline::compile::machine::StateId;

/// A map started and not yet handled: what runs, what ended, what waits.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunningMap {
    /// Numbered with the effects' invocations: its completion event carries it, so leaving
    /// its owner takes that event off the queue as it does an effect's outcome.
    pub invocation: u64,
    pub request: MapRequest,
    /// The next item to start.
    pub next: usize,
    /// Items to run again before `next`, in order: those a redrive found failed, cancelled or
    /// never started (`map_resume::rerun_failed_items`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub again: Vec<usize>,
    /// The items running: their index and their effect's invocation.
    pub running: Vec<(usize, u64)>,
    /// Each item's outcome once it ended, in item order.
    pub outcomes: Vec<Option<ItemOutcome>>,
    /// What the outcomes kept weigh (`Value::size_in_bytes`): bounded like the context, since
    /// they all travel in one event.
    #[serde(default)]
    pub bytes: usize,
    /// Its completion event is on its way (it comes back through the effects' channel, as an
    /// outcome does, so even an empty map reports after its macrostep). Never stored: a
    /// resumed run decides again from the outcomes.
    #[serde(skip)]
    pub settled: bool,
    /// Its completion event is on the queue, not yet handled.
    #[serde(skip)]
    pub arrived: bool,
}

/// How one item ended, and the data of its outcome event.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ItemOutcome {
    pub status: ItemStatus,
    pub data: serde_json::Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ItemStatus {
    Ok,
    Error,
    Timeout,
    Cancelled,
}

impl ItemStatus {
    pub(super) fn name(self) -> &'static str {
        match self {
            ItemStatus::Ok => "ok",
            ItemStatus::Error => "error",
            ItemStatus::Timeout => "timeout",
            ItemStatus::Cancelled => "cancelled",
        }
    }

    /// How an item's outcome event ended it.
    pub(super) fn of(event: &Event) -> ItemStatus {
        if event.name.starts_with("done.") {
            ItemStatus::Ok
        } else if event.data.get("timed_out") == Some(&Value::Bool(true)) {
            ItemStatus::Timeout
        } else {
            ItemStatus::Error
        }
    }
}

impl RunningMap {
    fn failures(&self) -> usize {
        self.outcomes
            .iter()
            .flatten()
            .filter(|outcome| outcome.status != ItemStatus::Ok)
            .count()
    }

    /// `[{index, id, status, data}]` in item order; an item that never ran is `cancelled`.
    fn outcome_list(&self) -> Value {
        let outcomes = self
            .outcomes
            .iter()
            .enumerate()
            .map(|(index, outcome)| {
                let (status, data) = match outcome {
                    Some(outcome) => (outcome.status, Value::from_json(&outcome.data)),
                    None => (ItemStatus::Cancelled, Value::Null),
                };
                let mut entry = IndexMap::new();
                entry.insert(Arc::from("index"), Value::Int(index as i64));
                entry.insert(Arc::from("id"), Value::String(self.request.item_id(index)));
                entry.insert(Arc::from("status"), Value::string(status.name()));
                entry.insert(Arc::from("data"), data);
                Value::Map(Arc::new(entry))
            })
            .collect();
        Value::List(Arc::new(outcomes))
    }
}

impl DriverHost<'_> {
    /// Starts a map: its items run as effects, at most `max_concurrency` at once.
    pub(super) fn start_fan_out(&mut self, request: MapRequest) {
        let invocation = self.state.running.allocate_invocation();
        let fields = serde_json::json!({
            "id": &*request.id,
            "invocation": invocation,
            "items": request.len(),
            "max_concurrency": request.max_concurrency,
            "tolerated_failures": request.tolerated_failures,
            "owner": &*self.machine.state(request.owner).id,
            "scope": match request.scope {
                EffectScope::State => "state",
                EffectScope::Run => "run",
            },
        });
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"map": &*request.id, "invocation": invocation}));
        }
        let time = self.now_text();
        self.observer.record(&time, "map_started", fields);
        let items = request.len();
        self.state.running.maps.push(RunningMap {
            invocation,
            request,
            next: 0,
            again: Vec::new(),
            running: Vec::new(),
            outcomes: vec![None; items],
            bytes: 0,
            settled: false,
            arrived: false,
        });
        self.advance_map(invocation);
    }

    /// Starts items while there is room, and ends the map when its outcome is known: failed
    /// as soon as more items failed than tolerated, done when every item ended.
    pub(super) fn advance_map(&mut self, invocation: u64) {
        loop {
            let Some(map) = self.map(invocation) else {
                return;
            };
            if map.settled {
                return;
            }
            let limit = map.request.max_outcome_bytes;
            if map.bytes > limit {
                let reason = format!(
                    "the outcomes of its items weigh {} bytes, more than {limit} ({} times --max-value-bytes); raise it with --max-value-bytes, or have the items print less",
                    map.bytes,
                    crate::pipeline::compile::budget::CONTEXT_VALUES
                );
                return self.fail_map(invocation, Some(reason));
            }
            if map.failures() > map.request.tolerated_failures {
                return self.fail_map(invocation, None);
            }
            let waiting = !map.again.is_empty() || map.next < map.request.len();
            if map.running.len() < map.request.max_concurrency && waiting {
                let index = if map.again.is_empty() {
                    map.next += 1;
                    map.next - 1
                } else {
                    map.again.remove(0)
                };
                let outcome = match self.start_item(invocation, index) {
                    Ok(item_invocation) => {
                        if let Some(map) = self.map(invocation) {
                            map.running.push((index, item_invocation));
                        }
                        continue;
                    }
                    Err(outcome) => outcome,
                };
                if let Some(map) = self.map(invocation) {
                    map.outcomes[index] = Some(outcome);
                }
                continue;
            }
            if map.outcomes.iter().all(Option::is_some) {
                return self.complete_map(invocation);
            }
            return;
        }
    }

    fn map_id(&mut self, invocation: u64) -> Option<Arc<str>> {
        self.map(invocation).map(|map| map.request.id.clone())
    }

    pub(super) fn map(&mut self, invocation: u64) -> Option<&mut RunningMap> {
        self.state
            .running
            .maps
            .iter_mut()
            .find(|map| map.invocation == invocation)
    }

    /// An effect's outcome arrived: when it is a map's item, it is kept for the map (and the
    /// effect's end recorded) instead of being delivered. False for any other effect.
    pub(super) fn map_item_finished(&mut self, item_invocation: u64, event: &Event) -> bool {
        let status = ItemStatus::of(event);
        let Some(invocation) = self.record_item(item_invocation, status, &event.data) else {
            return false;
        };
        // Its telemetry names the item's own outcome: `done.exec.check[3]`.
        let mut shown = event.clone();
        if let Some(Value::String(id)) = event.data.get("id") {
            let family = event
                .name
                .strip_suffix(self.map_id(invocation).as_deref().unwrap_or(""));
            if let Some(family) = family {
                shown.name = Arc::from(format!("{family}{id}"));
            }
        }
        self.delivered(&shown);
        self.advance_map(invocation);
        true
    }

    /// Keeps how the item of invocation `item_invocation` ended; the map's invocation, or
    /// `None` when it is no map's item.
    pub(super) fn record_item(
        &mut self,
        item_invocation: u64,
        status: ItemStatus,
        data: &Value,
    ) -> Option<u64> {
        let (map, position) = self.item_place(item_invocation)?;
        let map = &mut self.state.running.maps[map];
        let (index, _) = map.running.remove(position);
        map.bytes = map.bytes.saturating_add(data.size_in_bytes());
        map.outcomes[index] = Some(ItemOutcome {
            status,
            data: data.to_json(),
        });
        let invocation = map.invocation;
        if self.recording {
            let item = map.request.item_id(index);
            self.step_actions
                .push(serde_json::json!({"map_item": &*item, "status": status.name()}));
            self.commit_due = true;
        }
        Some(invocation)
    }

    /// More items failed than tolerated (or, `reason`, their outcomes grew past the bound):
    /// those still running are cancelled (their processes stopped), those not started never
    /// are, and `error.map.<id>` is queued.
    fn fail_map(&mut self, invocation: u64, reason: Option<String>) {
        let Some(map) = self.map(invocation) else {
            return;
        };
        let running = std::mem::take(&mut map.running);
        for (index, _) in &running {
            map.outcomes[*index] = Some(ItemOutcome {
                status: ItemStatus::Cancelled,
                data: serde_json::Value::Null,
            });
        }
        map.next = map.request.len();
        map.again.clear();
        let children = map.request.children.clone();
        for (index, item_invocation) in running {
            self.cancel_item(item_invocation, children.get(index));
        }
        let Some(map) = self.map(invocation) else {
            return;
        };
        let failed = map.failures()
            - map
                .outcomes
                .iter()
                .flatten()
                .filter(|outcome| outcome.status == ItemStatus::Cancelled)
                .count();
        let message = reason.unwrap_or_else(|| {
            format!(
                "{failed} of {} items failed, more than the {} tolerated",
                map.request.len(),
                map.request.tolerated_failures
            )
        });
        let mut data = IndexMap::new();
        data.insert(Arc::from("id"), Value::String(map.request.id.clone()));
        data.insert(Arc::from("outcomes"), map.outcome_list());
        data.insert(Arc::from("failed"), Value::Int(failed as i64));
        data.insert(
            Arc::from("tolerated_failures"),
            Value::Int(map.request.tolerated_failures as i64),
        );
        data.insert(Arc::from("message"), Value::string(message));
        let event_type = map.request.failed;
        self.queue_completion(invocation, event_type, data);
    }

    /// Every item ended within the tolerance: `done.map.<id>` with the results in item order.
    fn complete_map(&mut self, invocation: u64) {
        let Some(map) = self.map(invocation) else {
            return;
        };
        let results = map
            .outcomes
            .iter()
            .map(|outcome| match outcome {
                Some(outcome) if outcome.status == ItemStatus::Ok => {
                    Value::from_json(&outcome.data)
                }
                _ => Value::Null,
            })
            .collect();
        let mut data = IndexMap::new();
        data.insert(Arc::from("id"), Value::String(map.request.id.clone()));
        data.insert(Arc::from("results"), Value::List(Arc::new(results)));
        data.insert(Arc::from("outcomes"), map.outcome_list());
        data.insert(Arc::from("failed"), Value::Int(map.failures() as i64));
        let event_type = map.request.done;
        self.queue_completion(invocation, event_type, data);
    }

    fn queue_completion(
        &mut self,
        invocation: u64,
        event_type: crate::pipeline::compile::machine::EventType,
        mut data: IndexMap<Arc<str>, Value>,
    ) {
        data.insert(Arc::from("invocation"), Value::Int(invocation as i64));
        let event = Event::of_type(&self.machine, event_type, Origin::Outcome)
            .with_data(Value::Map(Arc::new(data)));
        let Some(map) = self.map(invocation) else {
            return;
        };
        map.settled = true;
        self.completions()
            .send(super::host::EffectMessage::MapCompleted(invocation, event));
    }

    /// A map's completion came back: queued for delivery, unless the map was cancelled.
    pub(super) fn map_completed(&mut self, invocation: u64, event: Event) {
        let Some(map) = self.map(invocation) else {
            return;
        };
        map.arrived = true;
        self.external_queue.push_back(event);
    }

    /// A map's completion event is being handled: the map is over.
    pub(super) fn map_delivered(&mut self, invocation: u64, event: &Event) {
        let Some(position) = self
            .state
            .running
            .maps
            .iter()
            .position(|map| map.invocation == invocation)
        else {
            return;
        };
        let map = self.state.running.maps.remove(position);
        let outcome = if event.name.starts_with("done.") {
            "completed"
        } else {
            "failed"
        };
        let fields = serde_json::json!({
            "id": &*map.request.id,
            "invocation": invocation,
            "event": &*event.name,
            "outcome": outcome,
        });
        let time = self.now_text();
        self.observer.record(&time, "map", fields);
    }

    /// `state` exited: its maps end (their items are cancelled as its effects), a queued
    /// completion is taken off the queue.
    pub(super) fn cancel_maps_of(&mut self, state: StateId) {
        let owned = |map: &RunningMap| {
            map.request.owner == state && map.request.scope == EffectScope::State
        };
        if !self.state.running.maps.iter().any(owned) {
            return;
        }
        let (cancelled, kept): (Vec<RunningMap>, Vec<RunningMap>) =
            std::mem::take(&mut self.state.running.maps)
                .into_iter()
                .partition(owned);
        self.state.running.maps = kept;
        for map in cancelled {
            // Items still running belong to the same state and were cancelled with its effects;
            // those of a `scope: run` body are not this state's.
            for (index, item_invocation) in &map.running {
                self.cancel_item(*item_invocation, map.request.children.get(*index));
            }
            self.drop_queued_outcome(map.invocation, map.arrived);
            let fields = serde_json::json!({
                "id": &*map.request.id,
                "invocation": map.invocation,
                "outcome": "cancelled",
            });
            let time = self.now_text();
            self.observer.record(&time, "map", fields);
        }
    }

    /// Cancels an item's effect or `child` (its processes stopped), if it still runs: its end
    /// is recorded, its outcome never delivered.
    fn cancel_item(
        &mut self,
        item_invocation: u64,
        child: Option<&crate::pipeline::actions::map::ChildItem>,
    ) {
        if let Some(child) = child {
            return self.cancel_invoke(&child.id);
        }
        if let Some(effect) = self.state.running.cancel_invocation(item_invocation) {
            self.drop_queued_outcome(effect.invocation, effect.arrived);
            self.record_cancelled(&effect, "cancelled");
        }
    }

    /// Takes an outcome of `invocation` off the queue, if it arrived: it is never delivered.
    pub(super) fn drop_queued_outcome(&mut self, invocation: u64, arrived: bool) {
        if arrived {
            self.external_queue
                .retain(|event| super::host::outcome_invocation(event) != Some(invocation));
        }
    }

    /// Whether the effect of `invocation` is a map's item.
    pub(super) fn is_map_item(&self, item_invocation: u64) -> bool {
        self.item_place(item_invocation).is_some()
    }

    /// Where the item of invocation `item_invocation` is: its map's index among the maps, and
    /// its place among that map's running items.
    pub(super) fn item_place(&self, item_invocation: u64) -> Option<(usize, usize)> {
        self.state
            .running
            .maps
            .iter()
            .enumerate()
            .find_map(|(index, map)| {
                map.running
                    .iter()
                    .position(|(_, invocation)| *invocation == item_invocation)
                    .map(|position| (index, position))
            })
    }
}

impl crate::runtime::run::running::Running {
    /// Takes out and cancels the effect of `invocation`, wherever it is owned.
    pub fn cancel_invocation(&mut self, invocation: u64) -> Option<super::running::RunningEffect> {
        let effect = self.finish(invocation)?;
        Some(effect.cancel())
    }
}
