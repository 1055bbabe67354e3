//! `test --explore N`: random event sequences on virtual time and mocks, checked for broken
//! invariants, the failing one shrunk to a scenario the author can paste.

use super::candidates::Alphabet;
use super::probe::{Setup, Target, probe};
use crate::base::model::scenario::{AfterStep, ExpectStep, Expectation, Scenario, Step};
use crate::pipeline::compile::machine::Delay;
use crate::runtime::run::algorithm::Limits;

/// Most steps in one random sequence.
pub const MAX_SEQUENCE: usize = 20;

/// A broken invariant and the smallest scenario found that shows it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Which of the N runs (from 1) broke it.
    pub run: usize,
    pub problem: String,
    pub scenario: Scenario,
}

/// SplitMix64: small, seedable, the same sequence on every platform.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// Runs `runs` random sequences from `seed`; the first broken invariant, shrunk.
pub fn explore(target: &Target, runs: usize, seed: u64, limits: Limits) -> Option<Finding> {
    let machine = &target.machine;
    let alphabet = Alphabet::of(machine);
    let sends: Vec<Step> = alphabet
        .sends
        .iter()
        .filter(|send| {
            let data = send.data.clone().unwrap_or(serde_json::Value::Null);
            crate::runtime::run::admission::admit_json(machine, &send.send, &data).is_ok()
        })
        .cloned()
        .map(Step::Send)
        .collect();
    let mut waits: Vec<u64> = machine
        .states
        .iter()
        .flat_map(|state| &state.timers)
        .filter_map(|timer| match &timer.delay {
            Delay::Fixed(duration) => Some(duration.as_std().as_millis() as u64),
            _ => None,
        })
        .collect();
    waits.push(1000);
    let setups: Vec<Setup> = std::iter::once(alphabet.base.clone())
        .chain(alphabet.variants.iter().cloned())
        // Inputs the machine refuses are the search's mistake, not the protocol's.
        .filter(|setup| {
            probe(target, setup, &[], limits)
                .failure
                .is_none_or(|failure| !failure.starts_with("inputs:"))
        })
        .collect();
    if setups.is_empty() {
        return None;
    }
    // Delays computed when the run starts (`until: deadline`, `delay: budget / 2`): the waits
    // its first setup leaves pending, so a deadline no fixed wait adds up to is reached too.
    waits.extend(probe(target, &setups[0], &[], limits).timers);
    waits.sort_unstable();
    waits.dedup();
    let mut random = Random(seed);
    for run in 1..=runs {
        let setup = setups[random.below(setups.len())].clone();
        let length = 1 + random.below(MAX_SEQUENCE);
        let steps: Vec<Step> = (0..length)
            .map(|_| {
                let choice = random.below(sends.len() + waits.len());
                match sends.get(choice) {
                    Some(send) => send.clone(),
                    None => Step::After(AfterStep {
                        after: super::generate::duration_text(waits[choice - sends.len()]),
                    }),
                }
            })
            .collect();
        if let Some(problem) = broken(target, &setup, &steps, limits) {
            let (setup, mut steps) = shrink(target, setup, steps, limits);
            let problem = broken(target, &setup, &steps, limits).unwrap_or(problem);
            // A run that stops fails its step; an error nothing handles ends the run as usual,
            // so the scenario says what must not happen, and fails as the run did.
            if problem.starts_with(UNHANDLED) {
                steps.push(Step::Expect(ExpectStep {
                    expect: Box::new(Expectation {
                        unhandled_errors: Some(Vec::new()),
                        ..Expectation::default()
                    }),
                }));
            }
            return Some(Finding {
                run,
                problem,
                scenario: Scenario {
                    name: format!("explore run {run} of seed {seed}"),
                    inputs: setup.inputs_json(),
                    mocks: setup.mocks_map(),
                    clock: None,
                    steps,
                    ..Default::default()
                },
            });
        }
    }
    None
}

/// How a finding of an error event nothing handles begins.
const UNHANDLED: &str = "an error event no transition handles";

/// The invariant the run breaks, if any: a panic, a limit of the engine (a loop), an effect
/// lost, an error event nothing handles.
fn broken(target: &Target, setup: &Setup, steps: &[Step], limits: Limits) -> Option<String> {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        probe(target, setup, steps, limits)
    }));
    let result = match outcome {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
                .unwrap_or_default();
            return Some(format!("the engine panicked: {message}"));
        }
    };
    if let Some(failure) = result.failure {
        return Some(format!("the run stopped: {failure}"));
    }
    if let Some(id) = result.lost_effects.first() {
        return Some(format!(
            "effect `{id}` started and never completed nor was cancelled"
        ));
    }
    result
        .unhandled_errors
        .first()
        .map(|message| format!("{UNHANDLED}: {message}"))
}

/// Drops steps and mocks while the run still breaks an invariant.
fn shrink(
    target: &Target,
    mut setup: Setup,
    mut steps: Vec<Step>,
    limits: Limits,
) -> (Setup, Vec<Step>) {
    let mut index = 0;
    while index < steps.len() {
        let mut shorter = steps.clone();
        shorter.remove(index);
        if broken(target, &setup, &shorter, limits).is_some() {
            steps = shorter;
        } else {
            index += 1;
        }
    }
    for position in 0..setup.mocks.len() {
        if setup.mocks[position].1 == "ok:" {
            continue;
        }
        let mut plainer = setup.clone();
        plainer.mocks[position].1 = "ok:".to_string();
        if broken(target, &plainer, &steps, limits).is_some() {
            setup = plainer;
        }
    }
    (setup, steps)
}
