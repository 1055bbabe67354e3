//! Maps across the run's end, a resume and a redrive: a map the final state leaves cannot report; a resumed run restores each map, resumes its interrupted items and lets it go on; a redrive runs again the items that did not end well.

use std::sync::Arc;

use super::fan_out::{ItemStatus, RunningMap};
use super::host::DriverHost;
use crate::base::value::Value;

impl DriverHost<'_> {
    /// The run reached its final state: no map can report any more. Its items still running
    /// are awaited like any effect; those not started never start.
    pub(super) fn maps_after_the_run(&mut self) {
        for map in std::mem::take(&mut self.state.running.maps) {
            let fields = serde_json::json!({
                "id": &*map.request.id,
                "invocation": map.invocation,
                "outcome": "unreported",
                "after_finish": true,
            });
            let time = self.now_text();
            self.observer.record(&time, "map", fields);
        }
    }

    /// A resumed run: the maps that were running, before their items are resumed.
    pub(super) fn restore_maps(&mut self, maps: &[serde_json::Value]) {
        for stored in maps {
            match serde_json::from_value::<RunningMap>(stored.clone()) {
                Ok(map) => self.state.running.maps.push(map),
                Err(error) => {
                    let time = self.now_text();
                    let fields = serde_json::json!({"outcome": "unknown_on_resume", "message": error.to_string()});
                    self.observer.record(&time, "map", fields);
                }
            }
        }
        self.relink_map_children();
    }

    /// A resumed run restarts an interrupted item (its `on_interrupt` is `retry`): the map
    /// follows its new invocation.
    pub(super) fn restart_map_item(
        &mut self,
        item_invocation: u64,
        request: crate::effects::EffectRequest,
        from: Option<crate::effects::PlanProgress>,
    ) {
        let restarted = self.spawn_effect(request, from);
        let Some((map, position)) = self.item_place(item_invocation) else {
            return;
        };
        match restarted {
            Ok(invocation) => self.state.running.maps[map].running[position].1 = invocation,
            Err(refused) => {
                let data = Value::Map(Arc::new(self.refusal(&refused.0, &refused.1)));
                self.record_item(item_invocation, ItemStatus::Error, &data);
            }
        }
    }

    /// After a resume has dealt with the interrupted items: every map goes on (starting the
    /// items not started, or ending).
    pub(super) fn resume_maps(&mut self) {
        let invocations: Vec<u64> = self
            .state
            .running
            .maps
            .iter()
            .map(|map| map.invocation)
            .collect();
        for invocation in invocations {
            self.advance_map(invocation);
        }
    }
}

/// A map as a snapshot keeps it (`Snapshot::maps`), made ready for a redrive: every item that
/// did not end `ok` and is not running (failed, timed out, cancelled, or never started) loses
/// its outcome and runs again, in item order, before the map reports; the items that ended
/// `ok` keep their outcomes and are not run again. Gives the map and the ids of those items.
pub fn rerun_failed_items(
    stored: &serde_json::Value,
) -> Result<(serde_json::Value, Vec<String>), String> {
    let mut map: RunningMap =
        serde_json::from_value(stored.clone()).map_err(|error| error.to_string())?;
    let again: Vec<usize> = (0..map.outcomes.len())
        .filter(|index| {
            let ok =
                matches!(&map.outcomes[*index], Some(outcome) if outcome.status == ItemStatus::Ok);
            !ok && !map.running.iter().any(|(running, _)| running == index)
        })
        .collect();
    for index in &again {
        map.outcomes[*index] = None;
    }
    // What the outcomes kept weigh, without those taken away.
    map.bytes = map
        .outcomes
        .iter()
        .flatten()
        .map(|outcome| Value::from_json(&outcome.data).size_in_bytes())
        .fold(0, usize::saturating_add);
    map.next = map.request.len();
    let ids = again
        .iter()
        .map(|index| map.request.item_id(*index).to_string())
        .collect();
    map.again = again;
    let json = serde_json::to_value(&map).map_err(|error| error.to_string())?;
    Ok((json, ids))
}
