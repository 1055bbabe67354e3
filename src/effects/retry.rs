//! Retry policies (Step Functions vocabulary plus per-attempt timeout multipliers) and their executor, a statig machine: attempting → backing off → succeeded | exhausted.

use std::time::Duration;

use statig::prelude::*;

use crate::base::event::EventDescriptor;

/// The timeout ladder of ADR-018 (1x, 2x, 3x, 5x, 10x the base timeout).
pub const ADR_018_MULTIPLIERS: [f64; 5] = [1.0, 2.0, 3.0, 5.0, 10.0];

/// A declarative retry policy: which errors to retry, how long to pause between attempts, and
/// how long each attempt may run.
///
/// The vocabulary is the Step Functions Retrier's (`ErrorEquals`, `IntervalSeconds`,
/// `MaxAttempts`, `BackoffRate`, `MaxDelaySeconds`, `JitterStrategy`), with one difference in
/// counting: `max_attempts` counts attempts in all, the first included, where Step Functions'
/// `MaxAttempts` counts retries. Step Functions `MaxAttempts: N` is `max_attempts: N + 1` here.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RetryPolicy {
    /// Event descriptors of the errors this retrier handles, e.g. `["error.exec.timeout",
    /// "error.exec"]`, matched as SCXML descriptors (token prefixes); empty = every error.
    pub error_equals: Vec<EventDescriptor>,
    /// Pause before the first retry.
    pub interval: Duration,
    /// Attempts in all, the first included (Step Functions counts retries; we count attempts).
    /// At least 1: 0 is read as 1, since the first attempt always runs.
    pub max_attempts: u32,
    /// Each pause is the previous one times this (>= 1.0; a smaller value or NaN is read as 1.0).
    pub backoff_rate: f64,
    /// The longest pause, applied before jitter; `None` = no cap.
    pub max_delay: Option<Duration>,
    pub jitter: Jitter,
    /// Base timeout of one attempt; attempt n gets base × `timeout_multipliers[n-1]`; past the
    /// list's end the last multiplier repeats. `None` = attempts have no timeout.
    pub timeout: Option<Duration>,
    /// Empty = all 1.0. A multiplier that is not a positive number (NaN, 0, negative) is read as
    /// 1.0.
    pub timeout_multipliers: Vec<f64>,
}

impl Default for RetryPolicy {
    /// Step Functions' defaults (1 s interval, 3 retries so 4 attempts, rate 2.0, no jitter),
    /// every error handled, no timeout.
    fn default() -> Self {
        RetryPolicy {
            error_equals: Vec::new(),
            interval: Duration::from_secs(1),
            max_attempts: 4,
            backoff_rate: 2.0,
            max_delay: None,
            jitter: Jitter::None,
            timeout: None,
            timeout_multipliers: Vec::new(),
        }
    }
}

/// How a computed pause is randomised (Step Functions `JitterStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Jitter {
    /// The pause is exactly the computed one.
    None,
    /// The pause is uniformly random in [0, computed pause], drawn from a PRNG seeded with
    /// `seed`, so a run can be reproduced.
    Full { seed: u64 },
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryStep {
    /// Run attempt `attempt` (1-based) with this timeout (None = no timeout); `multiplier` is the
    /// one applied (reported even without a timeout, for telemetry).
    Attempt {
        attempt: u32,
        timeout: Option<Duration>,
        multiplier: f64,
    },
    /// Wait this long, then call `resume()` (it will say Attempt).
    Wait { after_attempt: u32, delay: Duration },
    /// The last attempt succeeded.
    Succeeded { attempts: u32 },
    /// Give up: the error is not handled by this policy (`handled: false`), or no attempts remain
    /// (`handled: true`). The driver reports the last error.
    Exhausted { attempts: u32, handled: bool },
}

impl RetryStep {
    /// The ADR-018 telemetry event this step corresponds to; the driver prefixes it with the
    /// operation's name (`<id>_timeout_attempt`, ...).
    pub fn telemetry_name(&self) -> &'static str {
        match self {
            RetryStep::Attempt { .. } => "timeout_attempt",
            RetryStep::Wait { .. } => "timeout_retry",
            RetryStep::Succeeded { .. } => "timeout_success",
            RetryStep::Exhausted { .. } => "timeout_exhausted",
        }
    }
}

/// What the driver tells the retry machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetryEvent<'a> {
    Start,
    Report(Result<(), &'a str>),
    Resume,
}

/// Shared storage of the retry machine: the policy, the counters, and the step the driver must
/// take next (read back through statig's shared `inner()` view).
#[derive(Debug)]
struct Retrier {
    policy: RetryPolicy,
    /// The number of the current (or last) attempt, 1-based.
    attempts: u32,
    step: RetryStep,
    random: SplitMix64,
}

#[state_machine(
    initial = "State::attempting()",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl Retrier {
    #[state]
    fn attempting(&mut self, event: &RetryEvent<'_>) -> Outcome<State> {
        match event {
            RetryEvent::Report(Ok(())) => {
                self.step = RetryStep::Succeeded {
                    attempts: self.attempts,
                };
                Transition(State::succeeded())
            }
            RetryEvent::Report(Err(error)) => {
                if !self.handles(error) {
                    self.step = RetryStep::Exhausted {
                        attempts: self.attempts,
                        handled: false,
                    };
                    Transition(State::exhausted())
                } else if self.attempts >= self.max_attempts() {
                    self.step = RetryStep::Exhausted {
                        attempts: self.attempts,
                        handled: true,
                    };
                    Transition(State::exhausted())
                } else {
                    let delay = self.pause_after(self.attempts);
                    self.step = RetryStep::Wait {
                        after_attempt: self.attempts,
                        delay,
                    };
                    Transition(State::backing_off())
                }
            }
            // `start` reads the current attempt; `resume` while attempting is out of turn.
            RetryEvent::Start | RetryEvent::Resume => Handled,
        }
    }

    #[state]
    fn backing_off(&mut self, event: &RetryEvent<'_>) -> Outcome<State> {
        match event {
            RetryEvent::Resume => {
                // Never overflows: a Wait is only given while attempts < max_attempts.
                self.attempts = self.attempts.saturating_add(1);
                self.step = self.attempt_step(self.attempts);
                Transition(State::attempting())
            }
            // Out of turn: nothing is running, so there is no outcome to take and no attempt to
            // start; the Wait stands.
            RetryEvent::Start | RetryEvent::Report(_) => Handled,
        }
    }

    #[state]
    fn succeeded() -> Outcome<State> {
        // Final: every call returns the final step.
        Handled
    }

    #[state]
    fn exhausted() -> Outcome<State> {
        // Final: every call returns the final step.
        Handled
    }
}

impl Retrier {
    fn new(policy: RetryPolicy) -> Retrier {
        let seed = match policy.jitter {
            Jitter::Full { seed } => seed,
            Jitter::None => 0,
        };
        let mut retrier = Retrier {
            policy,
            attempts: 1,
            step: RetryStep::Succeeded { attempts: 0 },
            random: SplitMix64 { state: seed },
        };
        retrier.step = retrier.attempt_step(1);
        retrier
    }

    fn max_attempts(&self) -> u32 {
        self.policy.max_attempts.max(1)
    }

    fn handles(&self, error: &str) -> bool {
        self.policy.error_equals.is_empty()
            || self
                .policy
                .error_equals
                .iter()
                .any(|descriptor| descriptor.matches(error))
    }

    fn attempt_step(&self, attempt: u32) -> RetryStep {
        let (timeout, multiplier) = attempt_timeout(
            self.policy.timeout,
            &self.policy.timeout_multipliers,
            attempt,
        );
        RetryStep::Attempt {
            attempt,
            timeout,
            multiplier,
        }
    }

    /// The pause after failed attempt `attempt`: interval × rate^(attempt-1), capped, jittered.
    fn pause_after(&mut self, attempt: u32) -> Duration {
        let rate = if self.policy.backoff_rate >= 1.0 {
            self.policy.backoff_rate
        } else {
            // Also catches NaN, which fails every comparison.
            1.0
        };
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let mut delay = scale(self.policy.interval, rate.powi(exponent));
        if let Some(max_delay) = self.policy.max_delay {
            delay = delay.min(max_delay);
        }
        match self.policy.jitter {
            Jitter::None => delay,
            Jitter::Full { .. } => full_jitter(delay, self.random.next()),
        }
    }
}

/// The timeout ladder, the one place it is computed (the executor's steps and an effect's
/// `RetryPlan` both use it): attempt `attempt` (1-based) gets `base` × the `attempt`-th
/// multiplier; past the list's end the last one repeats (with ADR-018's list, its 10x cap; a
/// custom list keeps its own ceiling). A multiplier that is not a finite positive number is
/// read as 1.0 (the compiler refuses such literals; a computed list could still hold one).
/// Returns the timeout (none without a base) and the multiplier applied.
pub fn attempt_timeout(
    base: Option<Duration>,
    multipliers: &[f64],
    attempt: u32,
) -> (Option<Duration>, f64) {
    let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
    let multiplier = multipliers
        .get(index)
        .or(multipliers.last())
        .copied()
        .filter(|multiplier| multiplier.is_finite() && *multiplier > 0.0)
        .unwrap_or(1.0);
    (base.map(|base| scale(base, multiplier)), multiplier)
}

/// `duration × factor` for a factor >= 0, saturating at `Duration::MAX`. Whole factors are
/// multiplied exactly in integers, so ladders like 2 min × 5 come out to the nanosecond.
fn scale(duration: Duration, factor: f64) -> Duration {
    if factor.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&factor) {
        // Exact: the factor is a whole number within u32 range, so the cast loses nothing.
        duration.checked_mul(factor as u32).unwrap_or(Duration::MAX)
    } else {
        // Fails only on overflow (or an infinite factor): saturate.
        Duration::try_from_secs_f64(duration.as_secs_f64() * factor).unwrap_or(Duration::MAX)
    }
}

/// A uniformly random duration in [0, `delay`], from one 64-bit random draw.
fn full_jitter(delay: Duration, draw: u64) -> Duration {
    let nanos = delay.as_nanos();
    if nanos < u128::from(u64::MAX) {
        // (nanos + 1) × draw / 2^64 lies in [0, nanos]; it fits in u128 as both factors are
        // below 2^64.
        let jittered = ((nanos + 1) * u128::from(draw)) >> 64;
        Duration::from_nanos(u64::try_from(jittered).unwrap_or(u64::MAX))
    } else {
        // Pauses beyond 584 years: float precision is plenty.
        let fraction = draw as f64 / 2f64.powi(64);
        Duration::try_from_secs_f64(delay.as_secs_f64() * fraction)
            .unwrap_or(delay)
            .min(delay)
    }
}

/// SplitMix64: a tiny, well-mixed PRNG, enough to spread pauses reproducibly (not for secrets).
#[derive(Debug, Clone)]
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }
}

/// Decides, attempt by attempt, what a retried operation does next. Pure: it never sleeps or
/// does I/O; the driver runs the attempts and does the waiting, so retry ladders are exact under
/// virtual time.
///
/// The executor is created in `attempting`, attempt 1 pending. Calling a method out of turn never
/// panics and changes nothing: it returns the current step unchanged (see [`Self::current`]).
/// That is: `resume` while attempting returns the pending Attempt; `start` or `report` while
/// backing off returns the Wait (a reported outcome is ignored, since no attempt was running);
/// any call once succeeded or exhausted returns that final step.
pub struct RetryExecutor {
    machine: statig::blocking::InitializedStateMachine<Retrier>,
}

impl RetryExecutor {
    pub fn new(policy: RetryPolicy) -> RetryExecutor {
        RetryExecutor {
            machine: Retrier::new(policy).uninitialized_state_machine().init(),
        }
    }

    /// An executor that had granted retries up to attempt `attempts` (1-based) when its run
    /// was interrupted: attempting that attempt again, its jitter draws where they were.
    pub fn resumed(policy: RetryPolicy, attempts: u32) -> RetryExecutor {
        let mut retrier = Retrier::new(policy);
        let attempts = attempts.clamp(1, retrier.max_attempts());
        for _ in 1..attempts {
            retrier.random.next();
        }
        retrier.attempts = attempts;
        retrier.step = retrier.attempt_step(attempts);
        RetryExecutor {
            machine: retrier.uninitialized_state_machine().init(),
        }
    }

    /// The first step: always Attempt 1 on a new executor (later, the current step unchanged).
    pub fn start(&mut self) -> RetryStep {
        self.send(RetryEvent::Start)
    }

    /// Report the outcome of the current attempt: `Ok(())` or `Err(error_event_name)` such as
    /// "error.exec.timeout.op"; returns the next step (Wait, Succeeded or Exhausted).
    pub fn report(&mut self, outcome: Result<(), &str>) -> RetryStep {
        self.send(RetryEvent::Report(outcome))
    }

    /// After a Wait: the next Attempt.
    pub fn resume(&mut self) -> RetryStep {
        self.send(RetryEvent::Resume)
    }

    /// The step the driver must take now, without moving.
    pub fn current(&self) -> RetryStep {
        self.machine.inner().step.clone()
    }

    /// The number of the current (or last) attempt, 1-based: 1 from creation on.
    pub fn attempts(&self) -> u32 {
        self.machine.inner().attempts
    }

    pub fn state_name(&self) -> &'static str {
        match self.machine.state() {
            State::Attempting {} => "attempting",
            State::BackingOff {} => "backing_off",
            State::Succeeded {} => "succeeded",
            State::Exhausted {} => "exhausted",
        }
    }

    fn send(&mut self, event: RetryEvent<'_>) -> RetryStep {
        self.machine.handle(&event);
        self.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_MINUTES: Duration = Duration::from_secs(120);

    fn descriptors(texts: &[&str]) -> Vec<EventDescriptor> {
        texts
            .iter()
            .map(|text| EventDescriptor::parse(text))
            .collect()
    }

    fn adr_018_policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            error_equals: descriptors(&["error.exec.timeout"]),
            interval: Duration::from_secs(1),
            max_attempts,
            backoff_rate: 2.0,
            timeout: Some(TWO_MINUTES),
            timeout_multipliers: ADR_018_MULTIPLIERS.to_vec(),
            ..RetryPolicy::default()
        }
    }

    /// Runs attempts that all fail with `error`, collecting each step until the executor stops.
    fn fail_every_attempt(policy: RetryPolicy, error: &str) -> Vec<RetryStep> {
        let mut executor = RetryExecutor::new(policy);
        let mut steps = vec![executor.start()];
        loop {
            let step = executor.report(Err(error));
            steps.push(step.clone());
            match step {
                RetryStep::Wait { .. } => steps.push(executor.resume()),
                _ => return steps,
            }
        }
    }

    fn attempt_timeouts_ms(steps: &[RetryStep]) -> Vec<u128> {
        steps
            .iter()
            .filter_map(|step| match step {
                RetryStep::Attempt { timeout, .. } => timeout.map(|timeout| timeout.as_millis()),
                _ => None,
            })
            .collect()
    }

    fn waits(steps: &[RetryStep]) -> Vec<Duration> {
        steps
            .iter()
            .filter_map(|step| match step {
                RetryStep::Wait { delay, .. } => Some(*delay),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_adr_018_ladder_gives_exact_attempt_timeouts() {
        let steps = fail_every_attempt(adr_018_policy(5), "error.exec.timeout.op");
        assert_eq!(
            attempt_timeouts_ms(&steps),
            [120_000, 240_000, 360_000, 600_000, 1_200_000]
        );
        assert_eq!(
            steps.last(),
            Some(&RetryStep::Exhausted {
                attempts: 5,
                handled: true
            })
        );

        // Past the list's end the last multiplier (10x) repeats.
        let steps = fail_every_attempt(adr_018_policy(6), "error.exec.timeout.op");
        assert_eq!(
            attempt_timeouts_ms(&steps),
            [120_000, 240_000, 360_000, 600_000, 1_200_000, 1_200_000]
        );
        assert!(steps.contains(&RetryStep::Attempt {
            attempt: 6,
            timeout: Some(Duration::from_secs(1200)),
            multiplier: 10.0,
        }));
    }

    #[test]
    fn timeout_timeout_ok_succeeds_on_the_third_attempt() {
        let mut executor = RetryExecutor::new(adr_018_policy(5));
        let attempt = |attempt: u32, seconds: u64, multiplier: f64| RetryStep::Attempt {
            attempt,
            timeout: Some(Duration::from_secs(seconds)),
            multiplier,
        };
        assert_eq!(executor.state_name(), "attempting");
        assert_eq!(executor.start(), attempt(1, 120, 1.0));
        assert_eq!(
            executor.report(Err("error.exec.timeout.op")),
            RetryStep::Wait {
                after_attempt: 1,
                delay: Duration::from_secs(1)
            }
        );
        assert_eq!(executor.state_name(), "backing_off");
        assert_eq!(executor.resume(), attempt(2, 240, 2.0));
        assert_eq!(
            executor.report(Err("error.exec.timeout.op")),
            RetryStep::Wait {
                after_attempt: 2,
                delay: Duration::from_secs(2)
            }
        );
        assert_eq!(executor.resume(), attempt(3, 360, 3.0));
        assert_eq!(executor.attempts(), 3);
        assert_eq!(
            executor.report(Ok(())),
            RetryStep::Succeeded { attempts: 3 }
        );
        assert_eq!(executor.state_name(), "succeeded");
    }

    #[test]
    fn a_first_success_needs_no_retry() {
        let mut executor = RetryExecutor::new(RetryPolicy::default());
        assert_eq!(
            executor.start(),
            RetryStep::Attempt {
                attempt: 1,
                timeout: None,
                multiplier: 1.0
            }
        );
        assert_eq!(
            executor.report(Ok(())),
            RetryStep::Succeeded { attempts: 1 }
        );
    }

    #[test]
    fn pauses_grow_by_the_backoff_rate_up_to_the_maximum_delay() {
        let policy = RetryPolicy {
            interval: Duration::from_secs(2),
            max_attempts: 5,
            backoff_rate: 2.0,
            max_delay: Some(Duration::from_secs(5)),
            ..RetryPolicy::default()
        };
        let steps = fail_every_attempt(policy, "error.exec.op");
        assert_eq!(
            waits(&steps),
            [2, 4, 5, 5].map(Duration::from_secs).to_vec()
        );
        assert_eq!(
            steps.last(),
            Some(&RetryStep::Exhausted {
                attempts: 5,
                handled: true
            })
        );
    }

    #[test]
    fn fractional_rates_and_multipliers_scale_durations() {
        let policy = RetryPolicy {
            interval: Duration::from_millis(1000),
            max_attempts: 3,
            backoff_rate: 1.5,
            timeout: Some(Duration::from_secs(10)),
            timeout_multipliers: vec![1.0, 2.5],
            ..RetryPolicy::default()
        };
        let steps = fail_every_attempt(policy, "error.exec.op");
        assert_eq!(
            waits(&steps),
            [1000, 1500].map(Duration::from_millis).to_vec()
        );
        assert_eq!(attempt_timeouts_ms(&steps), [10_000, 25_000, 25_000]);
    }

    #[test]
    fn only_errors_matching_error_equals_are_retried() {
        let policy = RetryPolicy {
            error_equals: descriptors(&["error.exec.timeout"]),
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        let mut executor = RetryExecutor::new(policy.clone());
        executor.start();
        assert!(matches!(
            executor.report(Err("error.exec.timeout.op")),
            RetryStep::Wait {
                after_attempt: 1,
                ..
            }
        ));
        executor.resume();
        assert_eq!(
            executor.report(Err("error.exec.op")),
            RetryStep::Exhausted {
                attempts: 2,
                handled: false
            }
        );
        assert_eq!(executor.state_name(), "exhausted");

        // Descriptors match whole tokens: `error.exec.timeoutx` is not a timeout.
        let mut executor = RetryExecutor::new(policy);
        executor.start();
        assert_eq!(
            executor.report(Err("error.exec.timeoutx")),
            RetryStep::Exhausted {
                attempts: 1,
                handled: false
            }
        );
    }

    #[test]
    fn an_empty_error_equals_retries_every_error() {
        let mut executor = RetryExecutor::new(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        });
        executor.start();
        for error in ["error.exec.op", "error.anything.else"] {
            assert!(matches!(
                executor.report(Err(error)),
                RetryStep::Wait { .. }
            ));
            assert!(matches!(executor.resume(), RetryStep::Attempt { .. }));
        }
        assert_eq!(
            executor.report(Err("oops")),
            RetryStep::Exhausted {
                attempts: 3,
                handled: true
            }
        );
    }

    #[test]
    fn a_single_attempt_is_never_retried() {
        for max_attempts in [1, 0] {
            let mut executor = RetryExecutor::new(RetryPolicy {
                max_attempts,
                ..RetryPolicy::default()
            });
            assert!(matches!(
                executor.start(),
                RetryStep::Attempt { attempt: 1, .. }
            ));
            assert_eq!(
                executor.report(Err("error.exec.op")),
                RetryStep::Exhausted {
                    attempts: 1,
                    handled: true
                }
            );
        }
    }

    #[test]
    fn full_jitter_is_reproducible_and_within_bounds() {
        let policy = |seed: u64| RetryPolicy {
            interval: Duration::from_secs(2),
            max_attempts: 8,
            backoff_rate: 2.0,
            max_delay: Some(Duration::from_secs(60)),
            jitter: Jitter::Full { seed },
            ..RetryPolicy::default()
        };
        let first = waits(&fail_every_attempt(policy(42), "error.exec.op"));
        let again = waits(&fail_every_attempt(policy(42), "error.exec.op"));
        let other = waits(&fail_every_attempt(policy(7), "error.exec.op"));
        assert_eq!(first, again);
        assert_ne!(first, other);

        let unjittered = [2, 4, 8, 16, 32, 60, 60].map(Duration::from_secs);
        assert_eq!(first.len(), unjittered.len());
        for (jittered, bound) in first.iter().chain(&other).zip(unjittered.iter().cycle()) {
            assert!(jittered <= bound, "{jittered:?} > {bound:?}");
        }
        // Not all pinned to the bound, else nothing was randomised.
        assert!(
            first
                .iter()
                .zip(&unjittered)
                .any(|(jittered, bound)| jittered < bound)
        );
    }

    #[test]
    fn full_jitter_spans_its_range() {
        let mut random = SplitMix64 { state: 1 };
        let delay = Duration::from_millis(1000);
        let draws: Vec<Duration> = (0..1000)
            .map(|_| full_jitter(delay, random.next()))
            .collect();
        assert!(draws.iter().all(|draw| *draw <= delay));
        assert!(draws.iter().any(|draw| *draw < Duration::from_millis(100)));
        assert!(draws.iter().any(|draw| *draw > Duration::from_millis(900)));
        // The extremes of a draw map to the extremes of the range.
        assert_eq!(full_jitter(delay, 0), Duration::ZERO);
        assert_eq!(full_jitter(delay, u64::MAX), delay);
        assert!(full_jitter(Duration::MAX, u64::MAX) <= Duration::MAX);
    }

    #[test]
    fn no_jitter_is_exact() {
        let steps = fail_every_attempt(
            RetryPolicy {
                interval: Duration::from_millis(250),
                max_attempts: 4,
                backoff_rate: 3.0,
                jitter: Jitter::None,
                ..RetryPolicy::default()
            },
            "error.exec.op",
        );
        assert_eq!(
            waits(&steps),
            [250, 750, 2250].map(Duration::from_millis).to_vec()
        );
    }

    #[test]
    fn out_of_turn_calls_return_the_current_step_unchanged() {
        let mut executor = RetryExecutor::new(adr_018_policy(2));
        let first = executor.start();
        // Resume while attempting: still attempt 1.
        assert_eq!(executor.resume(), first);
        assert_eq!(executor.start(), first);
        assert_eq!(executor.attempts(), 1);
        assert_eq!(executor.state_name(), "attempting");

        let wait = executor.report(Err("error.exec.timeout.op"));
        // Start or report while backing off: the Wait stands, the outcome is ignored.
        assert_eq!(executor.start(), wait);
        assert_eq!(executor.report(Ok(())), wait);
        assert_eq!(executor.report(Err("error.exec.op")), wait);
        assert_eq!(executor.attempts(), 1);
        assert_eq!(executor.state_name(), "backing_off");

        assert!(matches!(
            executor.resume(),
            RetryStep::Attempt { attempt: 2, .. }
        ));
        let exhausted = executor.report(Err("error.exec.timeout.op"));
        assert_eq!(
            exhausted,
            RetryStep::Exhausted {
                attempts: 2,
                handled: true
            }
        );
        // Once finished, every call returns the final step.
        assert_eq!(executor.resume(), exhausted);
        assert_eq!(executor.start(), exhausted);
        assert_eq!(executor.report(Ok(())), exhausted);
        assert_eq!(executor.current(), exhausted);
        assert_eq!(executor.attempts(), 2);
        assert_eq!(executor.state_name(), "exhausted");

        let mut executor = RetryExecutor::new(RetryPolicy::default());
        let succeeded = executor.report(Ok(()));
        assert_eq!(succeeded, RetryStep::Succeeded { attempts: 1 });
        assert_eq!(executor.report(Err("error.exec.op")), succeeded);
        assert_eq!(executor.resume(), succeeded);
        assert_eq!(executor.state_name(), "succeeded");
    }

    #[test]
    fn huge_and_odd_values_saturate_instead_of_panicking() {
        let policy = RetryPolicy {
            interval: Duration::MAX,
            max_attempts: u32::MAX,
            backoff_rate: 1e308,
            timeout: Some(Duration::MAX),
            timeout_multipliers: vec![10.0, f64::INFINITY, f64::NAN, -3.0, 0.0, 1e300],
            ..RetryPolicy::default()
        };
        let mut executor = RetryExecutor::new(policy);
        let mut steps = vec![executor.start()];
        for _ in 0..6 {
            steps.push(executor.report(Err("error.exec.op")));
            steps.push(executor.resume());
        }
        assert!(waits(&steps).iter().all(|delay| *delay == Duration::MAX));
        let multipliers: Vec<f64> = steps
            .iter()
            .filter_map(|step| match step {
                RetryStep::Attempt { multiplier, .. } => Some(*multiplier),
                _ => None,
            })
            .collect();
        // Not finite, not positive: read as 1.0 (as the plan of a running effect reads them).
        assert_eq!(multipliers[..6], [10.0, 1.0, 1.0, 1.0, 1.0, 1e300]);

        // NaN and sub-1 rates read as 1.0: the pause stays the interval.
        for backoff_rate in [f64::NAN, 0.5, -2.0] {
            let steps = fail_every_attempt(
                RetryPolicy {
                    interval: Duration::from_secs(3),
                    max_attempts: 3,
                    backoff_rate,
                    ..RetryPolicy::default()
                },
                "error.exec.op",
            );
            assert_eq!(waits(&steps), [3, 3].map(Duration::from_secs).to_vec());
        }
    }

    #[test]
    fn a_resumed_executor_goes_on_where_the_interrupted_one_was() {
        let policy = RetryPolicy {
            jitter: Jitter::Full { seed: 7 },
            max_attempts: 5,
            ..adr_018_policy(5)
        };
        let whole = fail_every_attempt(policy.clone(), "error.exec.timeout.op");
        // Interrupted during attempt 3: the resumed executor runs attempt 3, then pauses and
        // gives up exactly as the uninterrupted one did from there.
        let mut resumed = RetryExecutor::resumed(policy, 3);
        assert_eq!(resumed.attempts(), 3);
        let mut steps = vec![resumed.start()];
        loop {
            let step = resumed.report(Err("error.exec.timeout.op"));
            steps.push(step.clone());
            match step {
                RetryStep::Wait { .. } => steps.push(resumed.resume()),
                _ => break,
            }
        }
        let from_third = whole
            .iter()
            .position(|step| matches!(step, RetryStep::Attempt { attempt: 3, .. }))
            .unwrap();
        assert_eq!(steps, whole[from_third..].to_vec());
    }

    #[test]
    fn steps_carry_their_adr_018_telemetry_names() {
        let mut executor = RetryExecutor::new(adr_018_policy(2));
        assert_eq!(executor.start().telemetry_name(), "timeout_attempt");
        assert_eq!(
            executor
                .report(Err("error.exec.timeout.op"))
                .telemetry_name(),
            "timeout_retry"
        );
        executor.resume();
        assert_eq!(executor.report(Ok(())).telemetry_name(), "timeout_success");
        assert_eq!(
            RetryStep::Exhausted {
                attempts: 2,
                handled: true
            }
            .telemetry_name(),
            "timeout_exhausted"
        );
    }
}
