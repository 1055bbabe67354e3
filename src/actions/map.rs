//! `map`: resolves one effect request per element of a list (pure); the host runs them in parallel and reports `done.map.<id>` or `error.map.<id>`.

use std::sync::Arc;

use super::foreach::Array;
use super::{Action, Execution};
use crate::compile::Compiler;
use crate::compile::expression::EvaluationError;
use crate::compile::machine::{EventType, StateId};
use crate::effects::{EffectRequest, EffectScope};
use crate::load::source::Part;
use crate::model::map::{MapAction, Tolerance};
use crate::value::Value;

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
    /// The effect each item runs: an `exec`, a tool or a file action.
    body: Action,
    done: EventType,
    failed: EventType,
}

/// Failed items tolerated: a count, or hundredths of a percent of the items.
#[derive(Debug, Clone, Copy)]
enum CompiledTolerance {
    Count(u32),
    BasisPoints(u32),
}

/// A map to run: every item's request, resolved when the map started, and how they are run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MapRequest {
    /// The map's id; item `i` is the effect `<id>[i]`.
    pub id: Arc<str>,
    pub items: Vec<EffectRequest>,
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

impl Map {
    /// The map's id: its items are `<id>[i]`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The effect each item runs.
    pub fn body(&self) -> &Action {
        &self.body
    }

    pub fn compile(action: &MapAction, compiler: &mut Compiler, pointer: &str) -> Option<Map> {
        let fan_out = &action.fan_out;
        let Some(options) = action.body.effect_options() else {
            // The model admits only effect kinds as the body.
            return None;
        };
        let id = options.id.clone();
        let body = compiler.claim_map_id(&id, &format!("{pointer}/id"), |compiler| {
            compiler.action(&action.body, pointer)
        });
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
        let tolerance = match &fan_out.tolerated_failures {
            None => Some(CompiledTolerance::Count(0)),
            Some(Tolerance::Count(count)) => Some(CompiledTolerance::Count(*count)),
            Some(Tolerance::Percentage(text)) => match parse_percentage(text) {
                Some(basis_points) => Some(CompiledTolerance::BasisPoints(basis_points)),
                None => {
                    compiler.value_error(
                        &format!("{pointer}/tolerated_failures"),
                        format!("`{text}` is not a count or a percentage"),
                        Some("write a count such as `2`, or a percentage from 0% to 100% such as `25%`".into()),
                    );
                    None
                }
            },
        };
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
        let mut failure = None;
        for (position, element) in items.iter().enumerate() {
            execution.context[self.item] = element.clone();
            if let Some(index) = self.index {
                execution.context[index] = Value::Int(position as i64);
            }
            match self.body.resolve_effect(execution) {
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
        let tolerated_failures = match self.tolerance {
            CompiledTolerance::Count(count) => count as usize,
            CompiledTolerance::BasisPoints(basis_points) => {
                requests.len() * basis_points as usize / 10_000
            }
        };
        Ok(MapRequest {
            id: self.id.clone(),
            max_concurrency: (self.max_concurrency as usize).min(requests.len()).max(1),
            items: requests,
            tolerated_failures,
            max_outcome_bytes: crate::compile::budget::current().max_context_bytes(),
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
    crate::compile::budget::Budgets::default().max_context_bytes()
}

/// `25%`, `12.5%`: hundredths of a percent, from 0 to 100%.
fn parse_percentage(text: &str) -> Option<u32> {
    let number = text.trim().strip_suffix('%')?.trim();
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let percent: f64 = number.parse().ok()?;
    (0.0..=100.0)
        .contains(&percent)
        .then(|| (percent * 100.0).round() as u32)
}

#[cfg(test)]
mod tests {
    use super::parse_percentage;

    #[test]
    fn percentages_are_read_in_hundredths() {
        assert_eq!(parse_percentage("25%"), Some(2500));
        assert_eq!(parse_percentage("12.5%"), Some(1250));
        assert_eq!(parse_percentage("100%"), Some(10_000));
        assert_eq!(parse_percentage("0%"), Some(0));
        assert_eq!(parse_percentage("101%"), None);
        assert_eq!(parse_percentage("25"), None);
        assert_eq!(parse_percentage("-5%"), None);
        assert_eq!(parse_percentage("%"), None);
    }
}
