//! `map`: resolves one effect request per element of a list (pure); the host runs them in parallel and reports `done.map.<id>` or `error.map.<id>`.

use std::sync::Arc;

use super::foreach::Array;
use super::tolerance::CompiledTolerance;
use super::{Action, Execution, InvokeRequest};
use crate::base::model::map::{MapAction, MapBody};
use crate::base::value::Value;
use crate::effects::{EffectRequest, EffectScope};
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, ValueTemplate};
use crate::pipeline::compile::machine::{EventType, Machine, StateId};
use crate::pipeline::load::source::Part;

/// Items one map may have: each is an effect the host tracks, and their outcomes travel
/// together in one event.
pub const MAP_MAX_ITEMS: usize = 10_000;

/// Items of one map that may run at once; also what runs when `max_concurrency` is omitted.
pub const MAP_MAX_CONCURRENCY: u32 = 64;

#[derive(Debug)]
pub struct Map {
    id: Arc<str>,
    array: Array,
    item: usize,
    index: Option<usize>,
    max_concurrency: u32,
    tolerance: CompiledTolerance,
    /// What each item runs.
    body: ItemBody,
    done: EventType,
    failed: EventType,
}

/// What a map's items run.
#[derive(Debug)]
enum ItemBody {
    /// An `exec`, a tool or a file action.
    Effect(Box<Action>),
    /// A child protocol, with the templates of its inputs by input slot.
    Child {
        machine: Arc<Machine>,
        inputs: Vec<(usize, ValueTemplate)>,
    },
}

/// A map to run: every item's request, resolved when the map started, and how they are run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MapRequest {
    /// The map's id; item `i` is the effect `<id>[i]`.
    pub id: Arc<str>,
    /// An effect body's items, one request each (empty for a child body).
    pub items: Vec<EffectRequest>,
    /// A child body's items, in item order (empty for an effect body).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildItem>,
    /// A child body's protocol. Not stored: a resumed run finds it again by the map's id
    /// (`Machine::map_children`).
    #[serde(skip)]
    pub child_machine: ChildMachine,
    /// At most this many items run at once (at least 1).
    pub max_concurrency: usize,
    /// The map fails when more items than this fail.
    pub tolerated_failures: usize,
    /// The map fails when the outcomes it keeps weigh more than this: the run's bound on the
    /// context (16 times `--max-value-bytes`), taken when the map starts.
    #[serde(default = "default_outcome_bytes")]
    pub max_outcome_bytes: usize,
    /// `done.map.<id>` and `error.map.<id>`.
    pub done: EventType,
    pub failed: EventType,
    /// The state whose visit the map belongs to, as its items do.
    pub owner: StateId,
    pub scope: EffectScope,
}

/// One item of a map of child protocols: the child's id (`<id>[i]`) and its inputs, as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChildItem {
    pub id: Arc<str>,
    pub inputs: Vec<serde_json::Value>,
}

/// The protocol a map's child items run, once known.
#[derive(Debug, Clone, Default)]
pub struct ChildMachine(pub Option<Arc<Machine>>);

impl PartialEq for ChildMachine {
    /// The same compiled protocol: machines are shared, never copied.
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(one), Some(another)) => Arc::ptr_eq(one, another),
            (None, None) => true,
            _ => false,
        }
    }
}

impl MapRequest {
    /// How many items the map has.
    pub fn len(&self) -> usize {
        self.items.len().max(self.children.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `index`'s id, `<id>[index]`: its effect's or its child's.
    pub fn item_id(&self, index: usize) -> Arc<str> {
        match self.items.get(index) {
            Some(item) => item.id.clone(),
            None => self.children[index].id.clone(),
        }
    }

    /// The request that starts child item `index`, or `None` for an effect's item or while
    /// its protocol is unknown.
    pub fn child_request(&self, index: usize) -> Option<InvokeRequest> {
        let item = self.children.get(index)?;
        Some(InvokeRequest {
            id: item.id.clone(),
            machine: self.child_machine.0.clone()?,
            inputs: item.inputs.iter().map(Value::from_stored_json).collect(),
            // An item's outcome is kept by its map, which tells them apart by these events'
            // names: they are never delivered as they are.
            done: self.done,
            failed: self.failed,
            autoforward: false,
            takes_events: false,
        })
    }
}

impl Map {
    /// The map's id: its items are `<id>[i]`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The effect each item runs, when the items are effects rather than child protocols.
    pub fn effect_body(&self) -> Option<&Action> {
        match &self.body {
            ItemBody::Effect(action) => Some(action),
            ItemBody::Child { .. } => None,
        }
    }

    /// The id of the child protocol each item runs, if items run one.
    pub fn child_protocol(&self) -> Option<&str> {
        match &self.body {
            ItemBody::Effect(_) => None,
            ItemBody::Child { machine, .. } => Some(&machine.id),
        }
    }

    /// What each item runs, in a line: the effect, or the child protocol.
    pub fn body_summary(&self) -> String {
        match &self.body {
            ItemBody::Effect(action) => action.summary(),
            ItemBody::Child { machine, .. } => format!("invoke {}", machine.id),
        }
    }

    pub fn compile(
        action: &MapAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Map> {
        let fan_out = &action.fan_out;
        // The model admits only effect kinds and `invoke` as the body, each with its id.
        let id = action.body.id()?.to_string();
        compiler.claim_map_id(&id, &format!("{pointer}/id"));
        let body = match &action.body {
            MapBody::Effect(effect) => compiler
                .action(effect, pointer)
                .map(|action| ItemBody::Effect(Box::new(action))),
            MapBody::Child(child) => {
                compiler.check_action_id(&child.id, &format!("{pointer}/id"));
                compiler
                    .child_protocol(
                        &child.invoke.protocol,
                        &child.invoke.inputs,
                        &format!("{pointer}/invoke"),
                    )
                    .map(|(machine, inputs)| ItemBody::Child { machine, inputs })
            }
        };
        let child = match &body {
            Some(ItemBody::Child { machine, .. }) => Some(machine.clone()),
            _ => None,
        };
        compiler.map_compiled(&id, child);
        let array = Array::compile(&fan_out.map, compiler, &format!("{pointer}/map"));
        let item =
            compiler.writable_context_slot(&fan_out.item, &format!("{pointer}/item"), Part::Value);
        let index = match &fan_out.index {
            None => Some(None),
            Some(name) if *name == fan_out.item => {
                compiler.value_error(
                    &format!("{pointer}/index"),
                    format!("`{name}` is already the item"),
                    Some("the index needs a context variable of its own, e.g. `position`".into()),
                );
                None
            }
            Some(name) => compiler
                .writable_context_slot(name, &format!("{pointer}/index"), Part::Value)
                .map(Some),
        };
        let max_concurrency = match fan_out.max_concurrency {
            None => Some(MAP_MAX_CONCURRENCY),
            Some(0) => {
                compiler.value_error(
                    &format!("{pointer}/max_concurrency"),
                    "max_concurrency: 0 would never run an item".into(),
                    Some("write at least 1, or leave it out to run every item at once".into()),
                );
                None
            }
            Some(count) if count > MAP_MAX_CONCURRENCY => {
                compiler.value_error(
                    &format!("{pointer}/max_concurrency"),
                    format!(
                        "max_concurrency {count} is more than the limit on items running at once ({MAP_MAX_CONCURRENCY}, map concurrency)"
                    ),
                    Some(format!("write at most {MAP_MAX_CONCURRENCY}")),
                );
                None
            }
            Some(count) => Some(count),
        };
        let tolerance = CompiledTolerance::compile(
            fan_out.tolerated_failures.as_ref(),
            compiler,
            &format!("{pointer}/tolerated_failures"),
        );
        let done = compiler.intern_event(&format!("done.map.{id}"));
        let failed = compiler.intern_event(&format!("error.map.{id}"));
        Some(Map {
            id: Arc::from(id.as_str()),
            array: array?,
            item: item?,
            index: index?,
            max_concurrency: max_concurrency?,
            tolerance: tolerance?,
            body: body?,
            done,
            failed,
        })
    }

    /// Resolves every item's request with its own element bound (the item and index variables
    /// are restored afterwards, so no item sees another's and nothing leaks into the context).
    pub fn resolve(&self, execution: &mut Execution) -> Result<MapRequest, EvaluationError> {
        let items = self.array.evaluate(execution, "map")?;
        let tolerated_failures = self.tolerance.resolve(execution, items.len())?;
        if items.len() > MAP_MAX_ITEMS {
            return Err(EvaluationError {
                expression: self.array.text(),
                message: format!(
                    "the map `{}` has {} items, more than the limit on a map's items ({MAP_MAX_ITEMS}, map items)",
                    self.id,
                    items.len()
                ),
            });
        }
        let saved_item = execution.context[self.item].clone();
        let saved_index = self.index.map(|index| execution.context[index].clone());
        let mut requests = Vec::with_capacity(items.len());
        let mut children = Vec::new();
        let mut failure = None;
        for (position, element) in items.iter().enumerate() {
            execution.context[self.item] = element.clone();
            if let Some(index) = self.index {
                execution.context[index] = Value::Int(position as i64);
            }
            let body = match &self.body {
                ItemBody::Effect(body) => body,
                ItemBody::Child { machine, inputs } => {
                    let id: Arc<str> = Arc::from(format!("{}[{position}]", self.id));
                    let rendered = execution.with_scope(|scope| {
                        crate::pipeline::actions::child_inputs::render(machine, inputs, scope, &id)
                    });
                    match rendered {
                        Ok(inputs) => children.push(ChildItem {
                            id,
                            inputs: inputs.iter().map(Value::to_stored_json).collect(),
                        }),
                        Err(error) => {
                            failure = Some(error);
                            break;
                        }
                    }
                    continue;
                }
            };
            match body.resolve_effect(execution) {
                Some(Ok(mut request)) => {
                    request.id = Arc::from(format!("{}[{position}]", self.id));
                    requests.push(request);
                }
                Some(Err(error)) => {
                    failure = Some(error);
                    break;
                }
                None => {
                    failure = Some(EvaluationError {
                        expression: self.array.text(),
                        message: "a map runs an effect for each item".into(),
                    });
                    break;
                }
            }
        }
        execution.context[self.item] = saved_item;
        if let (Some(index), Some(saved)) = (self.index, saved_index) {
            execution.context[index] = saved;
        }
        if let Some(error) = failure {
            return Err(error);
        }
        let scope = requests
            .first()
            .map_or(EffectScope::State, |request| request.scope);
        let owner = match scope {
            EffectScope::State => execution.owner,
            EffectScope::Run => StateId::ROOT,
        };
        for request in &mut requests {
            request.owner = owner;
        }
        let count = items.len();
        Ok(MapRequest {
            id: self.id.clone(),
            max_concurrency: (self.max_concurrency as usize).min(count).max(1),
            items: requests,
            children,
            child_machine: ChildMachine(match &self.body {
                ItemBody::Child { machine, .. } => Some(machine.clone()),
                ItemBody::Effect(_) => None,
            }),
            tolerated_failures,
            max_outcome_bytes: crate::pipeline::compile::budget::current().max_context_bytes(),
            done: self.done,
            failed: self.failed,
            owner,
            scope,
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let request = self.resolve(execution)?;
        execution.host.start_map(request);
        Ok(())
    }
}

fn default_outcome_bytes() -> usize {
    crate::pipeline::compile::budget::Budgets::default().max_context_bytes()
}
