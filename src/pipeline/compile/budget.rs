//! Budgets of a macrostep and of each evaluation in it: value size, evaluation steps, wall clock, and a stop signal.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What one macrostep, and each expression evaluated in it, may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budgets {
    /// The largest value (string, list, map, in `Value::size_in_bytes` terms) an expression may
    /// build or an assignment store; `--max-value-bytes`.
    pub max_value_bytes: usize,
    /// Comprehension iterations and bounded function calls one evaluation may take;
    /// `--max-evaluation-steps`.
    pub max_evaluation_steps: u64,
    /// How long one macrostep may run; `--max-step-time`, `None` for no limit.
    pub max_step_time: Option<Duration>,
    /// Delayed sends one run may have pending; `--max-pending-sends`.
    pub max_pending_sends: usize,
}

/// How many times the value bound the whole context, and all that one evaluation builds, may
/// hold: a protocol keeps a few large values, not thousands.
pub const CONTEXT_VALUES: usize = 16;

impl Default for Budgets {
    fn default() -> Self {
        Budgets::DEFAULT
    }
}

impl Budgets {
    /// What a step may use when no option says otherwise; a constant, so that the thread's
    /// budget state starts with it without a lazy initialisation checked on every access.
    pub const DEFAULT: Budgets = Budgets {
        max_value_bytes: 1 << 20,
        max_evaluation_steps: 100_000,
        max_step_time: Some(Duration::from_secs(10)),
        max_pending_sends: 10_000,
    };

    /// The bound on the whole context and on all the values one evaluation builds.
    pub fn max_context_bytes(&self) -> usize {
        self.max_value_bytes.saturating_mul(CONTEXT_VALUES)
    }
}

/// Why an evaluation, or a macrostep, was cut short.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Exceeded {
    ValueBytes {
        bytes: usize,
        limit: usize,
    },
    BuiltBytes {
        limit: usize,
    },
    EvaluationSteps {
        limit: u64,
    },
    ForeachIterations {
        limit: u64,
    },
    StepTime {
        limit: Duration,
    },
    Interrupted,
    /// A `matches` pattern longer than `MATCH_MAX_PATTERN_BYTES`.
    MatchPattern {
        bytes: usize,
        limit: usize,
    },
    /// A `matches` call that would cost more evaluation steps than are left.
    MatchWork {
        states: usize,
        text_bytes: usize,
        steps: u64,
        limit: u64,
    },
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exceeded::ValueBytes { bytes, limit } => write!(
                formatter,
                "a value of {bytes} bytes is more than the limit of {limit} bytes; raise it with --max-value-bytes"
            ),
            Exceeded::BuiltBytes { limit } => write!(
                formatter,
                "the values built by one evaluation total more than {limit} bytes ({CONTEXT_VALUES} times --max-value-bytes); raise it with --max-value-bytes"
            ),
            Exceeded::EvaluationSteps { limit } => write!(
                formatter,
                "the evaluation took more than {limit} steps (comprehension iterations and function calls); raise the limit with --max-evaluation-steps"
            ),
            Exceeded::ForeachIterations { limit } => write!(
                formatter,
                "the foreach ran more than {limit} iterations (those of foreach actions inside it included); raise the limit with --max-evaluation-steps"
            ),
            Exceeded::StepTime { limit } => write!(
                formatter,
                "the macrostep ran longer than {}; raise the limit with --max-step-time",
                format_duration(*limit)
            ),
            Exceeded::Interrupted => write!(formatter, "stopped by SIGINT or SIGTERM"),
            Exceeded::MatchPattern { bytes, limit } => write!(
                formatter,
                "a matches pattern of {bytes} bytes is longer than the limit of {limit} bytes; match against shorter patterns (the limit is fixed)"
            ),
            Exceeded::MatchWork {
                states,
                text_bytes,
                steps,
                limit,
            } => write!(
                formatter,
                "matching a pattern of {states} compiled states against a text of {text_bytes} bytes costs {steps} evaluation steps (one per {} states times bytes), more than the evaluation has left of its {limit}; raise the limit with --max-evaluation-steps, or match a simpler pattern or a shorter text",
                super::matching::MATCH_WORK_PER_STEP
            ),
        }
    }
}

/// `1.5s`, `250ms`: how `--max-step-time` is written.
pub fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// Reads `--max-step-time`: `10s`, `250ms`, `2m`, or `none`.
pub fn parse_duration(text: &str) -> Result<Option<Duration>, String> {
    if text == "none" {
        return Ok(None);
    }
    let split = text
        .find(|character: char| !character.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: write e.g. 10s, 250ms, 2m or none"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        _ => {
            return Err(format!(
                "`{text}` has no unit: write e.g. 10s, 250ms, 2m or none"
            ));
        }
    };
    if duration.is_zero() {
        return Err(
            "a step time of zero stops every step: write a positive duration or none".into(),
        );
    }
    Ok(Some(duration))
}

/// Set by SIGINT or SIGTERM (see `watch_stop_signals`): a busy macrostep sees it at its next
/// evaluation step or microstep and stops, where the async signal task would wait for it.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Makes SIGINT and SIGTERM set the stop flag, besides whatever else watches them (tokio's
/// streams): the handler only stores a flag, which is all a signal handler may do.
pub fn watch_stop_signals() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        for signal in [nix::libc::SIGINT, nix::libc::SIGTERM] {
            // SAFETY: the action is one atomic store, which is async-signal-safe.
            let _ = unsafe {
                signal_hook_registry::register(signal, || {
                    STOP_REQUESTED.store(true, Ordering::Relaxed)
                })
            };
        }
    });
}

/// Whether SIGINT or SIGTERM arrived since the process started.
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::Relaxed)
}

/// How often, in evaluation steps, the wall clock is read: reading it every step would cost
/// more than the step.
const CLOCK_EVERY: u64 = 256;

/// Why the macrostep must stop, set by an evaluation cut short: one byte, so that a step saves
/// and restores it cheaply (the time limit is the step's `max_step_time`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum StepOver {
    No,
    Interrupted,
    OutOfTime,
}

impl StepOver {
    fn of(why: Exceeded) -> StepOver {
        match why {
            Exceeded::StepTime { .. } => StepOver::OutOfTime,
            _ => StepOver::Interrupted,
        }
    }

    fn why(self, budgets: &Budgets) -> Option<Exceeded> {
        match self {
            StepOver::No => None,
            StepOver::Interrupted => Some(Exceeded::Interrupted),
            StepOver::OutOfTime => budgets
                .max_step_time
                .map(|limit| Exceeded::StepTime { limit }),
        }
    }
}

/// The budget state of the macrostep running on this thread.
struct Current {
    budgets: Cell<Budgets>,
    /// When the macrostep's clock started: at its first look at the clock, not at its start,
    /// so a step that never gets busy never reads the clock.
    started: Cell<Option<Instant>>,
    steps_left: Cell<u64>,
    built_bytes: Cell<usize>,
    exceeded: Cell<Option<Exceeded>>,
    /// Set when an evaluation ran out of the step's time or was interrupted: the macrostep
    /// stops at its next microstep.
    step_over: Cell<StepOver>,
    /// Iterations left to the outermost `foreach` running now, which its nested ones share.
    iterations_left: Cell<u64>,
    /// How many `foreach` actions are running, one inside the other.
    loop_depth: Cell<u32>,
    /// How many steps are running, one inside the other (a parent running a child's step).
    step_depth: Cell<u32>,
}

thread_local! {
    // Initialised by a constant and without a destructor: every access is one load relative to
    // the thread pointer, with no check that the state was initialised (each macrostep makes
    // several).
    static CURRENT: Current = const {
        Current {
            budgets: Cell::new(Budgets::DEFAULT),
            started: Cell::new(None),
            steps_left: Cell::new(Budgets::DEFAULT.max_evaluation_steps),
            built_bytes: Cell::new(0),
            exceeded: Cell::new(None),
            step_over: Cell::new(StepOver::No),
            iterations_left: Cell::new(0),
            loop_depth: Cell::new(0),
            step_depth: Cell::new(0),
        }
    };
}

/// The macrostep's budgets, in force on this thread until it is dropped, when the enclosing
/// step's (a parent running a child's step inside its own) are back.
///
/// Outside any step the thread holds the default budgets and no `foreach` runs (actions run
/// only inside a step), so a step that runs alone under the defaults (nearly all of them)
/// installs and saves nothing: it counts itself and starts its clock and stop afresh.
pub struct StepBudgets {
    /// What the step put back when it is over; `Restore::Nothing` for a step alone under the
    /// defaults.
    restore: Restore,
}

/// What a step undoes when it is over, besides its clock and pending stop.
enum Restore {
    /// It ran alone under the defaults: the thread's budgets are still the defaults.
    Nothing,
    /// It ran alone under budgets of its own: the defaults go back.
    Defaults,
    /// It ran inside another step (boxed: the guard stays small, and nested steps are rare),
    /// whose state goes back.
    Enclosing(Box<Enclosing>),
}

/// What a step run inside another puts back when it is over.
struct Enclosing {
    budgets: Budgets,
    started: Option<Instant>,
    step_over: StepOver,
    /// The enclosing `foreach` state (iterations left, depth): a child's step run inside a
    /// parent's loop starts loops of its own, and the parent's loop goes on where it was.
    loop_state: (u64, u32),
}

impl StepBudgets {
    /// Puts a step's budgets in force: `None` for the defaults.
    #[inline]
    pub fn enter(budgets: Option<&Budgets>) -> StepBudgets {
        CURRENT.with(|current| {
            let depth = current.step_depth.get();
            current.step_depth.set(depth + 1);
            if depth == 0 && budgets.is_none() {
                debug_assert!(
                    current.loop_depth.get() == 0 && current.budgets.get() == Budgets::DEFAULT
                );
                // An evaluation made outside any step may have started a clock or seen a
                // stop: the step starts its own.
                current.started.set(None);
                current.step_over.set(StepOver::No);
                return StepBudgets {
                    restore: Restore::Nothing,
                };
            }
            Self::install(current, depth, budgets)
        })
    }

    /// A step inside another, or one under budgets of its own: what it replaces is kept.
    #[inline(never)]
    fn install(current: &Current, depth: u32, budgets: Option<&Budgets>) -> StepBudgets {
        let restore = if depth > 0 {
            Restore::Enclosing(Box::new(Enclosing {
                budgets: current.budgets.get(),
                started: current.started.get(),
                step_over: current.step_over.get(),
                loop_state: (current.iterations_left.get(), current.loop_depth.replace(0)),
            }))
        } else {
            Restore::Defaults
        };
        current
            .budgets
            .set(budgets.copied().unwrap_or(Budgets::DEFAULT));
        current.started.set(None);
        current.step_over.set(StepOver::No);
        StepBudgets { restore }
    }
}

impl Drop for StepBudgets {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|current| {
            current.step_depth.set(current.step_depth.get() - 1);
            match &mut self.restore {
                // What is left outside a step: no clock, no stop pending.
                Restore::Nothing => {
                    current.started.set(None);
                    current.step_over.set(StepOver::No);
                }
                restore => put_back(current, restore),
            }
        });
    }
}

/// Ends a step that never put its budgets in force (see `Algorithm::budgets`) as the drop of
/// `StepBudgets` ends one that ran alone: outside any step the thread is left with no clock
/// started and no stop pending, whatever an evaluation made outside a step left there. A step
/// inside another leaves the enclosing step's as they are.
#[inline]
pub fn step_without_budgets_over() {
    CURRENT.with(|current| {
        if current.step_depth.get() == 0 {
            current.started.set(None);
            current.step_over.set(StepOver::No);
        }
    });
}

/// Puts back what a step under budgets of its own, or inside another, replaced.
#[inline(never)]
fn put_back(current: &Current, restore: &mut Restore) {
    match std::mem::replace(restore, Restore::Nothing) {
        Restore::Enclosing(enclosing) => {
            current.budgets.set(enclosing.budgets);
            current.started.set(enclosing.started);
            current.step_over.set(enclosing.step_over);
            current.iterations_left.set(enclosing.loop_state.0);
            current.loop_depth.set(enclosing.loop_state.1);
        }
        Restore::Defaults | Restore::Nothing => {
            current.budgets.set(Budgets::DEFAULT);
            current.started.set(None);
            current.step_over.set(StepOver::No);
        }
    }
}

/// The budgets in force on this thread.
pub fn current() -> Budgets {
    CURRENT.with(|current| current.budgets.get())
}

/// Starts one evaluation: a full allowance of steps and built bytes. Returns the budgets in
/// force.
pub fn begin_evaluation() -> Budgets {
    CURRENT.with(|current| {
        let budgets = current.budgets.get();
        current.steps_left.set(budgets.max_evaluation_steps);
        current.built_bytes.set(0);
        current.exceeded.set(None);
        budgets
    })
}

/// Ends an evaluation: what cut it short, if anything did.
pub fn end_evaluation() -> Option<Exceeded> {
    CURRENT.with(|current| current.exceeded.take())
}

/// Whether the evaluation is already cut short: everything after fails fast.
pub fn exhausted() -> Option<Exceeded> {
    CURRENT.with(|current| current.exceeded.get())
}

fn exceed(current: &Current, why: Exceeded) -> Exceeded {
    current.exceeded.set(Some(why));
    why
}

/// Spends `steps` evaluation steps; every `CLOCK_EVERY` steps also looks at the step's clock.
/// Fails once the evaluation is out of steps or time, or a stop was requested.
#[inline]
pub fn spend(steps: u64) -> Result<(), Exceeded> {
    CURRENT.with(|current| {
        if let Some(why) = current.exceeded.get() {
            return Err(why);
        }
        if stop_requested() {
            current.step_over.set(StepOver::Interrupted);
            return Err(exceed(current, Exceeded::Interrupted));
        }
        let left = current.steps_left.get();
        if left < steps {
            let limit = current.budgets.get().max_evaluation_steps;
            return Err(exceed(current, Exceeded::EvaluationSteps { limit }));
        }
        current.steps_left.set(left - steps);
        if left / CLOCK_EVERY != (left - steps) / CLOCK_EVERY
            && let Some(why) = step_time_passed(current)
        {
            current.step_over.set(StepOver::of(why));
            return Err(exceed(current, why));
        }
        Ok(())
    })
}

/// Spends `steps` for one call that no clock can interrupt once it starts: refused whole, as
/// `short(limit)`, when the evaluation has fewer left.
pub fn spend_whole(steps: u64, short: impl FnOnce(u64) -> Exceeded) -> Result<(), Exceeded> {
    let left = CURRENT.with(|current| current.steps_left.get());
    if steps > left {
        return Err(refuse_match(short(current().max_evaluation_steps)));
    }
    spend(steps)
}

/// Marks the evaluation cut short by `why`: it reports `why`, whatever it computed after.
pub fn refuse_match(why: Exceeded) -> Exceeded {
    CURRENT.with(|current| exceed(current, why))
}

/// Checks that a value of `bytes` may be built, and counts it towards what the evaluation
/// built in all: called before the value is allocated.
pub fn build(bytes: usize) -> Result<(), Exceeded> {
    CURRENT.with(|current| {
        if let Some(why) = current.exceeded.get() {
            return Err(why);
        }
        let budgets = current.budgets.get();
        if bytes > budgets.max_value_bytes {
            return Err(exceed(
                current,
                Exceeded::ValueBytes {
                    bytes,
                    limit: budgets.max_value_bytes,
                },
            ));
        }
        let built = current.built_bytes.get().saturating_add(bytes);
        if built > budgets.max_context_bytes() {
            return Err(exceed(
                current,
                Exceeded::BuiltBytes {
                    limit: budgets.max_context_bytes(),
                },
            ));
        }
        current.built_bytes.set(built);
        Ok(())
    })
}

/// Checks a finished value's size against the value bound.
pub fn check_value(bytes: usize) -> Result<(), Exceeded> {
    let limit = current().max_value_bytes;
    if bytes > limit {
        return Err(Exceeded::ValueBytes { bytes, limit });
    }
    Ok(())
}

/// The iteration allowance of a running `foreach`. The outermost one gets
/// `--max-evaluation-steps` iterations, which the foreach actions in its body spend too: like a
/// comprehension's, a loop's iterations are bounded, nested loops' product included, and an
/// evaluation inside the body (which starts its own allowance) does not renew them.
pub struct LoopBudget(());

impl LoopBudget {
    pub fn enter() -> LoopBudget {
        CURRENT.with(|current| {
            let depth = current.loop_depth.get();
            if depth == 0 {
                let budgets = current.budgets.get();
                current.iterations_left.set(budgets.max_evaluation_steps);
            }
            current.loop_depth.set(depth + 1);
        });
        LoopBudget(())
    }

    /// Spends one iteration; every `CLOCK_EVERY` also looks at the step's clock. Fails once the
    /// loop is out of iterations or time, or a stop was requested; time and a stop also stop
    /// the macrostep.
    pub fn spend(&self) -> Result<(), Exceeded> {
        CURRENT.with(|current| {
            if stop_requested() {
                current.step_over.set(StepOver::Interrupted);
                return Err(Exceeded::Interrupted);
            }
            let left = current.iterations_left.get();
            if left == 0 {
                let limit = current.budgets.get().max_evaluation_steps;
                return Err(Exceeded::ForeachIterations { limit });
            }
            current.iterations_left.set(left - 1);
            if left.is_multiple_of(CLOCK_EVERY)
                && let Some(why) = step_time_passed(current)
            {
                current.step_over.set(StepOver::of(why));
                return Err(why);
            }
            Ok(())
        })
    }
}

impl Drop for LoopBudget {
    fn drop(&mut self) {
        CURRENT.with(|current| current.loop_depth.set(current.loop_depth.get() - 1));
    }
}

/// How often, in microsteps, the wall clock is read between them.
const CLOCK_EVERY_MICROSTEPS: usize = 16;

/// Whether the macrostep must stop: an evaluation in it was cut short by a signal or the
/// clock, or, looked at every `CLOCK_EVERY_MICROSTEPS` microsteps (`count` is the caller's),
/// a stop was requested or its time is up. A short step that a signal arrives during is let
/// finish and be committed: the signal is then taken between steps.
#[inline(always)]
pub fn step_must_stop(count: usize) -> Option<Exceeded> {
    // Inlined, the question most microsteps ask is one load and a test; the rest is apart.
    if CURRENT.with(|current| current.step_over.get()) == StepOver::No
        && !count.is_multiple_of(CLOCK_EVERY_MICROSTEPS)
    {
        return None;
    }
    step_must_stop_now()
}

#[inline(never)]
fn step_must_stop_now() -> Option<Exceeded> {
    CURRENT.with(|current| {
        if current.step_over.get() != StepOver::No {
            return current.step_over.get().why(&current.budgets.get());
        }
        if stop_requested() {
            return Some(Exceeded::Interrupted);
        }
        step_time_passed(current)
    })
}

fn step_time_passed(current: &Current) -> Option<Exceeded> {
    let limit = current.budgets.get().max_step_time?;
    let now = Instant::now();
    let started = *current.started.get().get_or_insert(now);
    current.started.set(Some(started));
    (now.duration_since(started) > limit).then_some(Exceeded::StepTime { limit })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(max_evaluation_steps: u64) -> Budgets {
        Budgets {
            max_evaluation_steps,
            ..Budgets::default()
        }
    }

    /// A step run inside another has budgets and a stop of its own; when it is over the
    /// enclosing step's are back, and after a step that ran alone the thread's are the
    /// defaults, with no stop pending for the next step.
    #[test]
    fn a_nested_step_puts_back_the_enclosing_steps_budgets() {
        let outer = steps(7);
        {
            let _step = StepBudgets::enter(Some(&outer));
            assert_eq!(current(), outer);
            CURRENT.with(|current| current.step_over.set(StepOver::Interrupted));
            {
                let _child_step = StepBudgets::enter(Some(&steps(1)));
                assert_eq!(current(), steps(1));
                assert_eq!(step_must_stop(1), None);
            }
            assert_eq!(current(), outer);
            assert_eq!(step_must_stop(1), Some(Exceeded::Interrupted));
        }
        assert_eq!(current(), Budgets::DEFAULT);
        let _next = StepBudgets::enter(Some(&outer));
        assert_eq!(step_must_stop(1), None);
    }

    /// A step that never put its budgets in force ends as one that ran alone: outside any
    /// step, a stop or clock an evaluation left behind is gone; inside another step, the
    /// enclosing step's pending stop stays.
    #[test]
    fn a_step_without_budgets_in_force_leaves_what_a_step_alone_leaves() {
        CURRENT.with(|current| {
            current.step_over.set(StepOver::Interrupted);
            current.started.set(Some(Instant::now()));
        });
        step_without_budgets_over();
        CURRENT.with(|current| {
            assert_eq!(current.step_over.get(), StepOver::No);
            assert_eq!(current.started.get(), None);
        });
        let _enclosing = StepBudgets::enter(None);
        CURRENT.with(|current| current.step_over.set(StepOver::Interrupted));
        step_without_budgets_over();
        assert_eq!(step_must_stop(1), Some(Exceeded::Interrupted));
    }

    /// Nested loops share the outermost one's allowance; a step entered inside a loop has its
    /// own, and the loop goes on where it was when that step is over.
    #[test]
    fn loops_share_one_allowance_per_step() {
        let _step = StepBudgets::enter(Some(&steps(3)));
        let outer = LoopBudget::enter();
        assert_eq!(outer.spend(), Ok(()));
        {
            let inner = LoopBudget::enter();
            assert_eq!(inner.spend(), Ok(()));
            {
                let _child_step = StepBudgets::enter(Some(&steps(1)));
                let child_loop = LoopBudget::enter();
                assert_eq!(child_loop.spend(), Ok(()));
                assert_eq!(
                    child_loop.spend(),
                    Err(Exceeded::ForeachIterations { limit: 1 })
                );
            }
            assert_eq!(inner.spend(), Ok(()));
        }
        assert_eq!(outer.spend(), Err(Exceeded::ForeachIterations { limit: 3 }));
        drop(outer);
        // The next outermost loop starts with a full allowance.
        let again = LoopBudget::enter();
        assert_eq!(again.spend(), Ok(()));
    }
}
