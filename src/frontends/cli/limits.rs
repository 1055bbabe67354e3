//! The limits `run`, `resume`, `serve`, `mcp` and `test` share: microsteps, value size, evaluation steps, step time, pending sends and live children.

use std::time::Duration;

use clap::Args;

use crate::pipeline::compile::budget::{Budgets, format_duration, parse_duration};
use crate::runtime::run::algorithm::Limits;

#[derive(Debug, Clone, Args)]
pub struct LimitOptions {
    /// Steps one macrostep may take (microsteps, and internal events that enable nothing)
    /// before the run is stopped as a loop.
    #[arg(long, default_value_t = Limits::default().max_microsteps, value_name = "N")]
    max_microsteps: usize,
    /// The largest value (string, list or map) an expression may build or an assignment store;
    /// the context as a whole, and all one evaluation builds, may hold 16 times as much.
    #[arg(long, default_value_t = Budgets::default().max_value_bytes, value_name = "BYTES")]
    max_value_bytes: usize,
    /// Comprehension iterations and size-checked function calls one evaluation may take, and
    /// iterations one `foreach` (with the loops inside it) may run.
    #[arg(long, default_value_t = Budgets::default().max_evaluation_steps, value_name = "N")]
    max_evaluation_steps: u64,
    /// How long one macrostep may run (`10s`, `250ms`, `2m`, or `none`); past it the run (in
    /// `serve`, the instance) stops.
    #[arg(long, default_value_t = StepTime(Budgets::default().max_step_time),
          value_parser = parse_step_time, value_name = "DURATION")]
    max_step_time: StepTime,
    /// Delayed sends one run (in `serve`, one instance) may have pending; their data, with the
    /// events queued, may total 16 times --max-value-bytes.
    #[arg(long, default_value_t = Budgets::default().max_pending_sends, value_name = "N")]
    max_pending_sends: usize,
    /// Child protocols one run and all its children (`invoke`s, maps' items, theirs) may have
    /// alive at once; one more fails with `error.invoke.ID` naming the limit.
    #[arg(long, default_value_t = Limits::default().max_children, value_name = "N")]
    max_children: usize,
    /// The context and pending event data a run and all its child protocols may hold together;
    /// the instance that grows it past stops with an error naming the limit.
    #[arg(long, default_value_t = Limits::default().max_tree_bytes, value_name = "BYTES")]
    max_tree_bytes: usize,
}

/// `--max-step-time`: a duration, or none.
#[derive(Debug, Clone, Copy)]
pub struct StepTime(Option<Duration>);

impl std::fmt::Display for StepTime {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(duration) => formatter.write_str(&format_duration(duration)),
            None => formatter.write_str("none"),
        }
    }
}

fn parse_step_time(text: &str) -> Result<StepTime, String> {
    parse_duration(text).map(StepTime)
}

impl LimitOptions {
    pub fn limits(&self) -> Limits {
        Limits {
            max_microsteps: self.max_microsteps,
            budgets: Budgets {
                max_value_bytes: self.max_value_bytes,
                max_evaluation_steps: self.max_evaluation_steps,
                max_step_time: self.max_step_time.0,
                max_pending_sends: self.max_pending_sends,
            },
            max_children: self.max_children,
            max_tree_bytes: self.max_tree_bytes,
        }
    }
}
