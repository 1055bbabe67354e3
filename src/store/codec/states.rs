//! A state per step: each journal row keeps the state after its step, in full every `FULL_SNAPSHOT_EVERY` steps and as a delta of the state before it otherwise, so that the state after any committed step can be rebuilt.

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::steps::StepWrite;
use super::{Codec, SNAPSHOT_SECRETS};
use crate::base::snapshot::Snapshot;
use crate::store::StoreError;

/// At most this many steps from a full snapshot to the next: rebuilding a state reads one full
/// snapshot and at most `FULL_SNAPSHOT_EVERY - 1` deltas.
pub(in crate::store) const FULL_SNAPSHOT_EVERY: u64 = 64;

/// The state after a step, as its journal row keeps it.
pub(in crate::store) enum StoredState {
    /// The whole snapshot (`journal.snapshot`), masked, with its secrets' labels.
    Full(String),
    /// What changed since the state after step `base` (`journal.snapshot_delta`, a
    /// `SnapshotDelta`).
    Delta { base: i64, text: String },
}

/// The state this store last wrote for a run, which the run's next step is a delta of.
pub(in crate::store) struct Written {
    step: i64,
    snapshot: Snapshot,
    /// Deltas written since the last full snapshot.
    since_full: u64,
    /// The step finished the run: no step comes after it.
    pub(in crate::store) finished: bool,
}

/// What changed from one state to the next: the context variables set (changed or added, in
/// the new state's order) and removed, and every other field of `Snapshot` that changed, whole.
/// Rebuilding applies them to the state at `base`, the step before.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotDelta<'a> {
    base: i64,
    #[serde(default, skip_serializing_if = "IndexMap::is_empty", borrow)]
    context: IndexMap<Cow<'a, str>, Cow<'a, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", borrow)]
    removed: Vec<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    fields: serde_json::Map<String, serde_json::Value>,
}

impl Written {
    /// The step whose state this is.
    pub(in crate::store) fn step(&self) -> i64 {
        self.step
    }
}

impl<'a> SnapshotDelta<'a> {
    /// The delta from `before` (the state after step `base`) to `after`.
    fn between(
        base: i64,
        before: &Snapshot,
        after: &'a Snapshot,
    ) -> Result<SnapshotDelta<'a>, serde_json::Error> {
        let mut fields = serde_json::Map::new();
        // Destructured whole: a field added to `Snapshot` must be compared here too.
        let Snapshot {
            format,
            protocol,
            configuration,
            context,
            history,
            running,
            outcome,
            timers,
            effects,
            retries,
            invocations,
            children,
            maps,
            deferred,
        } = after;
        replaced(&mut fields, "format", &before.format, format)?;
        replaced(&mut fields, "protocol", &before.protocol, protocol)?;
        replaced(
            &mut fields,
            "configuration",
            &before.configuration,
            configuration,
        )?;
        replaced(&mut fields, "history", &before.history, history)?;
        replaced(&mut fields, "running", &before.running, running)?;
        replaced(&mut fields, "outcome", &before.outcome, outcome)?;
        replaced(&mut fields, "timers", &before.timers, timers)?;
        replaced(&mut fields, "effects", &before.effects, effects)?;
        replaced(&mut fields, "retries", &before.retries, retries)?;
        replaced(&mut fields, "invocations", &before.invocations, invocations)?;
        replaced(&mut fields, "children", &before.children, children)?;
        replaced(&mut fields, "maps", &before.maps, maps)?;
        replaced(&mut fields, "deferred", &before.deferred, deferred)?;
        let mut delta = SnapshotDelta {
            base,
            context: IndexMap::new(),
            removed: Vec::new(),
            fields,
        };
        let old = &before.context;
        for (name, value) in context {
            if old.get(name) != Some(value) {
                delta
                    .context
                    .insert(Cow::Borrowed(name), Cow::Borrowed(value));
            }
        }
        delta.removed = old
            .keys()
            .filter(|name| !context.contains_key(*name))
            .map(|name| Cow::Owned(name.clone()))
            .collect();
        // Applying keeps the old order and puts new variables last; any other order is written
        // whole, so that the rebuilt state is the same, order included.
        let rebuilt_order = old
            .keys()
            .filter(|name| context.contains_key(*name))
            .chain(context.keys().filter(|name| !old.contains_key(*name)));
        if !rebuilt_order.eq(context.keys()) {
            delta.context.clear();
            delta.removed.clear();
            delta
                .fields
                .insert("context".into(), serde_json::to_value(context)?);
        }
        Ok(delta)
    }

    /// Applies the delta to `state`, a snapshot as JSON.
    fn apply(self, state: &mut serde_json::Map<String, serde_json::Value>) {
        for (name, value) in self.fields {
            state.insert(name, value);
        }
        if self.context.is_empty() && self.removed.is_empty() {
            return;
        }
        let context = state
            .entry("context")
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let serde_json::Value::Object(context) = context {
            for (name, value) in self.context {
                // An existing variable keeps its place; a new one goes last.
                context.insert(name.into_owned(), value.into_owned());
            }
            for name in &self.removed {
                context.shift_remove(name.as_ref());
            }
        }
    }
}

/// Puts `after` under `name` in `fields` when it differs from `before`.
fn replaced<T: PartialEq + Serialize>(
    fields: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
    before: &T,
    after: &T,
) -> Result<(), serde_json::Error> {
    if before != after {
        fields.insert(name.to_string(), serde_json::to_value(after)?);
    }
    Ok(())
}

impl Codec {
    /// How the state after `step` is stored: a delta of `before` (the state this store wrote
    /// for the step before it) when there is one, fewer than `FULL_SNAPSHOT_EVERY - 1` deltas
    /// follow the last full snapshot and no secret is in play (a delta is not masked: a run
    /// with secrets keeps full snapshots); the whole snapshot otherwise. With it, what the next
    /// step's delta is taken against.
    pub(in crate::store) fn encode_state(
        &self,
        step: &StepWrite<'_>,
        before: Option<Written>,
    ) -> Result<(StoredState, Written), StoreError> {
        let sequence = self.integer("a step number", step.entry.sequence)?;
        let base = before.filter(|before| {
            before.step < sequence
                && before.since_full + 1 < FULL_SNAPSHOT_EVERY
                && !crate::base::secrets::active()
        });
        let (state, since_full) = match &base {
            Some(base) => {
                let delta = SnapshotDelta::between(base.step, &base.snapshot, step.snapshot)
                    .and_then(|delta| serde_json::to_string(&delta))
                    .map_err(|source| self.encode_failed(step.run, "snapshot delta", source))?;
                let delta = StoredState::Delta {
                    base: base.step,
                    text: delta,
                };
                (delta, base.since_full + 1)
            }
            None => (
                StoredState::Full(self.encode_snapshot(step.run, step.snapshot)?),
                0,
            ),
        };
        let written = Written {
            step: sequence,
            snapshot: step.snapshot.clone(),
            since_full,
            finished: step.finish.is_some(),
        };
        Ok((state, written))
    }

    /// A snapshot as stored: masked, with the labels of the placeholders it holds under
    /// `secrets`, so that a resume restores exactly those. A text that would not come back
    /// whole (one spelling a placeholder) is refused.
    pub(in crate::store) fn encode_snapshot(
        &self,
        run: &str,
        snapshot: &Snapshot,
    ) -> Result<String, StoreError> {
        let failed = |source| self.encode_failed(run, "snapshot", source);
        if !crate::base::secrets::active() {
            return serde_json::to_string(snapshot).map_err(failed);
        }
        let mut json = serde_json::to_value(snapshot).map_err(failed)?;
        let labels = crate::base::secrets::mask_for_store(&mut json).map_err(|source| {
            StoreError::Secret {
                database: self.location(),
                run: run.to_string(),
                what: "snapshot",
                source,
            }
        })?;
        if !labels.is_empty()
            && let serde_json::Value::Object(fields) = &mut json
        {
            fields.insert(SNAPSHOT_SECRETS.into(), labels.into());
        }
        Ok(json.to_string())
    }
    /// A stored snapshot and the labels of the secrets it holds as placeholders.
    pub(in crate::store) fn decode_snapshot(
        &self,
        run: &str,
        text: &str,
    ) -> Result<(Snapshot, Vec<String>), StoreError> {
        if !text.contains(SNAPSHOT_SECRETS) {
            return Ok((self.decode(run, "snapshot", text)?, Vec::new()));
        }
        let mut json: serde_json::Value = self.decode(run, "snapshot", text)?;
        let labels = match &mut json {
            serde_json::Value::Object(fields) => fields.shift_remove(SNAPSHOT_SECRETS),
            _ => None,
        };
        let labels = match labels {
            Some(labels) => serde_json::from_value(labels)
                .map_err(|source| self.corrupt(run, "snapshot secrets", Box::new(source)))?,
            None => Vec::new(),
        };
        let snapshot = serde_json::from_value(json)
            .map_err(|source| self.corrupt(run, "snapshot", Box::new(source)))?;
        Ok((snapshot, labels))
    }

    /// The state rebuilt from a full snapshot (`full`, as stored) and the deltas after it, in
    /// order, each with its step; the labels of the secrets the full snapshot holds.
    pub(in crate::store) fn rebuild_state(
        &self,
        run: &str,
        full: (i64, &str),
        deltas: &[(i64, Option<String>)],
    ) -> Result<(Snapshot, Vec<String>), StoreError> {
        if deltas.is_empty() {
            return self.decode_snapshot(run, full.1);
        }
        let mut json: serde_json::Value = self.decode(run, "snapshot", full.1)?;
        let serde_json::Value::Object(state) = &mut json else {
            return Err(self.corrupt(run, "snapshot", "it is not a JSON object".into()));
        };
        let labels = match state.shift_remove(SNAPSHOT_SECRETS) {
            Some(labels) => serde_json::from_value(labels)
                .map_err(|source| self.corrupt(run, "snapshot secrets", Box::new(source)))?,
            None => Vec::new(),
        };
        let mut previous = full.0;
        for (step, text) in deltas {
            let Some(text) = text else {
                return Err(self.corrupt(
                    run,
                    "snapshot delta",
                    format!("step {step} keeps no state").into(),
                ));
            };
            let delta: SnapshotDelta = serde_json::from_str(text)
                .map_err(|source| self.corrupt(run, "snapshot delta", Box::new(source)))?;
            if delta.base != previous {
                return Err(self.corrupt(
                    run,
                    "snapshot delta",
                    format!(
                        "step {step} is a delta of step {}, not of step {previous}",
                        delta.base
                    )
                    .into(),
                ));
            }
            delta.apply(state);
            previous = *step;
        }
        let snapshot = serde_json::from_value(json)
            .map_err(|source| self.corrupt(run, "snapshot", Box::new(source)))?;
        Ok((snapshot, labels))
    }
}
