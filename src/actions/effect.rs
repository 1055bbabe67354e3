//! What every effectful action shares: its id, outcome events, timeout ladder, retriers and
//! telemetry prefix, compiled once and resolved into a `RetryPlan` when the action runs.

use std::sync::Arc;
use std::time::Duration;

use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Scope};
use crate::compile::machine::{Delay, EventDescriptor};
use crate::effects::retry::{Jitter, RetryPolicy};
use crate::effects::{EffectKind, EffectRequest, OutcomeEvents, RetryPlan};
use crate::model::Duration as DurationLiteral;
use crate::model::effect::{EffectOptions, JitterKind, Retrier};

/// The compiled shared options of one effectful action.
#[derive(Debug)]
pub struct EffectPolicy {
    pub id: Arc<str>,
    pub events: OutcomeEvents,
    timeout: Option<Delay>,
    multipliers: Vec<f64>,
    retriers: Vec<RetryPolicy>,
    telemetry: Arc<str>,
}

impl EffectPolicy {
    /// Compiles the options of the action at `pointer`; every outcome event is `<family>`-named
    /// (`done.exec.<id>`, ...), so tools and files are caught like processes.
    pub fn compile(
        options: &EffectOptions,
        compiler: &mut Compiler,
        pointer: &str,
    ) -> Option<EffectPolicy> {
        compiler.check_action_id(&options.id, &format!("{pointer}/id"));
        let events = OutcomeEvents {
            done: compiler.intern_event(&format!("done.exec.{}", options.id)),
            failed: compiler.intern_event(&format!("error.exec.{}", options.id)),
            timed_out: compiler.intern_event(&format!("error.exec.timeout.{}", options.id)),
            incomplete: compiler.intern_event(&format!("error.incomplete.{}", options.id)),
        };
        let timeout = match &options.timeout {
            Some(timeout) => Some(compiler.delay(timeout, &format!("{pointer}/timeout"))?),
            None => None,
        };
        for (index, multiplier) in options.timeout_multipliers.iter().enumerate() {
            if !(multiplier.is_finite() && *multiplier > 0.0) {
                compiler.value_error(
                    &format!("{pointer}/timeout_multipliers/{index}"),
                    format!("a timeout multiplier must be a positive number, not {multiplier}"),
                    None,
                );
            }
        }
        let mut retriers = Vec::with_capacity(options.retry.len());
        for (index, retrier) in options.retry.iter().enumerate() {
            retriers.push(compile_retrier(
                retrier,
                compiler,
                &format!("{pointer}/retry/{index}"),
            )?);
        }
        Some(EffectPolicy {
            id: Arc::from(options.id.as_str()),
            events,
            timeout,
            multipliers: options.timeout_multipliers.clone(),
            retriers,
            telemetry: Arc::from(options.telemetry.as_deref().unwrap_or(&options.id)),
        })
    }

    /// Pure: the request for `kind`, with the base timeout evaluated now.
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
        Ok(EffectRequest {
            id: self.id.clone(),
            kind,
            events: self.events,
            plan: RetryPlan {
                timeout,
                multipliers: self.multipliers.clone(),
                retriers: self.retriers.clone(),
                telemetry: self.telemetry.clone(),
                incomplete_markers,
            },
        })
    }
}

fn literal_duration(
    compiler: &mut Compiler,
    text: Option<&String>,
    pointer: &str,
    default: Duration,
) -> Option<Duration> {
    let Some(text) = text else {
        return Some(default);
    };
    match DurationLiteral::parse(text) {
        Some(duration) => Some(duration.as_std()),
        None => {
            compiler.value_error(
                pointer,
                format!("`{text}` is not a duration"),
                Some("write e.g. `2s`, `500ms`, `1m`".into()),
            );
            None
        }
    }
}

fn compile_retrier(
    retrier: &Retrier,
    compiler: &mut Compiler,
    pointer: &str,
) -> Option<RetryPolicy> {
    for (index, descriptor) in retrier.error_equals.iter().enumerate() {
        compiler.check_event_name(
            descriptor.trim_end_matches(".*"),
            &format!("{pointer}/error_equals/{index}"),
        );
    }
    let interval = literal_duration(
        compiler,
        retrier.interval.as_ref(),
        &format!("{pointer}/interval"),
        Duration::from_secs(1),
    )?;
    let max_delay = match &retrier.max_delay {
        Some(text) => Some(literal_duration(
            compiler,
            Some(text),
            &format!("{pointer}/max_delay"),
            Duration::ZERO,
        )?),
        None => None,
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
    let max_attempts = retrier.max_attempts.unwrap_or(3);
    if max_attempts == 0 {
        compiler.value_error(
            &format!("{pointer}/max_attempts"),
            "max_attempts counts the first attempt too: at least 1".into(),
            None,
        );
        return None;
    }
    Some(RetryPolicy {
        error_equals: retrier
            .error_equals
            .iter()
            .map(|text| EventDescriptor::parse(text))
            .collect(),
        interval,
        max_attempts,
        backoff_rate,
        max_delay,
        jitter: match retrier.jitter {
            Some(JitterKind::Full) => Jitter::Full {
                seed: retrier.seed.unwrap_or(0),
            },
            _ => Jitter::None,
        },
        timeout: None,
        timeout_multipliers: Vec::new(),
    })
}
