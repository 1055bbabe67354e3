//! What every effectful action shares: its id, outcome events, timeout ladder, retriers and
//! telemetry prefix, compiled once and resolved into a `RetryPlan` when the action runs.

use std::sync::Arc;
use std::time::Duration;

use crate::base::model::Duration as DurationLiteral;
use crate::base::model::effect::{
    Count, EffectOptions, EffectScope, IncompleteMarkers, JitterKind, Multipliers, Retrier,
};
use crate::base::value::Value;
use crate::effects::files::FileRequest;
use crate::effects::retry::{Jitter, RetryPolicy};
use crate::effects::{
    EffectKind, EffectRequest, InterruptPolicy, OutcomeEvents, RetryPlan,
    STANDARD_INCOMPLETE_MARKERS,
};
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Expression, Scope, Template};
use crate::pipeline::compile::machine::StateId;
use crate::pipeline::compile::machine::{Delay, EventDescriptor};

use super::Execution;

/// The compiled shared options of one effectful action.
#[derive(Debug)]
pub struct EffectPolicy {
    pub id: Arc<str>,
    pub events: OutcomeEvents,
    timeout: Option<Delay>,
    multipliers: CompiledMultipliers,
    retriers: Vec<CompiledRetrier>,
    telemetry: Template,
    on_interrupt: Option<InterruptPolicy>,
    scope: EffectScope,
}

/// Timeout multipliers, fixed or evaluated when the action runs.
#[derive(Debug)]
enum CompiledMultipliers {
    Fixed(Vec<f64>),
    Computed(Expression),
}

/// A count, fixed or evaluated when the action runs.
#[derive(Debug)]
enum CompiledCount {
    Fixed(u32),
    Computed(Expression),
}

/// A retrier whose interval, maximum delay and attempt count may be expressions: the policy
/// itself is built when the action runs.
#[derive(Debug)]
pub struct CompiledRetrier {
    error_equals: Vec<EventDescriptor>,
    interval: Delay,
    max_attempts: CompiledCount,
    backoff_rate: f64,
    max_delay: Option<Delay>,
    jitter: Jitter,
}

/// Output markers that make a successful process outcome incomplete, fixed or evaluated when
/// the action runs.
#[derive(Debug)]
pub enum CompiledMarkers {
    Fixed(Vec<String>),
    Computed(Expression),
}

impl CompiledMarkers {
    pub fn compile(
        markers: Option<&IncompleteMarkers>,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<CompiledMarkers> {
        Some(match markers {
            None | Some(IncompleteMarkers::Standard(false)) => CompiledMarkers::Fixed(Vec::new()),
            Some(IncompleteMarkers::Standard(true)) => CompiledMarkers::Fixed(standard_markers()),
            Some(IncompleteMarkers::Listed(markers)) => CompiledMarkers::Fixed(markers.clone()),
            Some(IncompleteMarkers::Computed(text)) => {
                CompiledMarkers::Computed(compiler.expression(text, pointer)?)
            }
        })
    }

    /// The markers now: an expression gives `true` (the standard ones), `false` or a list.
    pub fn evaluate(&self, scope: &Scope) -> Result<Vec<String>, EvaluationError> {
        let expression = match self {
            CompiledMarkers::Fixed(markers) => return Ok(markers.clone()),
            CompiledMarkers::Computed(expression) => expression,
        };
        match expression.evaluate(scope)? {
            Value::Bool(true) => Ok(standard_markers()),
            Value::Bool(false) => Ok(Vec::new()),
            Value::List(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text.to_string()),
                    other => Err(failure(
                        expression,
                        format!("a marker must be a string, not {}", other.type_name()),
                    )),
                })
                .collect(),
            other => Err(failure(
                expression,
                format!(
                    "incomplete_markers must be true, false or a list of strings, not {}",
                    other.type_name()
                ),
            )),
        }
    }
}

fn standard_markers() -> Vec<String> {
    STANDARD_INCOMPLETE_MARKERS
        .iter()
        .map(|marker| marker.to_string())
        .collect()
}

fn failure(expression: &Expression, message: String) -> EvaluationError {
    EvaluationError {
        expression: expression.text.clone(),
        message,
    }
}

impl EffectPolicy {
    /// Whether an attempt can time out: only with a `timeout`.
    pub fn can_time_out(&self) -> bool {
        self.timeout.is_some()
    }

    /// Compiles the options of the action at `pointer`; every outcome event is `<family>`-named
    /// (`done.exec.<id>`, ...), so tools and files are caught like processes.
    pub fn compile(
        options: &EffectOptions,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<EffectPolicy> {
        let id_pointer = format!("{pointer}/id");
        let id = compiler.fixed_name(&options.id, &id_pointer)?;
        compiler.check_action_id(&id, &id_pointer);
        // Raised by name when the effect is refused; registered so handlers of it are known.
        compiler.intern_event(&format!("error.permission.{id}"));
        let events = OutcomeEvents {
            done: compiler.intern_event(&format!("done.exec.{id}")),
            failed: compiler.intern_event(&format!("error.exec.{id}")),
            timed_out: compiler.intern_event(&format!("error.exec.timeout.{id}")),
            incomplete: compiler.intern_event(&format!("error.incomplete.{id}")),
        };
        let timeout = options
            .timeout
            .as_ref()
            .map(|timeout| compiler.delay(timeout, &format!("{pointer}/timeout")));
        let multipliers_pointer = format!("{pointer}/timeout_multipliers");
        let multipliers = match &options.timeout_multipliers {
            None => Some(CompiledMultipliers::Fixed(Vec::new())),
            Some(Multipliers::Listed(multipliers)) => {
                for (index, multiplier) in multipliers.iter().enumerate() {
                    if let Err(message) = check_multiplier(*multiplier) {
                        compiler.value_error(
                            &format!("{multipliers_pointer}/{index}"),
                            message,
                            None,
                        );
                    }
                }
                Some(CompiledMultipliers::Fixed(multipliers.clone()))
            }
            Some(Multipliers::Computed(text)) => compiler
                .expression(text, &multipliers_pointer)
                .map(CompiledMultipliers::Computed),
        };
        let retriers = compiler.retriers(options.retry.as_ref(), &format!("{pointer}/retry"));
        let telemetry = compiler.template(
            options.telemetry.as_deref().unwrap_or(&id),
            &format!("{pointer}/telemetry"),
        );
        Some(EffectPolicy {
            id: Arc::from(id.as_str()),
            events,
            timeout: crate::pipeline::compile::optional(timeout)?,
            multipliers: multipliers?,
            retriers: retriers?,
            telemetry: telemetry?,
            on_interrupt: options.on_interrupt,
            scope: options.scope.unwrap_or_default(),
        })
    }

    /// Pure: the request for `kind`, with the timeout, ladder, retriers and telemetry prefix
    /// evaluated now.
    pub fn request(
        &self,
        kind: EffectKind,
        scope: &Scope,
        incomplete_markers: Vec<String>,
    ) -> Result<EffectRequest, EvaluationError> {
        let timeout = self
            .timeout
            .as_ref()
            .map(|timeout| timeout.evaluate(scope).map(Duration::from_millis))
            .transpose()?;
        let multipliers = match &self.multipliers {
            CompiledMultipliers::Fixed(multipliers) => multipliers.clone(),
            CompiledMultipliers::Computed(expression) => evaluate_multipliers(expression, scope)?,
        };
        let retriers = self
            .retriers
            .iter()
            .map(|retrier| retrier.policy(scope))
            .collect::<Result<_, _>>()?;
        let on_interrupt = self.on_interrupt.unwrap_or(match &kind {
            EffectKind::Process(_)
            | EffectKind::File(
                FileRequest::Append { .. } | FileRequest::AppendToJsonArray { .. },
            ) => InterruptPolicy::Fail,
            EffectKind::Tool(_) | EffectKind::File(_) => InterruptPolicy::Retry,
        });
        Ok(EffectRequest {
            id: self.id.clone(),
            kind,
            events: self.events,
            on_interrupt,
            scope: self.scope,
            // Set when the request is started, from the state the actions run for.
            owner: StateId::ROOT,
            // Set when the request is admitted.
            grant: None,
            plan: RetryPlan {
                timeout,
                multipliers,
                retriers,
                telemetry: Arc::from(self.telemetry.render(scope)?),
                incomplete_markers,
            },
        })
    }
}

/// Starts a resolved effect for the state the running actions belong to (see
/// `Execution::owner`), or for the whole run when it says `scope: run`.
pub fn start(execution: &mut Execution, mut request: EffectRequest) {
    request.owner = match request.scope {
        EffectScope::State => execution.owner,
        EffectScope::Run => StateId::ROOT,
    };
    execution.host.start_effect(request);
}

fn check_multiplier(multiplier: f64) -> Result<(), String> {
    if multiplier.is_finite() && multiplier > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "a timeout multiplier must be a positive number, not {multiplier}"
        ))
    }
}

fn evaluate_multipliers(
    expression: &Expression,
    scope: &Scope,
) -> Result<Vec<f64>, EvaluationError> {
    let Value::List(items) = expression.evaluate(scope)? else {
        return Err(failure(
            expression,
            "timeout_multipliers must be a list of numbers".into(),
        ));
    };
    items
        .iter()
        .map(|item| {
            let multiplier = match item {
                Value::Int(number) => *number as f64,
                Value::UInt(number) => *number as f64,
                Value::Float(number) => *number,
                other => {
                    return Err(failure(
                        expression,
                        format!(
                            "a timeout multiplier must be a number, not {}",
                            other.type_name()
                        ),
                    ));
                }
            };
            check_multiplier(multiplier).map_err(|message| failure(expression, message))?;
            Ok(multiplier)
        })
        .collect()
}

impl CompiledCount {
    fn evaluate(&self, scope: &Scope) -> Result<u32, EvaluationError> {
        let expression = match self {
            CompiledCount::Fixed(count) => return Ok(*count),
            CompiledCount::Computed(expression) => expression,
        };
        let count = match expression.evaluate(scope)? {
            Value::Int(number) => u32::try_from(number).ok(),
            Value::UInt(number) => u32::try_from(number).ok(),
            _ => None,
        };
        match count {
            Some(count) if count >= 1 => Ok(count),
            _ => Err(failure(
                expression,
                "max_attempts must be a whole number of at least 1".into(),
            )),
        }
    }
}

impl CompiledRetrier {
    fn policy(&self, scope: &Scope) -> Result<RetryPolicy, EvaluationError> {
        Ok(RetryPolicy {
            error_equals: self.error_equals.clone(),
            interval: Duration::from_millis(self.interval.evaluate(scope)?),
            max_attempts: self.max_attempts.evaluate(scope)?,
            backoff_rate: self.backoff_rate,
            max_delay: self
                .max_delay
                .as_ref()
                .map(|delay| delay.evaluate(scope).map(Duration::from_millis))
                .transpose()?,
            jitter: self.jitter,
            timeout: None,
            timeout_multipliers: Vec::new(),
        })
    }
}

/// Checks a retrier that no effect names (a retry policy on its own): its problems only.
pub(crate) fn check_retrier(retrier: &Retrier, compiler: &mut dyn ActionCompiler, pointer: &str) {
    compile_retrier(retrier, compiler, pointer);
}

pub(crate) fn compile_retrier(
    retrier: &Retrier,
    compiler: &mut dyn ActionCompiler,
    pointer: &str,
) -> Option<CompiledRetrier> {
    for (index, descriptor) in retrier.error_equals.iter().enumerate() {
        compiler.check_event_name(
            descriptor.trim_end_matches(".*"),
            &format!("{pointer}/error_equals/{index}"),
        );
    }
    let interval = match &retrier.interval {
        Some(text) => compiler.delay(text, &format!("{pointer}/interval")),
        None => Some(Delay::Fixed(DurationLiteral::from_milliseconds(1000))),
    };
    let max_delay = retrier
        .max_delay
        .as_ref()
        .map(|text| compiler.delay(text, &format!("{pointer}/max_delay")));
    let max_attempts = match &retrier.max_attempts {
        None => Some(CompiledCount::Fixed(3)),
        Some(Count::Literal(0)) => {
            compiler.value_error(
                &format!("{pointer}/max_attempts"),
                "max_attempts counts the first attempt too: at least 1".into(),
                None,
            );
            None
        }
        Some(Count::Literal(count)) => Some(CompiledCount::Fixed(*count)),
        Some(Count::Computed(text)) => compiler
            .expression(text, &format!("{pointer}/max_attempts"))
            .map(CompiledCount::Computed),
    };
    let backoff_rate = retrier.backoff_rate.unwrap_or(2.0);
    if !(backoff_rate.is_finite() && backoff_rate >= 1.0) {
        compiler.value_error(
            &format!("{pointer}/backoff_rate"),
            format!("backoff_rate must be at least 1, not {backoff_rate}"),
            None,
        );
        return None;
    }
    Some(CompiledRetrier {
        error_equals: retrier
            .error_equals
            .iter()
            .map(|text| EventDescriptor::parse(text))
            .collect(),
        interval: interval?,
        max_attempts: max_attempts?,
        backoff_rate,
        max_delay: crate::pipeline::compile::optional(max_delay)?,
        jitter: match retrier.jitter {
            Some(JitterKind::Full) => Jitter::Full {
                seed: retrier.seed.unwrap_or(0),
            },
            _ => Jitter::None,
        },
    })
}
